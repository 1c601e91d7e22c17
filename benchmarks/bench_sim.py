"""Simulator speed: simulated requests per second of wall time on example plans, the compiled core
(hetinfra/sim/_core.c) beside the Python reference loops (HETINFRA_SIM_CORE=python), alternating
within each run so that load hits both alike, and whether their simulation.json is identical.

    .venv/bin/python benchmarks/bench_sim.py [--runs 3] [--sizes 10000,100000] [--specs chat,summarize]
    .venv/bin/python benchmarks/bench_sim.py --against /work/main [--runs 5]

``--against TREE``: the compiled core of this checkout beside TREE's (its .venv/bin/python), each
simulation timed inside a fresh process of its own tree on the same plan, the two alternating
(before/after a change to the simulator, side by side in one run).

Plans (--no-verify, so the plan does not depend on the simulator): services/chat.yaml (8B, L40S
replicas, a histogram of 9 classes) and services/summarize.yaml (70B, TP4 and a PP3 pipeline, long
prompts) by default. Medians of ``--runs`` runs (seeds 0, 1, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(out: Path, n: int, seed: int, loops: str) -> tuple[float, dict]:
    from hetinfra.sim import WorkloadConfig, simulate_plan_file

    os.environ["HETINFRA_SIM_CORE"] = loops
    t0 = time.perf_counter()
    doc = simulate_plan_file(out, config=WorkloadConfig(requests=n, seed=seed))
    return time.perf_counter() - t0, doc


_TIMER = """
import json, sys, time
from hetinfra.sim import WorkloadConfig, simulate_plan_file
out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
simulate_plan_file(out, config=WorkloadConfig(requests=1000, seed=seed))  # imports and first-call costs
t0 = time.perf_counter()
doc = simulate_plan_file(out, config=WorkloadConfig(requests=n, seed=seed))
print(json.dumps([time.perf_counter() - t0, doc["met"]]))
"""


def against(other: Path, specs: list[str], sizes: list[int], runs: int) -> None:
    """Medians of the core's wall time in this tree and in ``other``, alternating per run."""
    trees = {"this": sys.executable, other.name: str(other / ".venv" / "bin" / "python")}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            out = Path(tmp) / spec
            subprocess.run([sys.executable, "-m", "hetinfra.cli", "plan", str(REPO / f"services/{spec}.yaml"), "--out",
                            str(out), "--no-baselines", "--no-verify"], check=True, capture_output=True, cwd=REPO)
            for n in sizes:
                walls: dict[str, list[float]] = {k: [] for k in trees}
                for run in range(runs):
                    for name, python in trees.items():
                        p = subprocess.run([python, "-c", _TIMER, str(out), str(n), str(run)], check=True,
                                           capture_output=True, text=True, cwd=REPO)
                        walls[name].append(json.loads(p.stdout)[0])
                med = {k: statistics.median(v) for k, v in walls.items()}
                a, b = med["this"], med[other.name]
                print(f"{spec:10s} {n:>7d} requests: this tree {a:6.3f} s, {other.name} {b:6.3f} s: "
                      f"{a / b:5.2f}x (median of {runs})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--specs", default="chat,summarize")
    ap.add_argument("--against", type=Path, default=None, help="another checkout with its own .venv")
    args = ap.parse_args()
    if args.against is not None:
        return against(args.against.resolve(), args.specs.split(","), [int(x) for x in args.sizes.split(",")],
                       args.runs)
    from hetinfra.sim import core

    if not core.available():
        print("the compiled core is not built here: only the Python loops run", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.specs.split(","):
            out = Path(tmp) / spec
            subprocess.run([sys.executable, "-m", "hetinfra.cli", "plan", str(REPO / f"services/{spec}.yaml"), "--out",
                            str(out), "--no-baselines", "--no-verify"], check=True, capture_output=True, cwd=REPO)
            for n in (int(x) for x in args.sizes.split(",")):
                walls: dict[str, list[float]] = {"python": [], "core": []}
                same = True
                for run in range(args.runs):
                    py, ref = timed(out, n, run, "python")
                    c, doc = timed(out, n, run, "")
                    walls["python"].append(py)
                    walls["core"].append(c)
                    same &= json.dumps(ref, sort_keys=True) == json.dumps(doc, sort_keys=True)
                p, c = statistics.median(walls["python"]), statistics.median(walls["core"])
                steps = sum(u["steps"] for u in doc["units"])
                print(f"{spec:10s} {n:>7d} requests: core {c:6.3f} s ({n / c:>8.0f} req/s), Python loops {p:6.3f} s "
                      f"({n / p:>7.0f} req/s): {p / c:5.1f}x; {steps} engine steps; met={doc['met']}; "
                      f"identical={same}", flush=True)
    os.environ.pop("HETINFRA_SIM_CORE", None)


if __name__ == "__main__":
    main()
