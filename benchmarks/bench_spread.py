"""How far apart are a plan's runs, and what do their batches say? (hetinfra.sim.batches.run_spread)

    python benchmarks/bench_spread.py OUT_DIR [--seeds 1001,1004,...] [--requests 20000] [--load 1.2]

Simulates the plan in OUT_DIR (a `hetinfra plan --out` folder) once per seed, each run carrying its
batch means, and prints per model and statistic (TTFT and TPOT at the objective's percentile), for
the percentile itself and for the share of requests within the objective: the runs' mean and sd, and
the sd between runs that their batches imply (hetinfra.sim.batches.run_spread: the pooled within-run
sd over sqrt(k)). Where the two sds agree, the batches are a fair estimate of the runs' spread;
verification floors the shares' spread with the batches' (docs/verification.md). Figures:
benchmarks/results/spread_stop66.txt.
"""

from __future__ import annotations

import argparse
import statistics

from hetinfra.sim.batches import run_share, run_spread
from hetinfra.sim.check import read_inputs
from hetinfra.sim.replications import simulate_replications
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
        runs = [e.get("batches") for e in entries]
        for index, stat in enumerate(("ttft_ms", "tpot_ms")):
            values = [e[stat][q_name] for e in entries]
            shares = [run_share(r, index + 3) for r in runs]
            line = f"{name} {q_name} {stat}: {_spread(values, run_spread(runs, index))}"
            if all(v is not None for v in shares):
                line += f"; share within the objective {_spread(shares, run_spread(runs, index + 3))}"
            print(line)


def _spread(values: list[float], implied: float | None) -> str:
    implied = "-" if implied is None else f"{implied:.4g}"
    return (f"runs mean {statistics.mean(values):.4g} sd {statistics.stdev(values):.4g} (n={len(values)}), "
            f"batches imply sd {implied}")

if __name__ == "__main__":
    main()
