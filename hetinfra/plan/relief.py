"""Relief: the padding's step for a unit that cannot take one more replica (hetinfra.plan.pad).

The padding adds capacity where a model misses: one replica more on the unit that misses the most.
Where every unit of the model sits at an availability cap (or the budget, or a spot fraction) that
step has nowhere to go, and the plan used to ship the model missing, though other regions or GPU
types had room: bench_scale.write_fleet(32, linked) under planning.verify.burst_cv 2 left
m05-mixtral-8x7b (one 8 x A10 replica in a capped region) undecided at a 99% bound 1.023x its
objective and m20-phi-4 collapsing at 5% more load, both "no unit of it can take one more replica".

Relief does what one replica more of that unit would do, on another unit of the same model: the
unit keeps its replicas and hands ``1 / (n + 1)`` of each of its classes' req/s (``n``: its
replicas) to one replica more of the cheapest sibling unit that may serve those classes, as much of
it as that replica takes at the plan's rates within its headroom. The sibling is the one with the
least cost per req/s at the relieved unit's class mix (then by id: the same choice on every run)
among those whose plan keeps every rule of the spec (``trim.breaks_rules``: caps, budget, spot
fractions, locality). The padding judges the relieved plan on fresh confirm seeds as any padded one.

Not offered (the unit stays as it is, and the padding says why): a model routed per origin (its
flows carry round trips the move would have to re-price), a plan under a demand profile (its
periods' counts), and a model with LoRA adapters (which units hold which adapter is a placement of
its own)."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.plan.planner import PlanResult
from hetinfra.plan.trim import breaks_rules

__all__ = ["relieved"]


def relieved(pr: PlanResult, uid: str) -> tuple[PlanResult, str, float] | None:
    """(plan, the sibling unit given a replica, the req/s moved off ``uid``) for relieving ``uid``
    (see the module docstring); None where relief is not offered or no sibling keeps the rules."""
    res, problem = pr.result, pr.problem
    units = {u.id: u for u in problem.units}
    model = units[uid].model
    if res.periods or any(k[1] == model for k in res.origin_flow) or any(a.model == model for a in problem.adapters):
        return None
    mix = {k[2]: v for k, v in sorted(res.flow.items()) if k[0] == uid and k[1] == model and v > 0}
    if not mix:
        return None
    share = 1.0 / (res.n[uid] + 1)
    for target in _siblings(problem.units, uid, model, mix):
        moved = _moved(pr, uid, target, mix, share)
        if moved is not None and not breaks_rules(moved[0]):
            return moved[0], target.id, moved[1]
    return None


def _siblings(all_units, uid: str, model: str, mix: dict[str, float]) -> list:
    """The model's other units that may serve every class of ``mix`` (class -> req/s), the cheapest per
    req/s at that mix first, then by id."""
    able = [u for u in all_units if u.model == model and u.id != uid and all(u.rates.get(w, 0) > 0 for w in mix)]
    return sorted(able, key=lambda u: (u.cost * sum(v / u.rates[w] for w, v in mix.items()), u.id))


def _moved(pr: PlanResult, uid: str, target, mix: dict[str, float], share: float) -> tuple[PlanResult, float] | None:
    """``pr`` with one replica more of ``target`` and ``share`` of ``uid``'s req/s per class (``mix``)
    moved to it, less where that replica's headroom takes less (its load at the plan's rates, as
    solver.recheck counts it); and the req/s moved. None where it has no room."""
    res, model = pr.result, target.model
    count = res.n.get(target.id, 0) + 1
    load = sum(v / target.rates[k[2]] for k, v in res.flow.items() if k[0] == target.id and v > 0)
    room = (1.0 - pr.problem.headroom) * count - load
    need = share * sum(v / target.rates[w] for w, v in mix.items())
    part = share * min(1.0, room / need) if need > 0 else 0.0
    if part <= 0:
        return None
    flow = dict(res.flow)
    for w, v in mix.items():
        flow[(uid, model, w)] = v - part * v
        flow[(target.id, model, w)] = flow.get((target.id, model, w), 0.0) + part * v
    n = {**res.n, target.id: count}
    return replace(pr, result=replace(res, n=n, flow=flow)), part * sum(mix.values())
