"""Simulator speed: simulated requests per second of wall time, on example plans.

    .venv/bin/python benchmarks/bench_sim.py [--runs 3]

Plans: services/chat.yaml (8B, four L40S/A10G replicas, histogram of 9 classes) and
services/summarize.yaml (70B, TP4 and a PP3 pipeline, long prompts). Median of ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="10000,100000")
    args = ap.parse_args()
    from hetinfra.sim import WorkloadConfig, simulate_plan_file

    with tempfile.TemporaryDirectory() as tmp:
        for spec in ("chat", "summarize"):
            out = Path(tmp) / spec
            subprocess.run([sys.executable, "-m", "hetinfra.cli", "plan", str(REPO / f"services/{spec}.yaml"), "--out",
                            str(out), "--no-baselines"], check=True, capture_output=True, cwd=REPO)
            for n in (int(x) for x in args.sizes.split(",")):
                times = []
                for run in range(args.runs):
                    t0 = time.perf_counter()
                    doc = simulate_plan_file(out, config=WorkloadConfig(requests=n, seed=run))
                    times.append(time.perf_counter() - t0)
                med = statistics.median(times)
                steps = sum(u["steps"] for u in doc["units"])
                print(f"{spec:10s} {n:>7d} requests: median {med:6.2f} s  ({n / med:>8.0f} simulated req/s; "
                      f"{steps} engine steps simulated; met={doc['met']})", flush=True)


if __name__ == "__main__":
    main()
