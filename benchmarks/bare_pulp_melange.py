"""The yardstick for hetinfra's front door: Mélange's own ILP, built with PuLP, solved by HiGHS.

    python benchmarks/bare_pulp_melange.py [V1|V2] [RATE]

A fresh process that does what the released Mélange solver does for one case of the shared
regression fixtures (/work/shared/data/melange-release), and nothing else: scale the workload
histogram by the rate, cut every bucket into `slice_factor` equal slices, and solve the paper's
bin-packing ILP (Griggs et al. 2024, §5.4.3, eqs. 1-5) with PuLP's HiGHS interface (highspy):

    min  sum_j c_j B_j
    s.t. sum_j A_ij = 1                          for every slice i
         sum_i A_ij * rate_i / MaxTput_j(i) <= B_j   for every GPU type j
         A_ij in {0, 1},  B_j integer >= 0

It prints the allocation and cost, so the benchmark can check that it found the fixtures' optimum.
benchmarks/bench_scale.py --front times this script, process start to exit, beside `hetinfra plan`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pulp

# the shared reference data beside the checkout, or where HETINFRA_SHARED says (a git worktree), as
# bench_scale.front_case reads it
DATA = Path(os.environ.get("HETINFRA_SHARED") or Path(__file__).resolve().parents[2] / "shared") / "data" / "melange-release"


def slices(weights: list[list[float]], rate: float, slice_factor: int) -> list[tuple[int, int, float]]:
    """(input bucket, output bucket, request rate) of every slice."""
    return [(i, j, w * rate / slice_factor) for i, row in enumerate(weights) for j, w in enumerate(row)
            for _ in range(slice_factor)]


def solve(case: str, rate: float, data: Path = DATA) -> dict:
    fixtures = json.loads((data / "melange_regression_fixtures.json").read_text())
    tputs = json.loads((data / "melange_profiles_llama2-7b_feb2024.json").read_text())["tputs"]
    settings = fixtures["solver_settings"]
    gpus, price = settings["gpus"], settings["cost_per_hour"]
    work = slices(fixtures["cases"][case]["workload_distribution"], rate, settings["slice_factor"])
    assign = [{g: pulp.LpVariable(f"a_{k}_{g}", cat=pulp.LpBinary) for g in gpus} for k in range(len(work))]
    count = {g: pulp.LpVariable(f"b_{g}", lowBound=0, cat=pulp.LpInteger) for g in gpus}
    ilp = pulp.LpProblem("melange", pulp.LpMinimize)
    ilp += pulp.lpSum(price[g] * count[g] for g in gpus)
    for a in assign:
        ilp += pulp.lpSum(a.values()) == 1
    for g in gpus:
        ilp += pulp.lpSum(a[g] * (r / tputs[g][i][j]) for a, (i, j, r) in zip(assign, work)) <= count[g]
    ilp.solve(pulp.HiGHS(msg=False))
    alloc = {g: round(count[g].value()) for g in gpus if round(count[g].value())}
    return {"status": pulp.LpStatus[ilp.status], "alloc": alloc,
            "cost": round(sum(price[g] * n for g, n in alloc.items()), 6)}


if __name__ == "__main__":
    print(json.dumps(solve(sys.argv[1] if len(sys.argv) > 1 else "V1", float(sys.argv[2]) if len(sys.argv) > 2 else 32)))
