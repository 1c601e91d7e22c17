"""Median `hetinfra plan` wall time and cost per example in services/ (verified, no baselines skipped),
for one or more hetinfra executables side by side (e.g. a base checkout's and this one's).

    python benchmarks/bench_plan_examples.py [--repeat 3] [--exe /work/base/.venv/bin/hetinfra ...]

Prints, per example and executable: median seconds over --repeat runs, $/h, and (where plan.json has
it) the over-provisioning ratio. Runs are interleaved across executables so machine load hits each alike.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exe", action="append", default=[])
    args = ap.parse_args()
    exes = args.exe or [shutil.which("hetinfra") or str(Path(sys.executable).parent / "hetinfra")]
    examples = sorted((REPO / "services").rglob("*.yaml"))
    for spec in examples:
        times: dict[str, list[float]] = {e: [] for e in exes}
        docs: dict[str, dict] = {}
        for _ in range(args.repeat):
            for exe in exes:
                with tempfile.TemporaryDirectory() as tmp:
                    t = time.perf_counter()
                    res = subprocess.run([exe, "plan", str(spec), "--out", tmp, "--json"], capture_output=True, text=True)
                    times[exe].append(time.perf_counter() - t)
                    docs[exe] = json.loads(res.stdout) if res.returncode == 0 else {"error": res.stderr.strip()[-120:]}
        for exe in exes:
            d = docs[exe]
            over = ((d.get("fidelity") or {}).get("over_provisioning") or {}).get("ratio")
            cost = d.get("cost_usd_per_hour")
            print(f"{spec.relative_to(REPO / 'services')}\t{exe}\tmedian {statistics.median(times[exe]):.2f} s\t"
                  f"${cost if cost is None else round(cost, 2)}/h\tover-provisioning {over}" + (
                      f"\t{d['error']}" if "error" in d else ""), flush=True)


if __name__ == "__main__":
    main()
