"""Minimality and over-provisioning of a plan, measured by simulation at one declared load.

* :func:`without_one_replica` is THE operation behind "no replica can be removed": a copy of a
  plan.json with one replica fewer in one allocation. When that was the unit's last replica, the
  unit goes and its share of each class moves to the model's other units of that class, in
  proportion to their shares (what the gateway does when an endpoint is gone); a class it served
  alone moves to the model's other units that can serve it (:func:`takers`: the class among their
  template's rates), in proportion to their capacity for it. Each origin's share moves among the
  units that origin's class goes to; a class (or an origin's class) left with no unit cannot be
  served, so the removal is refused (None: a miss by definition). The planner's trim
  (``hetinfra.plan.trim``) and the acceptance test both call it, so "the plan is minimal" holds
  by construction: the trim's last pass simulated exactly these copies of the final plan.
* :func:`without_allocation` removes a whole allocation at once (every replica, its shares moved as
  the last replica's are): a unit whose replicas each carry too much alone may still be redundant as
  a whole, when the model's other units take its share better (a slow pipeline beside fast
  single-GPU replicas). The trim tries it when removing one replica of a unit misses, and the
  acceptance test checks it too.
* :func:`sustained_load` is the over-provisioning ratio's numerator: per model, the largest load
  (multiple of its demand) at which the simulation still meets its objective, on a grid of eighths.
"""

from __future__ import annotations

from typing import Callable


__all__ = ["without_one_replica", "without_allocation", "removal_order", "sustained_load", "SUSTAIN_STEPS", "SUSTAIN_MAX"]

#: :func:`sustained_load`'s grid: 2**SUSTAIN_STEPS points from the declared load up to (not
#: including) SUSTAIN_MAX x the load
SUSTAIN_STEPS = 3
SUSTAIN_MAX = 2.0


def without_one_replica(doc: dict, unit: str) -> dict | None:
    """``doc`` (plan.json) with one replica of allocation ``unit`` fewer; None when that would leave a
    class of its model, or an origin's share of one (``routing_by_origin``, moved the same way within
    the origin), with no unit to serve it. A new document that shares with ``doc`` the parts it
    does not change (the trim makes one per check: copying a fleet's whole plan each time was most of
    its cost); neither is edited in place afterwards."""
    out = dict(doc)
    out["allocations"] = [dict(a) if a["unit"] == unit else a for a in doc["allocations"]]
    alloc = next(a for a in out["allocations"] if a["unit"] == unit)
    if int(alloc["count"]) > 1:
        alloc["count"] = int(alloc["count"]) - 1
        alloc["instances"] = alloc["count"] * int(alloc.get("nodes_per_replica") or 1)
        if alloc.get("counts_by_period"):  # no period runs more than the unit has (plan.json's own check)
            alloc["counts_by_period"] = [min(int(c), alloc["count"]) for c in alloc["counts_by_period"]]
        return out
    out["allocations"] = [a for a in out["allocations"] if a["unit"] != unit]
    model = alloc["model"]
    by_origin = (doc.get("routing_by_origin") or {}).get(model)
    capacity = {t["id"]: t.get("capacity_rps") or {} for t in doc.get("templates") or ()}
    # a class the unit served alone goes to the model's units that can serve it; not where clients'
    # origins are routed (which origin may reach which unit is a round trip the view does not hold)
    alone = {} if by_origin else {cls: takers([(a["unit"], int(a["count"]), capacity.get(a.get("template"), {}))
                                               for a in out["allocations"] if a["model"] == model], cls)
                                  for cls in doc["routing"].get(model) or {}}
    routing = _handed_on(doc["routing"].get(model) or {}, unit, alone)
    if routing is None:
        return None
    if model in doc["routing"]:
        out["routing"] = {**doc["routing"], model: routing}
    if by_origin:  # each origin's share of a class moves to the units that origin's class goes to
        moved = {origin: _handed_on(rows, unit) for origin, rows in by_origin.items()}
        if any(rows is None for rows in moved.values()):
            return None
        out["routing_by_origin"] = {**doc["routing_by_origin"], model: moved}
    return out


def takers(units: list[tuple[str, int, dict[str, float]]], cls: str) -> list[tuple[str, float]]:
    """Who takes class ``cls`` from a unit that served it alone, and in what proportion: of ``units``
    (the model's remaining units: id, replicas, capacity per class), those whose capacity covers
    ``cls`` (the class is among their template's rates: the pairs the ILP may route), each weighed by
    its replicas x that capacity (what it could carry of the class on its own), in unit order."""
    return [(u, n * rates[cls]) for u, n, rates in sorted(units) if n > 0 and rates.get(cls, 0.0) > 0]


