"""What ``hetinfra simulate`` runs: one simulation or several replications judged with a confidence
bound, at a stated number of requests or at the run length the plan needs (``requests_for``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Callable

from hetinfra.sim.plan_load import read_inputs
from hetinfra.sim.replications import judge, requests_for, simulate_replications
from hetinfra.sim.spec_drift import spec_drift
from hetinfra.sim.workload import WorkloadConfig

__all__ = ["OBJECTIVES_MISSED", "SPEC_CHANGED", "simulate_file", "bound_lines", "too_few_lines"]

#: ``simulate --check``'s exit status when an objective is missed or a unit is unstable
#: (docs/reference/exit-codes.md): not 2-4, which are errors, nor 10/11, replan's outcomes
OBJECTIVES_MISSED = 12
#: ``simulate --check``'s exit status when the spec is not the one the plan was made from (its sha256
#: is not plan.json inputs.spec_sha256): the simulation checks plan.json's own objectives and demand,
#: which the user may no longer have; ``--plan-promise`` checks them knowingly
SPEC_CHANGED = 13


def simulate_file(plan_path: str | Path, spec_path: str | Path | None, config: WorkloadConfig,
                  replications: int = 1, auto_requests: bool = False,
                  progress: Callable[[int, int], None] | None = None, period: int | None = None) -> dict:
    """The simulation.json dict of the plan at ``config``: with ``replications`` > 1, the judgement
    (hetinfra.sim.replications.judge) of seeds config.seed .. config.seed + replications - 1; with
    ``auto_requests``, the first replication runs at config.requests and, where
    ``requests_for`` asks for more, every replication runs at that. ``progress(done, total)``:
    requests simulated so far, of the total now foreseen. ``period``: the fleet of that profile period
    at its demand (hetinfra.sim.period), not the peak's."""
    plan, spec, sp, document, text = read_inputs(plan_path, spec_path, period)
    models = max(sum(1 for m in plan.models if m.rate_rps), 1)
    seeds = [config.seed + j for j in range(replications)]
    if replications > 1:  # judged as the confirmation judges (hetinfra.sim.batches.run_spread reads the batches)
        config = replace(config, batch_means=tuple(seeds))
    state = {"done": 0, "total": config.requests * models * replications}

    def tick(n: int) -> None:
        state["done"] += n
        if progress is not None:
            progress(state["done"], state["total"])

    first = simulate_replications(plan, spec, sp, config, seeds[:1], detail=True, ticks=tick)
    if auto_requests:
        need = requests_for(plan, first[0], least=config.requests)
        if need > config.requests:
            config = replace(config, requests=need)
            state["total"] = state["done"] + need * models * replications
            first = simulate_replications(plan, spec, sp, config, seeds[:1], detail=True, ticks=tick)
    sims = first + simulate_replications(plan, spec, sp, config, seeds[1:], detail=True, ticks=tick)
    doc = sims[0] if replications == 1 else judge(sims)
    drift = spec_drift(document, spec, sp, text)
    doc = doc if drift is None else {**doc, "spec_changed": drift}
    return doc if period is None else {**doc, "period": period}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def bound_lines(doc: dict) -> list[str]:
    """Per model of a judged simulation, e.g. "chat-8b: p99 TPOT 78.7 ms (95% bound 80.9) vs 80 - met"."""
    out = []
    conf = f"{doc.get('confidence', 0.95):.0%}"
    for m in doc["models"]:
        slo, est, bound = m["slo"], m.get("estimate") or {}, m.get("bound") or {}
        parts = [f"{slo['percentile']} {name} {_ms(est.get(key))} ms ({conf} bound {_ms(bound.get(key))}) "
                 f"vs {slo[key]:g}" for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"))]
        if slo.get("attainment") is not None and est.get("attainment") is not None:
            parts.append(f"attainment {est['attainment']:.4f} ({conf} bound {bound['attainment']:.4f}) "
                         f"vs {slo['attainment']:g}")
        stable, decision, runs = m.get("stable", True), m["decision"], m["replications"]
        out.append(f"{m['model']}: " + ", ".join(parts) + f" - {decision}{'' if stable else ', a unit is unstable'} "
                   f"({runs} replications)" + (_undecided_words(runs, conf) if decision == "undecided" and stable
                                               else ""))
    return out


def _undecided_words(runs: int, conf: str) -> str:
    """What an undecided model's decision means and what decides it: its pessimistic bound is outside
    an objective and its optimistic one inside, so ``runs`` replications neither meet nor miss it
    (``--check`` takes it as not met: exit 12). More replications narrow both bounds."""
    return (f": an objective lies between its optimistic and pessimistic {conf} bounds, so {runs} replications "
            f"neither meet nor miss it (--check takes it as not met); run more, e.g. --replications "
            f"{max(2 * int(runs), 6)}")


def too_few_lines(doc: dict) -> list[str]:
    """A line per model whose objective's percentile rests on fewer measured requests than it takes to
    have one beyond it (1 / (1 - q): 100 for p99, 20 for p95): its figure is then the largest request
    seen, not a percentile, and ``simulate --check`` does not take it as met (a plan simulated at
    ``--requests 5`` said 'objectives met' and exited 0 on 5 requests)."""
    from hetinfra.sim.stats import PERCENTILES

    out = []
    for m in doc.get("models", []):
        name = (m.get("slo") or {}).get("percentile") or "p99"
        q = PERCENTILES.get(name)
        need = 1 if q is None else math.ceil(100.0 / (100.0 - q) - 1e-9)
        n = int(m.get("count") or 0)
        if m.get("met") and n < need:
            out.append(f"{m['model']}: its {name} rests on {n} measured request(s), "
                       f"fewer than the {need} it takes; run more --requests")
    return out
