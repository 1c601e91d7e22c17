"""How far apart are a plan's runs, and what do their batches say? (hetinfra.sim.batches.run_spread)

    python benchmarks/bench_spread.py OUT_DIR [--seeds 1001,1004,...] [--requests 20000] [--load 1.2]

Simulates the plan in OUT_DIR (a `hetinfra plan --out` folder) once per seed, each run carrying its
batch means, and prints per model and statistic (TTFT and TPOT at the objective's percentile): the
runs' mean and sd, and the sd between runs that the batches imply (their pooled within-run sd over
sqrt(k)), with the requests each batch holds beyond the percentile (the floor needs MIN_TAIL). Where
the two sds agree, the batches are a fair estimate of the runs' spread; verification floors the runs'
sd with the batches' (docs/verification.md). Figures: benchmarks/results/spread_stop66.txt.
"""

from __future__ import annotations

import argparse
import math
import statistics

from hetinfra.sim.batches import MIN_TAIL, run_spread
from hetinfra.sim.check import read_inputs
from hetinfra.sim.replications import simulate_replications
from hetinfra.sim.stats import PERCENTILES
from hetinfra.sim.workload import WorkloadConfig

DEFAULT_SEEDS = "1001,1004,1007,1010,1013,1016"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seeds", default=DEFAULT_SEEDS, help="comma-separated seeds, one run each")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--load", type=float, default=1.2)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    plan, spec, spec_path, _doc, _text = read_inputs(f"{args.out_dir}/plan.json", None, None)
    config = WorkloadConfig(requests=args.requests, load=args.load, batch_means=None)
    sims = simulate_replications(plan, spec, spec_path, config, seeds, detail=False)
    for name in [m["model"] for m in sims[0]["models"]]:
        entries = [next(m for m in s["models"] if m["model"] == name) for s in sims]
        q_name = entries[0]["slo"]["percentile"]
        q, fewest = PERCENTILES[q_name], min(e["count"] or 0 for e in entries)
        for index, stat in enumerate(("ttft_ms", "tpot_ms")):
            runs = [e[stat][q_name] for e in entries]
            floor = run_spread([e.get("batches") for e in entries], index, fewest, None)
            tail = fewest / 10 * (1 - q / 100) if q is not None else math.inf
            print(f"{name} {q_name} {stat}: runs mean {statistics.mean(runs):.2f} sd {statistics.stdev(runs):.2f} "
                  f"(n={len(runs)}); batches imply sd {floor if floor is None else round(floor, 2)} "
                  f"({tail:.0f} requests a batch beyond the percentile; floored: {tail >= MIN_TAIL})")


if __name__ == "__main__":
    main()
