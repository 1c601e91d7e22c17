"""Issue 38's acceptance: 50 LoRA adapters of one 8B base, Zipf demand (40 req/s in all), placed by the
ILP (solver.rows.add_adapter_*) against one deployment per adapter and one deployment holding all 50
on every replica. Same offers, same performance model (hetinfra.perf.lora), same objectives.

    .venv/bin/python -m tools.lora_acceptance [--adapters 50] [--rate 40] [--zipf 1.0]
"""

from __future__ import annotations

import argparse
import json
import math
from functools import lru_cache

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.lora import lora_estimate
from hetinfra.plan.adapters import SLOT_TIERS, adapter_demand, adapter_holds, with_adapter_keys
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve
from hetinfra.spec.adapters import AdapterDemand, AdapterSpec

#: single-GPU on-demand offers of aws us-east-1 in the embedded snapshot (skypilot-catalog-v8, 2025-11-01)
OFFERS = {"L4": ("g6.xlarge", 0.8048), "L40S": ("g6e.xlarge", 1.861), "H100": ("p5.4xlarge", 6.88)}
ISL, OSL, TTFT_MS, TPOT_MS, RANK = 500, 200, 2000.0, 100.0, 16
BASE = "llama-8b"


def zipf_adapters(n: int, total: float, s: float) -> list[AdapterSpec]:
    weights = [1 / (i + 1) ** s for i in range(n)]
    return [AdapterSpec(name=f"a{i:02d}", base=BASE, source=f"org/a{i:02d}", rank=RANK,
                        demand=AdapterDemand(share=w / sum(weights))) for i, w in enumerate(weights)]


@lru_cache(maxsize=None)
def rate(gpu: str, slots: int) -> float:
    est = lora_estimate(MODELS["llama-3.1-8b"], GPUS[gpu], tp=1, input_tokens=ISL, output_tokens=OSL,
                        ttft_ms=TTFT_MS, tpot_ms=TPOT_MS, slots=slots, rank=RANK)
    return est.max_rps if est.feasible else 0.0


def units(demand: dict, tiers=SLOT_TIERS, derate: float = 1.0) -> tuple[SolverUnit, ...]:
    out = []
    for gpu, (itype, price) in OFFERS.items():
        for k in tiers:
            r = rate(gpu, k) * derate
            if r > 0:
                out.append(SolverUnit(f"{itype}+lora{k}", BASE, price, 1, ((("aws", "us-east-1", gpu), 1),),
                                      with_adapter_keys({"c": r}, demand), "us-east-1", slots=k))
    return tuple(out)


def cheapest(need_rps: float, slots: int, derate: float = 1.0) -> tuple[int, float]:
    """(GPUs, $/h) of the cheapest single-GPU-type deployment serving need_rps with `slots` adapters per engine."""
    best = None
    for gpu, (_, price) in OFFERS.items():
        r = rate(gpu, slots) * derate
        if r > 0:
            n = max(1, math.ceil(need_rps / r - 1e-9))
            best = min(best or (n, n * price), (n, n * price), key=lambda x: x[1])
    return best


def solve_acceptance(adapters_n: int = 50, rate_rps: float = 40.0, zipf: float = 1.0, derate: float = 1.0):
    """(SolveResult, AllocationProblem) of the acceptance's placement, every rate x ``derate``."""
    adapters = zipf_adapters(adapters_n, rate_rps, zipf)
    demand, keys = adapter_demand(BASE, {"c": rate_rps}, adapters)
    us = units(demand, derate=derate)
    best = max(max(u.rates.values()) for u in us)
    problem = AllocationProblem(units=us, demand=demand, adapters=adapter_holds(BASE, adapters, keys, demand, best))
    return solve(problem, time_limit_s=120, mip_gap=1e-3), problem


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapters", type=int, default=50)
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--derate", type=float, default=1.0, help="every engine's rate x this (tools.lora_simcheck finds it)")
    args = ap.parse_args(argv)
    adapters = zipf_adapters(args.adapters, args.rate, args.zipf)
    demand, keys = adapter_demand(BASE, {"c": args.rate}, adapters)
    res, problem = solve_acceptance(args.adapters, args.rate, args.zipf, args.derate)
    us = problem.units
    plan_gpus = sum(res.n.values())
    plan_cost = res.cost(problem)
    per = [cheapest(sum(demand[k] for k in keys[a.name]), 1, args.derate) for a in adapters]
    per_gpus, per_cost = sum(g for g, _ in per), sum(c for _, c in per)
    all_gpus, all_cost = cheapest(args.rate, args.adapters, args.derate)
    layout = {u: {"instances": n, "adapters": sorted(a for (uu, a) in res.holds if uu == u)}
              for u, n in sorted(res.n.items())}
    return {"status": res.status, "plan": {"gpus": plan_gpus, "usd_per_hour": round(plan_cost, 4), "units": layout},
            "one_deployment_per_adapter": {"gpus": per_gpus, "usd_per_hour": round(per_cost, 4)},
            "all_adapters_on_every_replica": {"gpus": all_gpus, "usd_per_hour": round(all_cost, 4)},
            "gpu_ratio_vs_per_adapter": round(plan_gpus / per_gpus, 4),
            "gpu_ratio_vs_all_on_every_replica": round(plan_gpus / all_gpus, 4)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
