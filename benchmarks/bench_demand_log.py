"""Benchmark reading a gateway demand log: this tree's reader (typed DemandRecord, batch-checked
columns) against the reader of another revision, side by side (not a test).

    .venv/bin/python benchmarks/bench_demand_log.py [--rows 1000000] [--repeat 5] [--before-rev main]

Writes a log of ``--rows`` rows in the gateway's format (hetinfra.gateway.demand: epoch seconds with
milliseconds, model, tokens, region, class, completion tokens, status) to a temp file, then reads it
``--repeat`` times with each reader, alternating (so load on a shared machine hits both alike), and
prints each reader's median and the ratio. The revision's hetinfra/replan/demand_log.py is loaded
from git as a module of its own; both readers must return the same arrays.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hetinfra.gateway.demand import HEADER
from hetinfra.replan.demand_log import read_demand_log

REPO = Path(__file__).resolve().parents[1]
T0 = 1_790_000_000


def write_log(path: Path, rows: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        for i in range(rows):
            fh.write(f"{T0 + i * 0.05:.3f},chat-8b,{rnd.randint(1, 4000)},{rnd.randint(1, 1000)},us-east-1,"
                     f"in<=250,{rnd.randint(1, 900)},200\n")


def reader_of(rev: str):
    """read_demand_log as revision ``rev`` wrote it."""
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:hetinfra/replan/demand_log.py"],
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "demand_log_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("demand_log_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.read_demand_log


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before-rev", default="main")
    args = ap.parse_args(argv)
    before = reader_of(args.before_rev)
    times: dict[str, list[float]] = {args.before_rev: [], "this tree": []}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "demand.csv"
        write_log(log, args.rows)
        clock = lambda: T0 + 86_400  # noqa: E731 - every row inside the sane window
        for _ in range(args.repeat):
            for name, read in ((args.before_rev, before), ("this tree", read_demand_log)):
                t = time.perf_counter()
                got = read(log, clock=clock)
                times[name].append(time.perf_counter() - t)
            old = before(log, clock=clock)
            for field in ("timestamps", "models", "input_tokens", "output_tokens", "regions"):
                assert np.array_equal(getattr(old, field), getattr(got, field)), field
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{args.rows} rows, {args.repeat} reads each, alternating; medians:")
    for name, m in medians.items():
        print(f"  {name:12s} {m:7.2f} s   ({', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"  ratio before/after {medians[args.before_rev] / medians['this tree']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
