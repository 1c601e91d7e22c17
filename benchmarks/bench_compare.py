"""Side-by-side timings of two checkouts: `hetinfra --help` and `hetinfra plan` on every example
(verified, baselines on, template cache off), runs alternating between the two so that the machine's
load falls on both alike; prints medians.

    python benchmarks/bench_compare.py /work/base /work/wt-doc [--repeat 3] [--help-repeat 9]

Each checkout is run with its own ``.venv/bin/hetinfra``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path


def timed(cmd: list[str], cwd: Path) -> float:
    env = dict(os.environ, HETINFRA_CACHE_DIR="off")
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def compare(trees: list[Path], cmd_of, repeat: int) -> list[float]:
    """Median wall time per tree of ``cmd_of(tree)``, the trees alternating in each round."""
    times: list[list[float]] = [[] for _ in trees]
    for _ in range(repeat):
        for i, tree in enumerate(trees):
            times[i].append(timed(cmd_of(tree), tree))
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2, type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--help-repeat", type=int, default=9)
    args = ap.parse_args()
    trees = [t.resolve() for t in args.trees]
    exe = {t: str(t / ".venv" / "bin" / "hetinfra") for t in trees}
    names = " / ".join(t.name for t in trees)
    help_s = compare(trees, lambda t: [exe[t], "--help"], args.help_repeat)
    print(f"hetinfra --help                 {' / '.join(f'{s:.3f}' for s in help_s)} s  ({names}, median of "
          f"{args.help_repeat})")
    for spec in sorted((trees[0] / "services").glob("*.yaml")):
        plan_s = compare(trees, lambda t: [exe[t], "plan", f"services/{spec.name}", "--json"], args.repeat)
        print(f"hetinfra plan {spec.name:<18} {' / '.join(f'{s:.3f}' for s in plan_s)} s  (median of {args.repeat})")


if __name__ == "__main__":
    main()