def _handed_on(per_class: dict[str, list[dict]], unit: str,
               alone: dict[str, list[tuple[str, float]]] | None = None) -> dict[str, list[dict]] | None:
    """Each class's routing rows ({unit, share, rps, ...}) with ``unit``'s entries moved to the class's
    other units in proportion to their shares, or, for a class it served alone, to ``alone[cls]``
    (:func:`takers`) in their proportion (new rows; the classes it does not touch are shared); None
    where a class would have none left."""
    out = {}
    for cls, entries in per_class.items():
        gone = [e for e in entries if e["unit"] == unit]
        if not gone:
            out[cls] = entries
            continue
        rest = [e for e in entries if e["unit"] != unit]
        kept = sum(float(e["share"]) for e in rest)
        if kept > 0:
            parts = [float(e["share"]) / kept for e in rest]
        elif (alone or {}).get(cls):  # new rows for the takers, with what they could carry of it
            rest = [{"unit": u, "share": 0.0, "rps": 0.0} for u, _w in alone[cls]]
            parts = [w / sum(w for _u, w in alone[cls]) for _u, w in alone[cls]]
        else:
            return None
        moved = sum(float(e["share"]) for e in gone)
        moved_rps = sum(float(e["rps"]) for e in gone)
        out[cls] = [dict(e, share=round(float(e["share"]) + moved * part, 6),
                         rps=round(float(e["rps"]) + moved_rps * part, 6)) for e, part in zip(rest, parts)]
    return out


def without_allocation(doc: dict, unit: str) -> dict | None:
    """``doc`` without allocation ``unit`` (all its replicas: :func:`without_one_replica` of its last
    one, which hands its shares on); None when a class of its model would be left with no unit."""
    out = dict(doc)
    out["allocations"] = [dict(a, count=1) if a["unit"] == unit else a for a in doc["allocations"]]  # its last replica
    return without_one_replica(out, unit)


def peak_judges(doc: dict, alloc: dict) -> bool:
    """Whether a simulation at the plan's peak demand can judge removing a replica of ``alloc``: always,
    but for a committed unit of a plan with a demand profile (``counts_by_period``): its replicas serve
    every period, so removing one changes periods the peak simulation does not see (the multi-period
    ILP sizes the committed base over the whole horizon)."""
    from hetinfra.document.simulation import TrimPlan, TrimUnit

    return TrimPlan.model_validate(doc).peak_judges(TrimUnit.model_validate(alloc))


def removal_order(doc: dict) -> list[tuple[str, bool]]:
    """The trim's moves, in order: per allocation it may remove a replica from (those
    :func:`peak_judges`; the dearest replica first, as it saves the most, then by unit id), one replica
    (unit, False), then, for a unit of several replicas, the whole allocation (unit, True), which the
    trim tries only when one replica fewer misses."""
    from hetinfra.document.simulation import TrimPlan

    plan = TrimPlan.model_validate(doc)
    return [(a.unit, whole) for a in sorted(plan.allocations, key=lambda a: (-a.replica_price(), a.unit))
            if a.count > 0 and plan.peak_judges(a) for whole in ((False, True) if a.count > 1 else (False,))]


def sustained_load(doc: dict, load: float, meets: Callable[[dict], dict[str, bool]],
                   go_on: Callable[[], bool] = lambda: True) -> dict[str, float]:
    """Per model, the largest load on the grid ``load`` x (1 + k / 2**SUSTAIN_STEPS), k = 0 ..
    2**SUSTAIN_STEPS - 1 (up to SUSTAIN_MAX x ``load``, a resolution of ``load`` / 8), at which it
    meets its objective, given that it meets at ``load`` (k = 0). ``meets(d)`` simulates plan ``d``
    at ``load`` and says, per model, whether it met: each model's demand is scaled in one copy of the
    plan, so all models search in the same simulations.

    The first step tries the grid's lowest point above ``load`` (k = 1); the models that meet there
    bisect the rest (k in 1 .. 2**SUSTAIN_STEPS - 1). A trimmed model whose units have several
    replicas usually misses an eighth above its load: one simulation then settles what a bisection
    from the middle took SUSTAIN_STEPS for; a model that meets there (a unit of one or two replicas
    often has headroom) takes one more. Where meeting is monotone in the load, both find the same
    grid point. ``go_on()`` is asked before each step (the plan command's work budget,
    hetinfra.plan.budget): on False the search stops, and each model's figure is the largest load
    it met at so far, a lower bound of the grid's answer."""
    names = [m["name"] for m in doc["models"] if m.get("rate_rps")]
    top = 2 ** SUSTAIN_STEPS
    lo = {n: 0 for n in names}
    hi = {n: top for n in names}  # the grid step (exclusive) at which the model is known to miss or stop
    first = True
    while (open_ := [n for n in names if hi[n] - lo[n] > 1]) and go_on():
        mid = {n: 1 if first else (lo[n] + hi[n]) // 2 for n in open_}
        first = False
        met = meets(scaled(doc, {n: 1.0 + (SUSTAIN_MAX - 1.0) * mid[n] / top for n in open_}))
        for n in open_:
            if met.get(n):
                lo[n] = mid[n]
            else:
                hi[n] = mid[n]
    return {n: round(load * (1.0 + (SUSTAIN_MAX - 1.0) * lo[n] / top), 4) for n in names}


def scaled(doc: dict, factors: dict[str, float]) -> dict:
    """``doc`` with each named model's demand (rate_rps) multiplied by its factor; the others get no
    demand (the simulator skips them). Shares the other sections with ``doc``."""
    return {**doc, "models": [dict(m, rate_rps=float(m["rate_rps"] or 0.0) * factors[m["name"]]
                                   if m["name"] in factors else 0.0) for m in doc["models"]]}
