"""Purchase options in a plan: demand levels from the spec's profiles (the solver's periods), and
plan.json's account of a committed base and its top-ups (``purchase``, ``allocations[].purchase``,
``allocations[].counts_by_period``).

A plan plans purchases when the spec allows a committed term or gives a ``demand.profile``; other
plans keep their plan.json exactly as before (no new keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra.solver.problem import Period

if TYPE_CHECKING:
    from hetinfra.document.allocation import Allocation
    from hetinfra.document.sections import BreakEven, Purchase


def planned(spec) -> bool:
    """Whether the spec plans purchases (a committed term allowed, or a demand profile)."""
    return (any(t.startswith("committed") for t in spec.infrastructure.terms())
            or any(m.demand.profile is not None for m in spec.models))


def profile_length(spec) -> int:
    return max((len(m.demand.profile) for m in spec.models if m.demand.profile is not None), default=1)


def multipliers(spec, model) -> list[float]:
    """The model's demand multiplier in each profile period (1.0 throughout without a profile)."""
    return list(model.demand.profile) if model.demand.profile is not None else [1.0] * profile_length(spec)


def demand_periods(spec) -> tuple[Period, ...]:
    """The distinct demand levels of the profiles, in order of first appearance, each with its share
    of the periods; () when no model has a profile (one period at the declared demand)."""
    if not any(m.demand.profile is not None for m in spec.models):
        return ()
    levels: dict[tuple[float, ...], list[int]] = {}
    table = [multipliers(spec, m) for m in spec.models]
    n = profile_length(spec)
    for t in range(n):
        levels.setdefault(tuple(col[t] for col in table), []).append(t)
    names = [m.name for m in spec.models]
    return tuple(Period(len(hours) / n, tuple(zip(names, key)), tuple(hours)) for key, hours in levels.items())


def _level_of(problem, n: int) -> list[int]:
    """Profile period -> index of its level in ``problem.periods``."""
    out = [0] * n
    for lv, per in enumerate(problem.periods):
        for t in per.hours:
            out[t] = lv
    return out


def allocation_extras(pr, uid: str) -> dict:
    """plan.json keys of one allocation: ``purchase``; a committed one's on-demand price per instance;
    for a top-up under a profile, its ``counts_by_period`` (one count per profile period)."""
    u = pr.units[uid]
    out = {"purchase": u.purchase_option}
    if u.committed:  # the VM runs (and SkyPilot prices it) on demand; the commitment is a billing discount
        out["on_demand_price_per_instance_usd_per_hour"] = round(u.on_demand_cost / u.template.nodes, 4)
    if pr.result.periods and not u.committed:
        levels = _level_of(pr.problem, profile_length(pr.inputs.spec))
        out["counts_by_period"] = [pr.result.periods[lv]["counts"].get(uid, 0) for lv in levels]
    return out


def average_count(pr, uid: str) -> float:
    """Instances of the unit over the horizon, on average (its count without periods)."""
    if not pr.result.periods:
        return pr.result.n[uid]
    return sum(per.weight * lv["counts"].get(uid, 0) for per, lv in zip(pr.problem.periods, pr.result.periods))


def _horizon_load(pr, uid: str, peak_load: float) -> float:
    if not pr.result.periods:
        return peak_load
    return sum(per.weight * lv["load"].get(uid, 0.0) for per, lv in zip(pr.problem.periods, pr.result.periods))


def _committed_sibling(pr, uid: str):
    """For an on-demand unit: the cheapest committed unit of the same template and region (any
    allowed term), or None when its offer publishes no committed price."""
    base = uid.rsplit("|", 1)[0]
    found = [u for u in pr.all_units if u.committed and u.id.rsplit("|", 1)[0] == base]
    return min(found, key=lambda u: (u.cost, u.id)) if found else None


def without_committed(pr) -> float | None:
    """$/h of the same plan with no committed term (its on-demand/spot units only), for the savings
    the committed base brings; None when the plan has no committed unit or that plan fails. The
    plan's units, not its candidates: a plan that bought no commitment was compared with a re-solve
    of its own problem ("committed base $0.00/h + top-ups $8.21/h; without committed terms $8.41/h",
    a saving of commitments it does not have: the verified plan was trimmed below what the ILP sizes)."""
    from hetinfra.plan.budget import current
    from hetinfra.solver.solve import solve

    prob, settings = pr.problem, pr.inputs.spec.planning
    committed = {u.id for u in prob.units if u.committed}
    if not any(n > 0 and uid in committed for uid, n in pr.result.n.items()):
        return None
    sub = prob.replace(units=tuple(u for u in prob.units if not u.committed), running={})
    if sub.unserved():
        return None
    budget = current()  # within what is left of the plan's work budget, as every solve of a plan command
    r = solve(sub, time_limit_s=budget.solve_limit(settings.time_limit_s), mip_gap=settings.mip_gap,
              max_nodes=settings.max_nodes)
    if r.safety_stop:
        budget.stop("the plan without committed terms")
    return r.cost(sub) if r.feasible else None


def purchase_section(pr, allocations: "list[Allocation]", load: dict[str, float], rounded) -> "Purchase":
    """plan.json ``purchase``: terms, horizon, the committed base and top-up costs, the cost of every
    profile period, and the break-even of each allocation that has (or could have) a committed price
    (constructed without validation: the values are the planner's)."""
    from hetinfra.document.sections import Purchase

    spec, prob = pr.inputs.spec, pr.problem
    n = profile_length(spec)
    costs = {uid: pr.units[uid].cost for uid in pr.result.n}
    if pr.result.periods:
        levels = _level_of(prob, n)
        by_period = [sum(costs[u] * c for u, c in pr.result.periods[lv]["counts"].items()) for lv in levels]
    else:
        by_period = [sum(costs[u] * c for u, c in pr.result.n.items())] * n
    committed = sum(a.cost_usd_per_hour for a in allocations if a.purchase.startswith("committed"))
    return Purchase.model_construct(
        terms=list(spec.infrastructure.terms()), horizon_months=spec.planning.horizon_months,
        periods=n, levels=max(1, len(prob.periods)),
        committed_cost_usd_per_hour=rounded(committed),
        top_up_cost_usd_per_hour=rounded(sum(a.cost_usd_per_hour for a in allocations) - committed),
        peak_cost_usd_per_hour=rounded(max(by_period)),
        without_committed_usd_per_hour=rounded(pr.flexible_cost),
        cost_by_period=[rounded(c) for c in by_period],
        break_even=_break_evens(pr, allocations, load, rounded))


def _break_evens(pr, allocations: "list[Allocation]", load: dict[str, float], rounded) -> "list[BreakEven]":
    """``purchase.break_even``: each committed allocation, and each on-demand one whose offer publishes
    a committed price (its cheapest committed sibling's)."""
    from hetinfra.document.sections import BreakEven

    usable = 1.0 - pr.problem.headroom
    out = []
    for a in allocations:
        u = pr.units[a.unit]
        term = a.purchase
        if u.committed:
            price, on_demand = u.cost, u.on_demand_cost
        elif term == "on_demand" and (sib := _committed_sibling(pr, u.id)) is not None:
            price, on_demand, term = sib.cost, u.cost, sib.purchase_option
        else:
            continue
        out.append(BreakEven.model_construct(
            unit=u.id, purchase=term, chosen=u.committed,
            committed_price_usd_per_hour=rounded(price), on_demand_price_usd_per_hour=rounded(on_demand),
            break_even_utilization=rounded(price / on_demand),
            utilization=rounded(_horizon_load(pr, u.id, load.get(u.id, 0.0)) / (pr.result.n[u.id] * usable))))
    return out
