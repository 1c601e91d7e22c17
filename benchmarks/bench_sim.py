"""Simulator speed: simulated requests per second of wall time on example plans, the compiled core
(hetinfra/sim/_core.c) beside the Python reference loops (HETINFRA_SIM_CORE=python), alternating
within each run so that load hits both alike, and whether their simulation.json is identical.

    .venv/bin/python benchmarks/bench_sim.py [--runs 3] [--sizes 10000,100000] [--specs chat,summarize]

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--specs", default="chat,summarize")
    args = ap.parse_args()
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
