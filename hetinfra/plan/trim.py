"""Verification's trim (docs/verification.md): remove replicas, one at a time or a whole allocation,
while the simulation at the verification load still meets and every other rule of the spec still
holds, until a whole pass removes none. ``sim_of`` is verification's simulator (its ``progress`` and
``last_pass``, the removals the last pass checked and why each was refused, are read and set here)."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.plan.budget import current
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.rounds import simulation_view
from hetinfra.plan.verdicts import refusal_figures

#: a last_pass entry's detail where the simulation on the search's seeds refused a removal
MISSED_ON_SEARCH = "an objective missed on the search's seeds"
#: what the work budget names when it stops the trim before a removal (plan.json work_budget.stopped)
TRIM_CUT = "the trim (the plan meets, but may not be minimal: not every removal was checked)"


def trim(pr: PlanResult, sim_of, confirm=None, steps: list | None = None) -> tuple[PlanResult, dict, list]:
    """Remove replicas while the simulation still meets (see the module docstring): (plan, its
    judgement by ``sim_of``, the removals as (removal, the plan before it), in order, after
    ``steps``: the removals that made ``pr``). Each accepted removal is re-checked on the simulation
    view rebuilt from the plan, whose sections are what gets written. ``confirm``: a second judge a
    removal must also meet (hetinfra.plan.confirm trims again with the confirmation's judge once it
    put a removal back). A removal that loads a unit past its ceiling (hetinfra.plan.ceiling) is not
    simulated."""
    from hetinfra.sim.minimal import removal_order

    if sim_of.progress is not None:
        sim_of.progress.stage("trim")
    doc = simulation_view(pr)
    sim = sim_of(doc)
    steps = list(steps or ())
    sim_of.last_pass = []  # a plan that misses checks no removal (not an earlier trim's pass)
    if not sim["met"]:
        return pr, sim, steps
    load = sim_of.config.load
    while True:
        checked: list[dict] = []
        for uid, whole in removal_order(doc):
            if not current().check(TRIM_CUT):  # the plan as it is: it meets, but may not be minimal
                sim_of.last_pass = checked
                return pr, sim, steps
            pr2, doc2, sim2, refused = _removal(pr, doc, uid, whole, sim_of, confirm, load)
            checked.append({"unit": uid, "whole": whole} | refused)
            if not refused:
                steps.append(({"unit": uid, "model": pr.units[uid].model,
                               "cost_usd_per_hour": doc2["cost_usd_per_hour"]}
                              | ({"replicas": pr.result.n[uid]} if whole else {}), pr))
                pr, doc, sim = pr2, doc2, sim2
                break
        else:
            sim_of.last_pass = checked
            return pr, sim, steps


def _removal(pr: PlanResult, doc: dict, uid: str, whole: bool, sim_of, confirm, load: float):
    """One removal of the trim: (the plan without it, its simulation view, its judgement, {}) where
    every judge keeps it; (None, None, None, why) where one refuses it, ``why`` being plan.json's
    fidelity.trim.last_pass entry: ``refused_by`` (routing, rules, ceiling, simulation or confirmation)
    and its ``detail``. The simulation judges the load; every other rule of the spec (spot fractions,
    locality) must still hold, by the solver's own independent re-check, and no unit may run past its
    measured interval or roofline (checked before simulating: the ceiling binds whatever the
    simulation says)."""
    from hetinfra.sim.minimal import without_allocation, without_one_replica

    candidate = (without_allocation if whole else without_one_replica)(doc, uid)
    pr2 = pr if candidate is not None else None
    for _ in range(pr.result.n[uid] if whole else 1):
        pr2 = _drop_replica(pr2, uid) if pr2 is not None else None
    if pr2 is None:
        return _refused("routing", "a class (or an origin's) has no other unit")
    broken = breaks_rules(pr2)
    if broken:
        return _refused("rules", broken[0])
    over = sim_of.ceilings.over(candidate, load)
    if over:
        unit, (ratio, basis) = max(over.items(), key=lambda kv: (kv[1][0], kv[0]))
        return _refused("ceiling", f"loads a unit to {ratio:.3f}x its {basis}", unit_over=unit, ratio=round(ratio, 4),
                        basis=basis)
    model = pr.units[uid].model
    judged = sim_of(candidate)
    if not judged["met"]:
        return _refused("simulation", MISSED_ON_SEARCH, **refusal_figures(judged, model))
    if confirm is not None:
        judged = confirm(_its_model(candidate, pr, uid))
        if not judged["met"]:
            return _refused("confirmation", "an objective missed on the confirm seeds",
                            **refusal_figures(judged, model))
    doc2 = simulation_view(pr2)
    sim2 = sim_of(doc2)
    if not sim2["met"]:  # the view rebuilt from the plan, whose sections are what gets written
        return _refused("simulation", MISSED_ON_SEARCH, **refusal_figures(sim2, model))
    return pr2, doc2, sim2, {}


def _refused(by: str, detail: str, **figures) -> tuple[None, None, None, dict]:
    """:func:`_removal`'s answer where ``by`` refuses a removal: plan.json's last_pass entry fields."""
    return None, None, None, {"refused_by": by, "detail": detail, **figures}


def _its_model(candidate: dict, pr: PlanResult, uid: str) -> dict:
    """``candidate`` (a simulation view) reduced to the model of the unit removed: a removal changes
    its model's units only (models share no unit), so the second judge rules on that model. The
    whole plan on that judge's seeds is the confirmation's business: after the padding the trim's
    second judge is on the padding's last block of seeds, which the other models never met on, and
    one of them missing there refused every removal of every model (bench_scale.py's linked fleet:
    70 removals checked, none taken)."""
    from hetinfra.plan.parts import reduced

    return reduced(candidate, {pr.units[uid].model})


def breaks_rules(pr: PlanResult) -> list[str]:
    """What of the spec ``pr`` breaks besides its units' load (``solver.solve.verify`` with
    ``capacity=False``: spot fractions, locality, caps, budget, committed bases): the trim keeps
    only removals that break nothing."""
    from hetinfra.solver.solve import verify as recheck

    return recheck(pr.problem, pr.result, capacity=False)


def _drop_replica(pr: PlanResult, uid: str) -> PlanResult | None:
    """``pr`` with one replica of ``uid`` fewer; a unit that goes hands its flows to the other units
    of each class in proportion to theirs, and its flows from each origin to the other units that
    origin's class goes to (as without_one_replica does to plan.json); None when one of those has
    no other unit."""
    from hetinfra.sim.minimal import takers

    res = pr.result
    n = dict(res.n)
    flow = dict(res.flow)
    origin_flow = dict(res.origin_flow)
    # a demand profile's levels keep at most the peak's count of the unit (removal_order offers only
    # top-ups there: a committed replica serves every level)
    levels = [{**lv, "counts": {u: (min(c, n[uid] - 1) if u == uid else c) for u, c in lv["counts"].items()
                                if u != uid or n[uid] > 1}} for lv in res.periods]
    if n[uid] > 1:
        n[uid] -= 1
    else:
        del n[uid]
        units = {u.id: u for u in pr.problem.units}  # the solver's: their rates are the pairs it may route
        model = units[uid].model
        routed_by_origin = any(k[1] == model for k in origin_flow)  # who may reach whom: a round trip
        alone = None if routed_by_origin else (lambda cls: takers(
            [(u, c, units[u].rates) for u, c in n.items() if units[u].model == model], cls))
        if not (_hand_on(flow, uid, alone) and _hand_on(origin_flow, uid)):
            return None
    return replace(pr, result=replace(res, n=n, flow=flow, periods=levels, origin_flow=origin_flow))


def _hand_on(flows: dict, uid: str, alone=None) -> bool:
    """Move ``uid``'s entries of ``flows`` ((unit, model, class, ...) -> req/s) to the other units of
    the same rest in proportion to theirs, or, where it served a class alone, to ``alone(class)``
    (hetinfra.sim.minimal.takers, as without_one_replica hands plan.json's routing on), in place;
    False where a rest has no other unit."""
    for key, rps in [(k, v) for k, v in flows.items() if k[0] == uid]:
        del flows[key]
        rest = {k: v for k, v in flows.items() if k[1:] == key[1:] and v > 0}
        if not rest and rps > 0 and alone is not None:
            rest = {(u, *key[1:]): w for u, w in alone(key[2])}
            for k in rest:
                flows[k] = 0.0
        total = sum(rest.values())
        if rps > 0 and total <= 0:
            return False
        for k, v in rest.items():
            flows[k] = flows[k] + rps * v / total
    return True
