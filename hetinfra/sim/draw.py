"""A model's requests before any replica serves them: drawn, routed and given arrival times.

Everything here depends on the model's demand, classes, routing and the workload, never on a unit's
count, and the parts that do not depend on the rate are kept in the simulator's memo apart from it
(``hetinfra.sim.plan_sim``): the classes and sizes with their two uniforms (:func:`sampled`, once
per workload), their routing (:func:`routed`, once per set of routing shares) and the rate-free
part of the arrival gaps (:func:`arrivals`), so the over-provisioning search, which scales rates,
draws no random number twice.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from pathlib import Path

import numpy as np

from hetinfra.document.sections import ModelEntry
from hetinfra.document.simulation import SimPlan
from hetinfra.sim import core
from hetinfra.sim.columns import Draw
from hetinfra.sim.network import OriginRouting
from hetinfra.sim.workload import WorkloadConfig, arrival_gaps, arrival_times, class_sizes, model_rng

__all__ = ["arrivals", "routed", "routes", "sampled"]


def _sizes(model: ModelEntry) -> dict:
    """What of a plan model draws its requests' classes and sizes (:func:`_sample`): not its rate,
    so the over-provisioning search, which scales rates, draws no size again."""
    return model.model_dump(mode="json", include={"name", "classes", "variants", "precision"})


def _sample(m: ModelEntry, pm, origins: int, config: WorkloadConfig, base: Path) -> Draw:
    """A model's requests before routing and arrival (:class:`~hetinfra.sim.columns.Draw`), drawn in the
    order the simulator always drew them (``OriginRouting.route`` reads the same numbers whatever
    the shares). Depends only on the model's demand and classes, its number of origins and the workload,
    not on its rate (the arrivals are drawn apart: :func:`arrivals`)."""
    classes = m.classes
    rules = class_sizes(pm.spec, base, classes)
    rng = model_rng(config.seed, m.name, "requests")
    shares = [float(c.share) for c in classes]
    cum = [math.fsum(shares[:k + 1]) for k in range(len(shares))]
    drawn = core.sample(rng, config.requests, cum, rules, origins > 1)
    if drawn is not None:
        return Draw(*drawn)
    cls, prompt, output, where, pick = [], [], [], [] if origins > 1 else None, []
    last, total = len(cum) - 1, cum[-1]
    for _ in range(config.requests):  # the reference of core.sample
        k = min(bisect_right(cum, rng.random() * total), last)  # the first class whose cumulative share exceeds u
        isl, osl = rules[k].draw(rng)
        cls.append(k)
        prompt.append(isl)
        output.append(osl)
        if where is not None:
            where.append(rng.random())
        pick.append(rng.random())
    return Draw(np.array(cls, dtype=np.int64), np.array(prompt, dtype=np.int64), np.array(output, dtype=np.int64),
                None if where is None else np.array(where), np.array(pick))


def arrivals(name: str, rate: float, config: WorkloadConfig, memo: dict | None) -> np.ndarray:
    """A model's arrival times at ``rate``; the rate-free gaps are kept in ``memo``."""
    key = json.dumps(["gaps", name, config.requests, config.burst_cv, config.seed])
    gaps = None if memo is None else memo.get(key)
    if gaps is None:
        gaps = arrival_gaps(model_rng(config.seed, name, "arrivals"), config.requests, config.burst_cv)
        if memo is not None:
            memo[key] = gaps
    return arrival_times(gaps, rate, config.burst_cv)


def _route(draw: Draw, routing: OriginRouting, classes: int) -> tuple[dict[int, np.ndarray], list[int], np.ndarray]:
    """``draw`` routed by the plan's routing shares (per origin where the plan routes by origin:
    ``hetinfra.sim.network``): the request ids per allocation index, the unrouted count per class
    and each request's origin (an index into ``routing.origins``). Not dependent on any unit's count
    or on the rate."""
    unit, origin_ix = routing.route(draw.cls, draw.where, draw.pick)
    # the units routed to, ascending (np.unique would import numpy.ma, 5 ms of every `plan`)
    by_unit = {int(u): np.flatnonzero(unit == u) for u in np.flatnonzero(np.bincount(unit[unit >= 0]))}
    unrouted = np.bincount(draw.cls[unit < 0], minlength=classes).tolist()
    return by_unit, unrouted, origin_ix


def sampled(m: ModelEntry, pm, origins: int, config: WorkloadConfig, spec_path, memo: dict | None) -> Draw:
    """:func:`_sample`, kept in ``memo`` (a round that changes only the routing or the rate draws no
    request again)."""
    key = None if memo is None else json.dumps(["sample", _sizes(m), origins, [config.requests, config.seed]],
                                               sort_keys=True)
    kept = memo.get(key) if key is not None else None  # one read: a bounded memo may forget (sim.memo)
    if kept is not None:
        return kept
    out = _sample(m, pm, origins, config, Path(spec_path).parent)
    if key is not None:
        memo[key] = out
    return out


def routed(m: ModelEntry, plan: SimPlan, draw: Draw, routing: OriginRouting, memo: dict | None,
           config: WorkloadConfig) -> tuple[dict[int, np.ndarray], list[int], np.ndarray]:
    """:func:`_route`, kept in ``memo`` (the trim's checks and the bisection route the same requests;
    the key holds the draw's workload, so replications at other seeds keep their own entries)."""
    key = None if memo is None else json.dumps(["route", _sizes(m), [config.requests, config.seed], routes(plan, m.name),
                                                sorted((a.unit, k) for k, a in enumerate(plan.allocations)
                                                       if a.model == m.name)], sort_keys=True)
    kept = memo.get(key) if key is not None else None
    if kept is not None and kept[0] is draw:
        return kept[1]
    out = _route(draw, routing, len(m.classes))
    if key is not None:
        memo[key] = (draw, out)
    return out


def routes(plan: SimPlan, model: str) -> list:
    """What routes a model's requests: its class routing and, where the plan routes by origin, its
    origins' rows and shares (a SimPlan routes only to units it has: ``SimPlan._routes_to_allocations``)."""
    def keep(rows: dict) -> dict:
        return {c: [e.model_dump(mode="json") for e in entries] for c, entries in (rows or {}).items()}

    by_origin = (plan.routing_by_origin or {}).get(model) or {}
    origins = (plan.origins or {}).get(model)
    return [keep(plan.routing.get(model)), {o: keep(rows) for o, rows in sorted(by_origin.items())},
            {o: v.model_dump(mode="json") for o, v in origins.items()} if origins is not None else None]
