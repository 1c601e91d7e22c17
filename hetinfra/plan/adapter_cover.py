"""Where each LoRA adapter must be held (issue 38): per origin area, by one unit there, or by two
where its demand from that area needs more than one replica.

An adapter's requests from origin ``o`` are its own flow keys ``(m, "w~a@o")`` (hetinfra.plan.origins
splits every demand key by the base's origin shares, so an adapter with ``share: f`` gets ``f x
lambda[m,w] x share[o]`` and one with ``rate_rps: r`` its rate split the same way). The area of an
origin is what its residency allows (docs/regions.md): the region itself (``region``), the regions of
its continent (``continent``); an origin without residency (``none``) adds its demand to the area
"anywhere". Per area, the cover row (``solver.rows.add_adapter_cover``) asks

* one unit holding the adapter there (its requests are routed only to holders, and residency keeps
  them in the area, so a holder there is what serving them takes);
* two units, in an area that residency bounds (``region``, ``continent``), where the area's demand
  for it is more than one instance of any unit there can carry at its rates (headroom aside, so the
  rule does not change with verification's load, which the planner sets after the cover): it needs
  more than one replica anyway, and the gateway fails over only inside the area, so spread over two
  units (two services, two groups) a unit lost leaves it served there. Capped at the units that may
  hold it there. Not asked in an all-adapters pool (every unit that may hold it may hold all of its
  base's adapters: ``adapter_placement: everywhere`` and ``plan/held_everywhere.py``), where
  placement is not chosen and every running replica holds every adapter.

In the area "anywhere" (no origins, or origins without residency) one unit is asked: its replicas
are the adapter's replicas, sized by the capacity rows. Two units were asked there too, and the
solver met the row with a token second holder: lora-50-ranks placed its rank-64 a07 on a 1-replica
unit beside its 3-replica holder (26 L40S, $48.39/h against 27, $50.25/h), which was unstable on 1
of 10 audit seeds (+6.5%, benchmarks/bench_promise.py) and could not carry a07 alone anyway.
"""

from __future__ import annotations

from dataclasses import replace

from hetinfra.solver.problem import AdapterHold, AllocationProblem, SolverUnit

__all__ = ["copies_needed", "origin_holds"]


def copies_needed(rates: dict[tuple[str, str], float], units: list[SolverUnit], headroom: float = 0.0) -> int:
    """Units that must hold an adapter whose demand in an area is ``rates`` (demand key -> req/s) among
    ``units`` (those there that may hold it): 2 where no unit's one instance carries it all, else 1;
    never more than there are units."""
    def instances(u: SolverUnit) -> float:  # instances of u the whole rate takes (inf: u cannot serve a key)
        load = 0.0
        for (_, w), lam in rates.items():
            h = u.rates.get(w, 0.0)
            if lam > 0 and h <= 0:
                return float("inf")
            load += lam / h if lam > 0 else 0.0
        return load / max(1e-12, 1.0 - headroom)

    if not units or sum(rates.values()) <= 0:
        return 1
    need = 2 if min(instances(u) for u in units) > 1.0 + 1e-9 else 1
    return min(need, len(units))


def _all_adapters_pool(hold: AdapterHold, problem: AllocationProblem, holders: list[SolverUnit]) -> bool:
    """Every unit that may hold ``hold`` may hold every adapter of its base (slots and rank)."""
    mine = [a for a in problem.adapters if a.model == hold.model]
    return all(u.slots >= len(mine) and all(a.may_hold(u) for a in mine) for u in holders)


def origin_holds(problem: AllocationProblem, routed: tuple[SolverUnit, ...], clouds: dict[str, str],
                 demand: dict, flow_keys: dict, origins: dict, allowed) -> tuple[AdapterHold, ...]:
    """``problem.adapters`` for the problem routed by origin (units ``routed``, ``demand`` and
    ``flow_keys`` of hetinfra.plan.origins.with_origins; ``clouds``: unit id -> cloud; ``origins``:
    model -> [(origin, share, residency)]; ``allowed(origin, rule, cloud, region)``): each adapter's keys
    are its per-origin flows, and it is covered per origin area (the module docstring)."""
    out = []
    for hold in problem.adapters:
        mine = {(hold.model, w) for _, w in hold.keys}
        keys = tuple(k for k in demand if k[0] == hold.model and (k[0], flow_keys.get(k, (k[1], None))[0]) in mine)
        hold = replace(hold, keys=keys)
        holders = [u for u in routed if hold.may_hold(u)]
        if _all_adapters_pool(hold, problem, holders):
            out.append(hold)
            continue
        areas: dict[tuple[str, ...], dict] = {}  # area -> its demand keys of the adapter -> req/s
        for o, _, rule in origins.get(hold.model, ()):
            inside = [u for u in holders if rule == "none" or allowed(o, rule, clouds[u.id], u.region)]
            area = () if rule == "none" else (tuple(sorted({u.region for u in inside})) or (o,))
            for k in keys:
                if flow_keys[k][1] == o and demand.get(k, 0.0) > 0:
                    areas.setdefault(area, {})[k] = demand[k]
        cover = tuple((area, copies_needed(rates, [u for u in holders if u.region in area]) if area else 1)
                      for area, rates in sorted(areas.items()))
        out.append(replace(hold, cover=cover or (((), 1),)))
    return tuple(out)
