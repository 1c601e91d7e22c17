"""The LoRA adapter row families of the allocation ILP (issue 38): slots per engine, an adapter held
only where its unit runs, adapter demand routed only to holders, the cover per origin area, and the
area covers that give the LP the rounding it lacks. The math of each family is in ``solver.rows``'s
module docstring with the others; ``solver.rows.FAMILIES`` lists them in order. Split from
``solver.rows`` to keep each module within about 400 lines. Each family takes the ``solver.rows.Rows``
being compiled (not imported here: ``solver.rows`` imports this module)."""

from __future__ import annotations

import math

INF = math.inf

__all__ = ["add_adapter_area_cover", "add_adapter_cover", "add_adapter_once", "add_adapter_routing",
           "add_adapter_slots", "add_adapter_tied"]


def add_adapter_slots(r) -> None:
    r"""A unit holds at most its slots (vLLM --max-loras):  sum_a x[u,a] <= slots[u].

    Every instance of a unit registers the same adapters (one SkyPilot service, one group: the same
    ``--lora-modules``), so holding is per unit; an adapter more than its GPU slots would be swapped
    under load (vLLM's LoRA admission then starves the others: hetinfra.sim.lora), which this row rules out."""
    by_unit: dict[str, dict[int, float]] = {}
    for (u, a), col in r.x.items():
        by_unit.setdefault(u, {})[col] = 1.0
    for u in (x for x in r.p.units if x.id in by_unit):
        r.row("adapter_slots", u.id, -INF, float(u.slots), by_unit[u.id])


def add_adapter_once(r) -> None:
    r"""A unit holds an adapter only while it runs:  x[u,a] - n[u] <= 0."""
    for (u, a), col in r.x.items():
        r.row("adapter_once", (u, a), -INF, 0, {col: 1.0, r.n[u]: -1.0})


def add_adapter_tied(r) -> None:
    r"""The period copies of a unit hold the same adapters (``solver.periods``):  x[u,a] - x[v,b] = 0
    for (v, b) in a tied group whose first member is (u, a). The deployed unit registers one
    ``--lora-modules`` list in every period; holds chosen per period could not be deployed (their
    union may exceed the unit's slots)."""
    for group in r.p.tied_holds:
        cols = [r.x[key] for key in group]  # a unit's copies may hold what it may (one model, region, slots)
        for i, col in enumerate(cols[1:], 1):  # flat keys: a Pyomo index has one length per family
            r.row("adapter_tied", (*group[0], i), 0, 0, {cols[0]: 1.0, col: -1.0})


def add_adapter_routing(r) -> None:
    r"""Adapter demand goes only to units holding the adapter:

    y[u,k] - M[u,k] x[u,a] <= 0     for k a demand key of adapter a

    with M[u,k] the most u could carry of k: its capacity at its largest count, (1 - headroom) h[u,k] N[u]
    (and under min_cost no more than k's demand at its peak period). A unit that may not hold a (no
    slots, another model, outside its residency) has no x[u,a]: its row reads y[u,k] <= 0."""
    p = r.p
    rates = {u.id: u.rates for u in p.units}
    peak = max((per.multiplier(m) for per in p.periods for m, _ in p.demand), default=1.0) if p.periods else 1.0
    for a in p.adapters:
        keys = set(a.keys)
        for u, k in (pair for pair in r.pairs if pair[1] in keys):
            terms = {r.flow[(u, k)]: r.per(k)}
            if (u, a.name) in r.x:
                big = (1.0 - p.headroom) * rates[u][k[1]] * r.ub[r.n[u]]
                if p.objective == "min_cost":
                    big = min(big, p.demand[k] * peak)
                terms[r.x[(u, a.name)]] = -big
            r.row("adapter_routing", (u, k[0], k[1]), -INF, 0, terms)


def add_adapter_cover(r) -> None:
    r"""Each adapter is held in each area where it has demand, by as many units as it needs:

    sum_{u in area} x[u,a] >= copies[a, area]       (no unit there that may hold a: infeasible)"""
    region = {u.id: u.region for u in r.p.units}
    for a in r.p.adapters:
        for area, copies in a.cover:
            terms = {col: 1.0 for (u, name), col in r.x.items()
                     if name == a.name and (not area or region[u] in area)}
            if not terms:
                r.trivially_infeasible |= copies > 0
                continue
            r.row("adapter_cover", (a.name, "/".join(area) or "*"), float(copies), INF, terms)


def add_adapter_area_cover(r) -> None:
    r"""Cover cuts over the units that may serve a set of keys (valid inequalities; adapters only,
    min_cost without unmet demand). Let U(k) be the units that may carry key k: those that serve it
    (its pairs: residency and the round trip already restrict them) and, for an adapter's key, may
    hold the adapter (slots, rank, residency). Every instance carries at most (1 - headroom) of its
    capacity, and k's flow on u takes lambda[k] / h[u,k] of it, so for each distinct set S = U(k)
    over the keys K(S) = {k' : U(k') within S}, whose demand only S can carry:

    sum_{u in S} n[u] >= ceil( sum_{k' in K(S)} lambda[k'] / max_{u in U(k')} h[u,k'] / (1 - headroom) )

    The per-model ``add_cover`` is the set of all the model's units. With adapters the sets are
    the holders of a rank-64 adapter in one residency area, or all holders in that area: the LP
    spreads their demand over fractions of instances that the integer plan must round up area by
    area, and without these rows the MIP closes that gap by branching (lora-origins at the
    verification load did not reach 5% in 300 s). Compiled whenever there are adapters, like the
    other adapter families (also on the Pyomo path that solves them, which ``cuts`` leaves without
    ``add_cover``: a key that every unit of the model serves makes the row over all of them, that
    cut at each key's best rate).
    """
    p = r.p
    if not p.adapters or p.objective != "min_cost" or r.q:
        return
    holders = {a.name: {u for (u, name) in r.x if name == a.name} for a in p.adapters}
    owner = {k: a.name for a in p.adapters for k in a.keys}
    rates = {u.id: u.rates for u in p.units}
    serving: dict[tuple, set] = {}
    for u, k in r.pairs:
        if k not in owner or u in holders[owner[k]]:
            serving.setdefault(k, set()).add(u)
    sets = sorted({tuple(sorted(s)) for s in serving.values()})
    for i, units in enumerate(sets):  # keyed by position: Pyomo's indices have one length
        inside = set(units)
        load = sum(p.demand[k] / max(rates[u][k[1]] for u in s) for k, s in sorted(serving.items()) if s <= inside)
        need = math.ceil(load / (1.0 - p.headroom) - 1e-9)
        if need >= 1:
            r.row("adapter_area_cover", i, float(need), INF, {r.n[u]: 1.0 for u in units})
