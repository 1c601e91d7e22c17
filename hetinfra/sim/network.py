"""Clients' origins in the simulation: each request comes from one of its model's origins (by the
plan's shares), is routed by that origin's row of the plan (plan.json ``routing_by_origin``), and
sees the round trip from its origin to its unit's region (the plan's ``network_ms``) once, before its first token: TTFT grows
by it, TPOT does not (tokens stream back one after another, the first one carries the delay for
all). A plan without origins routes by ``routing`` and adds nothing, drawing the same random
numbers as before."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hetinfra.document.sections import RequestClass
    from hetinfra.document.simulation import SimPlan

__all__ = ["OriginRouting", "add_network_time", "origin_report"]


class OriginRouting:
    """One model's routes: per origin, per class, (unit index, share); and each origin's share."""

    def __init__(self, plan: SimPlan, name: str, classes: list[RequestClass], unit_ix: dict[str, int]):
        rows = (plan.routing_by_origin or {}).get(name)
        if rows:
            spec = (plan.origins or {}).get(name) or {}
            self.origins = [(o, float(spec[o].share or 0.0) if o in spec else 0.0) for o in rows]
        else:
            rows, self.origins = {"any": plan.routing.get(name) or {}}, [("any", 1.0)]
        # every row's unit is the plan's (SimPlan refuses routes to units it does not allocate)
        self.routes = {o: [[(unit_ix[e.unit], float(e.share)) for e in (per.get(c.name) or [])]
                           for c in classes] for o, per in rows.items()}
        # the plan's round trip of each (origin, unit) it routes (routing_by_origin[..].network_ms)
        self.rtt_s = {(o, unit_ix[e.unit]): float(e.network_ms or 0.0) / 1e3
                      for o, per in rows.items() if o != "any" for entries in per.values() for e in entries}
        self.cum = [math.fsum(s for _, s in self.origins[:k + 1]) for k in range(len(self.origins))]

    def route(self, cls: np.ndarray, where: np.ndarray | None, pick: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each request's (allocation index, -1 where its class is not fully routed; origin index into
        ``origins``), given its class and two uniforms in [0, 1): ``where`` picks its origin by the
        origins' cumulative shares (None: a plan with one origin), ``pick`` its unit: the first of
        the class's rows whose share exceeds what is left of ``pick`` after the rows before it."""
        several = len(self.origins) > 1
        origin = np.zeros(len(cls), dtype=np.int64)
        if several:
            origin = np.minimum(np.searchsorted(np.array(self.cum), where * self.cum[-1], side="right"),
                                len(self.cum) - 1)
        if not several and len(self.routes[self.origins[0][0]]) == 1:  # one origin, one class: every row
            return _picked(pick, self.routes[self.origins[0][0]][0]), origin
        unit = np.full(len(cls), -1, dtype=np.int64)
        # each (origin, class) group's rows are disjoint, so each is picked on its own small array and
        # written once; one origin needs no origin mask, a class with no rows keeps -1 (unrouted)
        of_class = [cls == k for k in range(max(len(r) for r in self.routes.values()))] if several else None
        for j, (name, _) in enumerate(self.origins):
            mine = origin == j if several else None
            for k, entries in enumerate(self.routes[name]):
                if entries:
                    rows = np.flatnonzero(of_class[k] & mine if several else cls == k)
                    unit[rows] = _picked(pick[rows], entries)
        return unit, origin


def _picked(x: np.ndarray, entries: list[tuple[int, float]]) -> np.ndarray:
    """Each uniform of ``x``'s unit index among ``entries`` (unit index, share), -1 where the shares
    run out: the first row whose share exceeds what is left of it after the rows before it."""
    picked = np.full(len(x), -1, dtype=np.int64)
    for ui, share in entries:
        picked[(picked < 0) & (x < share)] = ui
        x = x - share
    return picked


def add_network_time(reqs, unit: int, routing: OriginRouting, origin_ix) -> None:
    """Shift the first and last token of allocation ``unit``'s simulated requests (``UnitRequests``)
    by their round trip (client's view); ``origin_ix``: the model's requests' origins (indices into
    ``routing.origins``)."""
    rtt = [routing.rtt_s.get((o, unit), 0.0) for o, _ in routing.origins]
    if any(rtt):
        shift = np.array(rtt)[origin_ix[reqs.rid]]
        reqs.first = reqs.first + shift
        reqs.finish = reqs.finish + shift


def origin_report(units: list, warm: int, routing: OriginRouting, origin_ix, regions: dict[int, str],
                  ttft_ms: float) -> dict:
    """Per origin: requests, the regions that served them, the worst round trip, TTFT attainment.
    ``units``: (allocation index, its ``UnitRequests``) of one model; requests before ``warm`` are
    left out; ``regions``: allocation index -> region."""
    out: dict = {}
    for j, (o, _) in enumerate(routing.origins):
        count, served, worst, met = 0, set(), 0.0, 0
        for k, r in units:
            mine = (r.rid >= warm) & (origin_ix[r.rid] == j)
            n = int(mine.sum())
            if not n:
                continue
            count += n
            served.add(regions[k])
            worst = max(worst, routing.rtt_s.get((o, k), 0.0) * 1e3)
            met += int(((r.first[mine] - r.arrival[mine]) * 1e3 <= ttft_ms).sum())
        out[o] = {"requests": count, "regions": sorted(served), "worst_network_ms": round(worst, 3),
                  "ttft_met_fraction": round(met / count, 5) if count else None}
    return out
