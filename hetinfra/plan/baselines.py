"""Mélange's comparison for a plan (plan.json ``baselines``): the cheapest plan on each single GPU
type, solved within what is left of the plan's work budget (``hetinfra.plan.budget``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetinfra.plan.origins import describe_key, with_origins
from hetinfra.plan.planner import prune_by_flows, to_problem

if TYPE_CHECKING:
    from hetinfra.plan.inputs import PlanInputs
    from hetinfra.plan.library import TemplateUnit
    from hetinfra.plan.planner import PlanResult


@dataclass
class Baseline:
    gpu: str
    feasible: bool
    cost: float | None = None
    instances: int = 0
    allocation: dict[str, int] | None = None  # unit id -> count
    reason: str | None = None
    #: the shared wall-clock limit cut this baseline's solve (or left it no time): it may differ on a faster machine
    safety_stop: bool = False


def baselines(inputs: PlanInputs, all_units: list[TemplateUnit], time_limit_s: float, mip_gap: float,
              max_nodes: int | None = None) -> list[Baseline]:
    """Mélange's comparison: the cheapest plan using one GPU type only (caps kept, no budget).

    Each GPU type's units are pruned among themselves: a unit dominated by another GPU type's
    unit in the joint problem may be the best of its own type. All GPU types share one
    ``time_limit_s`` (a safety stop: what is left of the plan's budget; ``max_nodes`` is the deterministic limit), and each solve
    decomposes per model (no budget, no locality: nothing links them unless a cap is shared)."""
    from hetinfra.solver import clock
    from hetinfra.solver.solve import solve

    deadline = clock.now() + time_limit_s
    out = []
    by_gpu: dict[str, list[TemplateUnit]] = {}
    for u in all_units:
        by_gpu.setdefault(u.template.gpu, []).append(u)
    for gpu in sorted({u.template.gpu for u in all_units if not u.template.mixed}):
        own = prune_by_flows(inputs, by_gpu[gpu])
        sub = with_origins(inputs, own, to_problem(inputs, own)).replace(
            budget=None, objective="min_cost", running={}, unmet_penalty=None, locality=0.0)
        missing = sub.unserved()
        if missing:
            out.append(Baseline(gpu, False, reason=f"cannot serve {missing[0][0]} requests {describe_key(sub, missing[0])}"
                                                   " under the SLOs"))
            continue
        r = solve(sub, time_limit_s=max(0.05, deadline - clock.now()), mip_gap=mip_gap, max_nodes=max_nodes)
        stop = r.safety_stop or r.status in ("time_limit", "no_solution")
        if not r.feasible:
            out.append(Baseline(gpu, False, reason="availability caps too small to serve all demand"
                                if r.status == "infeasible" else "no plan within the baselines' time limit",
                                safety_stop=stop))
            continue
        out.append(Baseline(gpu, True, cost=r.cost(sub), instances=sum(r.n.values()), allocation=dict(r.n),
                            safety_stop=stop))
    return out


def compared_with(pr: PlanResult, pool: list[TemplateUnit]) -> tuple[list[Baseline], float | None]:
    """What the plan is compared with (min_cost only; else nothing): the cheapest plan on each single
    GPU type over ``pool`` (Mélange's baselines) and the plan's cost without committed terms."""
    from hetinfra.plan.budget import current
    from hetinfra.plan.purchase import without_committed

    if pr.problem.objective != "min_cost":
        return [], None
    settings = pr.inputs.spec.planning
    budget = current()
    found = baselines(pr.inputs, pool, budget.solve_limit(settings.time_limit_s), settings.mip_gap, settings.max_nodes)
    if any(b.safety_stop for b in found):
        budget.stop("the single-GPU baselines")  # hetinfra.plan.pipeline.BASELINES
    return found, without_committed(pr)
