"""Relief: the padding's step for a unit that cannot take one more replica (hetinfra.plan.pad).

The padding adds capacity where a model misses: one replica more on the unit that misses the most.
Where every unit of the model sits at an availability cap (or the budget, or a spot fraction) that
step has nowhere to go, and the plan used to ship the model missing, though other regions or GPU
types had room: bench_scale.write_fleet(32, linked) under planning.verify.burst_cv 2 left
m05-mixtral-8x7b (one 8 x A10 replica in a capped region) undecided at a 99% bound 1.023x its
objective and m20-phi-4 collapsing at 5% more load, both "no unit of it can take one more replica".

Relief does what one replica more of that unit would do, on another unit of the same model: the
unit keeps its replicas and hands ``1 / (n + 1)`` of each of its classes' req/s (``n``: its
replicas) to one replica more of a sibling unit that may serve those classes, as much of it as that
replica takes at the plan's rates within its headroom. Of the siblings whose plan keeps every rule of
the spec (``trim.breaks_rules``: caps, budget, spot fractions, locality), the one whose replica costs
least per req/s it takes over (then by id: the same choice on every run). A sibling's price per req/s
at full use is not that: one replica takes at most the share, so a large instance that would be cheap
when full moved 2.4 req/s of services/chat.yaml's unit at $21.96/h where one at $3.67/h moved as
much (a reviewer's finding). The padding judges the relieved plan on fresh confirm seeds, and on the
search's seeds too (load moved to a layout its rounds may never have simulated), as any padded one.

Not offered (the unit stays as it is, and the padding tries its next unit): a model routed per
origin (its flows carry round trips the move would have to re-price), a plan under a demand profile
(its periods' counts), a model with LoRA adapters (which units hold which adapter is a placement of
its own), and sliced routing (each slice goes to one unit whole: Mélange's formulation)."""

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
    if res.periods or problem.routing == "sliced" or any(k[1] == model for k in res.origin_flow) \
            or any(a.model == model for a in problem.adapters):
        return None
    mix = {k[2]: v for k, v in sorted(res.flow.items()) if k[0] == uid and k[1] == model and v > 0}
    if not mix:
        return None
    share = 1.0 / (res.n[uid] + 1)
    takes = [(target, part) for target in _siblings(problem.units, uid, model, mix)
             if (part := _part(pr, target, mix, share)) > 1e-12]
    rps = sum(mix.values())
    for target, part in sorted(takes, key=lambda t: (t[0].cost / (t[1] * rps), t[0].id)):
        candidate = _moved(pr, uid, target, mix, part)
        if not breaks_rules(candidate):
            return candidate, target.id, part * rps
    return None


def _siblings(all_units, uid: str, model: str, mix: dict[str, float]) -> list:
    """The model's other units that may serve every class of ``mix`` (class -> req/s)."""
    return [u for u in all_units if u.model == model and u.id != uid and all(u.rates.get(w, 0) > 0 for w in mix)]


def _part(pr: PlanResult, target, mix: dict[str, float], share: float) -> float:
    """The part of the relieved unit's req/s per class (``mix``) that one replica more of ``target`` takes:
    ``share``, less where that replica's headroom takes less (its load at the plan's rates, as the solver's
    re-check counts it: recheck.unit_load); 0 where it has no room."""
    from hetinfra.solver.recheck import unit_load

    count = pr.result.n.get(target.id, 0) + 1
    room = (1.0 - pr.problem.headroom) * count - unit_load(pr.result.flow, target)
    need = share * unit_load({(target.id, target.model, w): v for w, v in mix.items()}, target)
    return max(0.0, share * min(1.0, room / need)) if need > 0 else 0.0


def _moved(pr: PlanResult, uid: str, target, mix: dict[str, float], part: float) -> PlanResult:
    """``pr`` with one replica more of ``target`` and ``part`` of ``uid``'s req/s per class moved to it."""
    res, model = pr.result, target.model
    flow = dict(res.flow)
    for w, v in mix.items():
        flow[(uid, model, w)] = v - part * v
        flow[(target.id, model, w)] = flow.get((target.id, model, w), 0.0) + part * v
    n = {**res.n, target.id: res.n.get(target.id, 0) + 1}
    return replace(pr, result=replace(res, n=n, flow=flow))
