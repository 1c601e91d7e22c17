"""Simulate issue 38's acceptance plan (tools/lora_acceptance.py) instance by instance with the LoRA
engine variant (hetinfra.sim.lora): each instance gets Poisson arrivals of each adapter it holds at
the ILP's routed rate split evenly over the unit's holders, at ``--load`` x the planned demand, and
reports p99 TTFT and TPOT against the objectives (several seeds: replications).

    .venv/bin/python -m tools.lora_simcheck [--load 1.0] [--seeds 3] [--requests 3000]
"""

from __future__ import annotations

import argparse
import json
import random

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.calibration import CALIBRATION
from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION, build_engine
from hetinfra.perf.lora import cold_load_ms, with_slot_memory
from hetinfra.sim.clock import run_replicas
from hetinfra.sim.lora import LoraEngine, LoraRequest, LoraVLLM
from hetinfra.sim.replica import Replica, ReplicaConfig
from hetinfra.sim.stats import percentile
from tools import lora_acceptance as acc

GPU_OF = {itype: gpu for gpu, (itype, _) in acc.OFFERS.items()}


def instance_rates(res, problem) -> list[tuple[str, int, dict[str, float]]]:
    """(unit, slots, adapter -> req/s) of every instance of the plan: each instance of a unit holds all
    the unit's adapters and gets an even share of its routed rate."""
    out = []
    for u, n in sorted(res.n.items()):
        slots = next(x.slots for x in problem.units if x.id == u)
        held = sorted(a for (uu, a) in res.holds if uu == u)
        rates = {a: sum(v for (uu, _, w), v in res.flow.items() if uu == u and w.endswith("~" + a)) / n for a in held}
        out += [(u, slots, rates)] * n
    return out


def simulate(unit: str, slots: int, rates: dict[str, float], load: float, seed: int, n_req: int) -> dict:
    arch, gpu = MODELS["llama-3.1-8b"], GPUS[GPU_OF[unit.split("+")[0]]]
    eng = build_engine(arch, with_slot_memory(gpu, arch, slots, acc.RANK, 1, 1, GPU_MEMORY_UTILIZATION), 1, 1,
                       acc.ISL, acc.OSL, "bf16", GPU_MEMORY_UTILIZATION, 256, None, None, CALIBRATION)
    lora = LoraEngine(eng, gpu.name, acc.RANK, slots, cold_load_ms(arch, acc.RANK) / 1e3)
    rng, total = random.Random(seed), sum(rates.values()) * load
    names, weights = list(rates), list(rates.values())
    t, reqs = 0.0, []
    for i in range(n_req):
        t += rng.expovariate(total)
        reqs.append(LoraRequest(i, t, acc.ISL, acc.OSL, rng.choices(names, weights)[0]))
    run_replicas([Replica(lora, ReplicaConfig(max_num_seqs=256, policy=LoraVLLM()))], reqs)
    warm = reqs[n_req // 10:]
    ttft = sorted((r.first - r.arrival) * 1e3 for r in warm)
    tpot = sorted((r.finish - r.first) * 1e3 / (r.output - 1) for r in warm)
    return {"ttft_p99_ms": percentile(ttft, 0.99), "tpot_p99_ms": percentile(tpot, 0.99)}


def check(res, problem, load: float, seeds: int, n_req: int) -> dict:
    """The worst instance's p99 TTFT and TPOT over ``seeds`` replications."""
    worst = {"ttft_p99_ms": 0.0, "tpot_p99_ms": 0.0}
    for seed in range(seeds):
        for k, (u, slots, rates) in enumerate(instance_rates(res, problem)):
            got = simulate(u, slots, rates, load, seed * 1000 + k, n_req)
            worst = {m: max(worst[m], got[m]) for m in worst}
    return {m: round(v, 1) for m, v in worst.items()}


def main(argv=None) -> dict:
    """Verify as the planner does: simulate, and while an objective is missed derate every engine by
    0.9 and re-solve (at most ``--rounds``)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)
    derate, rounds = 1.0, []
    for _ in range(args.rounds):
        res, problem = acc.solve_acceptance(derate=derate)
        worst = check(res, problem, args.load, args.seeds, args.requests)
        meets = worst["ttft_p99_ms"] <= acc.TTFT_MS and worst["tpot_p99_ms"] <= acc.TPOT_MS
        rounds.append({"derate": round(derate, 4), "gpus": sum(res.n.values()), "worst_instance": worst,
                       "meets": meets})
        if meets:
            break
        derate *= 0.9
    return {"load": args.load, "seeds": args.seeds, "rounds": rounds}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
