r"""Routing by origin: the allocation problem with one flow per (origin, class), residency, and the
round trip from the client's region inside the TTFT objective (docs/regions.md).

A model that declares ``demand.origins`` gets, instead of its demand keys (m, w), one key
(m, w@o) per origin o with rate lambda[m,w] x share[o]; a unit u serves it at

    h[u, w@o] = h[u, w] x rate(TTFT - rtt(o, region(u))) / rate(TTFT)       (<= h[u, w])

the req/s the template sustains when the round trip eats part of the TTFT objective (the
performance model at the shortened TTFT; 0 when nothing is left). Residency leaves out the pairs
whose region is outside the origin's area: h[u, w@o] = 0 unless region(u) = o (``region``) or is
on o's continent (``continent``). A pair with h = 0 has no flow variable, so neither can be traded
for cost. After the solve the flows fold back to (m, w) (``fold``): everything that reads a class
plan sees the plan it always did; plan.json adds ``routing_by_origin``. A spec without origins is
not touched (one origin, ``any``).
"""

from __future__ import annotations

import weakref
from dataclasses import replace

from hetinfra.errors import InfeasibleError, InvalidInputError
from hetinfra.price_feeds.network import continent_of, locate, round_trip_ms
from hetinfra.solver.problem import AllocationProblem
from hetinfra.spec.base import ORIGIN_KEY_SEP
from hetinfra.spec.origins import origin_residency, origin_shares

__all__ = ["allowed", "area_name", "class_problem", "declares_origins", "describe_key", "flow_rated", "fold", "origins_of",
           "residency_diagnosis", "residency_note", "unknown_places", "with_origins"]


def declares_origins(inputs) -> bool:
    """Some model says where its clients are: units then compete per region (pruning) and route per origin."""
    return any(pm.spec.demand.origins for pm in inputs.models)


def origins_of(pm) -> list[tuple[str, float, str]]:
    """A planned model's origins: (region, normalized share, residency), in the spec's order."""
    shares = origin_shares(pm.spec.demand.origins)
    total = sum(shares.values())
    rules = origin_residency(pm.spec.demand.origins)
    return [(o, s / total, rules[o]) for o, s in shares.items()] if total > 0 else []


def allowed(origin: str, rule: str, cloud: str, region: str) -> bool:
    """May a request from ``origin`` under residency ``rule`` be served in (cloud, region)?"""
    if rule == "region":
        return region == origin
    if rule == "continent":
        here = continent_of(origin)
        return here is not None and continent_of(region, cloud) == here
    return True


def area_name(origin: str, rule: str) -> str:
    """The area a residency rule keeps an origin's requests in, in words."""
    return f"region {origin}" if rule == "region" else f"{continent_of(origin) or 'its continent (unknown)'}" \
        if rule == "continent" else "anywhere"


class _Rates:
    """h[u, w@o] / h[u, w]: the performance model at the TTFT the round trip leaves (memoized)."""

    def __init__(self, inputs):
        from hetinfra.perf.model import PerformanceModel

        self.perf = PerformanceModel(inputs.profiles)
        self.models = {pm.spec.name: pm for pm in inputs.models}
        self.bundle_memo: dict = {}  # bundles' per-phase rates (hetinfra.plan.templates_pd)
        #: ratio of a layout's class at a round trip: every solve of the run asks it of every unit and
        #: flow again (the units' rates change with the derates; the ratio reads only their layout)
        self.memo: dict = {}

    def ratio(self, template, cls, rtt_ms: float) -> float:
        if rtt_ms <= 0:
            return 1.0
        if template.stages is not None:  # mixed pipelines: no rate at a shortened TTFT; local flows only
            return 0.0
        if template.bundle is not None:
            return self._ratio(template, cls, rtt_ms)
        key = (template.model, template.variant, template.gpu, template.tp, template.pp, template.nodes, cls.name,
               cls.input_tokens, cls.output_tokens, rtt_ms)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._ratio(template, cls, rtt_ms)
        return hit

    def _ratio(self, template, cls, rtt_ms: float) -> float:
        pm = self.models[template.model]
        if template.variant is not None:
            pm = next(v.model for v in pm.variants if v.name == template.variant)
        budget = pm.ctx.ttft_ms - rtt_ms
        if budget <= 0:
            return 0.0
        if template.bundle is not None:  # prefill + transfer + first decode step: a bundle's own TTFT
            from hetinfra.plan.templates_pd import bundle_ttft_ratio

            return bundle_ttft_ratio(pm, template, cls, budget, self.bundle_memo)
        nodes = template.nodes
        full = self.perf.rate(pm.ctx, template.gpu, template.tp, template.pp, cls, nodes=nodes).max_rps
        tight = self.perf.rate(replace(pm.ctx, ttft_ms=budget), template.gpu, template.tp, template.pp, cls,
                               nodes=nodes).max_rps
        return min(1.0, tight / full) if full > 0 else 0.0


#: the memo of the last planning run: (its inputs, weakly held; the memo)
_LAST: list = [lambda: None, None]


def _rates_for(inputs) -> _Rates:
    """One memo of shortened-TTFT rates per planning run (its inputs), across its many solves."""
    if _LAST[0]() is not inputs:
        _LAST[:] = [weakref.ref(inputs), _Rates(inputs)]
    return _LAST[1]


def with_origins(inputs, units: list, problem: AllocationProblem) -> AllocationProblem:
    """``problem`` (built by ``planner.to_problem`` from ``units``, in the same order) with each
    model that declares origins routed per (origin, class); unchanged without origins."""
    origins = {pm.spec.name: origins_of(pm) for pm in inputs.models if pm.spec.demand.origins}
    if not origins:
        return problem
    classes = {(pm.spec.name, c.name): c for pm in inputs.models for c in pm.classes}
    demand, keys = {}, {}
    for (m, w), lam in problem.demand.items():
        for o, share, _ in origins.get(m, [(None, 1.0, "none")]):
            key = (m, w if o is None else f"{w}{ORIGIN_KEY_SEP}{o}")
            if o is not None and key in problem.demand:
                raise InvalidInputError(f"model {m}: class name {key[1]!r} is also the flow of class {w!r} from origin "
                                        f"{o}", hint="rename the class (its name may not end in @<origin region>)")
            demand[key] = lam * share
            if o is not None:
                keys[key] = (w, o)
    rates = _rates_for(inputs)
    out, network = [], {}
    for data, unit in zip(problem.units, units):
        t = unit.template
        per: dict[str, float] = {}
        for w, h in data.rates.items():
            if (data.model, w) not in classes:  # a class with no demand (a base all of whose requests name adapters)
                continue
            for o, _, rule in origins.get(data.model, [(None, 1.0, "none")]):
                if o is None:
                    per[w] = h
                    continue
                if not allowed(o, rule, t.cloud, data.region):
                    continue
                rtt = round_trip_ms(o, data.region) or 0.0  # unknown place: no figure (plan.json network_ms null)
                r = h * rates.ratio(t, classes[(data.model, w)], rtt)
                if r > 0:
                    per[f"{w}{ORIGIN_KEY_SEP}{o}"] = r
                    if rtt > 0:  # the objective's tie-break toward the clients (solver.rows.NETWORK_TIE)
                        network[(data.id, (data.model, f"{w}{ORIGIN_KEY_SEP}{o}"))] = rtt
        out.append(replace(data, rates=per))
    adapters = problem.adapters
    if adapters:  # LoRA: each adapter's keys are its per-origin flows, held per origin area
        from hetinfra.plan.adapter_cover import origin_holds

        clouds = {data.id: unit.template.cloud for data, unit in zip(problem.units, units)}
        adapters = origin_holds(problem, tuple(out), clouds, demand, keys, origins, allowed)
    return problem.replace(units=tuple(out), demand=demand, flow_keys=keys, adapters=adapters, network_ms=network)


def flow_rated(inputs, units: list, problem: AllocationProblem) -> list:
    """``units`` (the units of ``problem``) with their templates' rates replaced by their per-flow rates
    h[u, w@o], so that dominance pruning compares what the ILP will use; ``units`` themselves
    without origins."""
    routed = with_origins(inputs, units, problem)
    if routed is problem:
        return units
    return [replace(u, template=replace(u.template, rates=data.rates)) for u, data in zip(units, routed.units)]


def fold(problem: AllocationProblem, result):
    """The per-origin solve folded back to classes: ``result.flow`` and ``unmet`` per (model,
    class) summed over origins, the per-origin flows kept in ``result.origin_flow``."""
    if not problem.flow_keys:
        return result
    flow: dict = {}
    by_origin: dict = {}
    for (u, m, key), rps in result.flow.items():
        w, o = problem.flow_keys.get((m, key), (key, None))
        flow[(u, m, w)] = flow.get((u, m, w), 0.0) + rps
        if o is not None:
            by_origin[(u, m, w, o)] = rps
    unmet: dict = {}
    for (m, key), rps in result.unmet.items():
        w = problem.flow_keys.get((m, key), (key, None))[0]
        unmet[(m, w)] = unmet.get((m, w), 0.0) + rps
    return replace(result, flow=flow, unmet=unmet, origin_flow=by_origin)


def class_problem(problem: AllocationProblem, base: AllocationProblem) -> AllocationProblem:
    """The class-level problem of a folded plan: ``base``'s demand and rates on ``problem``'s units."""
    rates = {u.id: u.rates for u in base.units}
    return problem.replace(units=tuple(replace(u, rates=rates[u.id]) for u in problem.units),
                           demand=dict(base.demand), flow_keys={}, network_ms={})


def unknown_places(inputs, units: list) -> list[str]:
    """A warning naming the origins and unit regions the network table has no place for (their
    round trips are planned as 0 ms): with origins only."""
    if not declares_origins(inputs):
        return []
    regions = {o for pm in inputs.models for o, _, _ in (origins_of(pm) if pm.spec.demand.origins else [])}
    regions |= {u.region for u in units}
    missing = sorted(r for r in regions if locate(r) is None)
    return [f"no location for region(s) {', '.join(missing)} in the network table: round trips to and from them are "
            "planned as 0 ms (docs/regions.md)"] if missing else []


def describe_key(problem: AllocationProblem, key: tuple[str, str]) -> str:
    """A demand key's class, and its origin where it is one origin's flow."""
    w, o = problem.flow_keys.get(key, (key[1], None))
    return w if o is None else f"{w} from origin {o}"


def residency_note(inputs, err: InfeasibleError) -> InfeasibleError:
    """``err`` (caps too small) naming the origins whose residency keeps them in a capped region's area."""
    capped = {(x["availability"]["cloud"], x["availability"]["region"]) for x in err.details.get("relax", [])
              if "availability" in x}
    notes = [f"requests from origin {o} (model {pm.spec.name}) must stay in {area_name(o, rule)} "
             f"(residency: {rule})" for pm in inputs.models for o, _, rule in (origins_of(pm) if pm.spec.demand.origins else [])
             if rule != "none" and any(allowed(o, rule, c, r) for c, r in capped)]
    if notes:
        err.message += "; " + "; ".join(notes)
        err.details.setdefault("relax", []).extend({"residency": n} for n in notes)
    return err


def residency_diagnosis(inputs, problem: AllocationProblem) -> InfeasibleError | None:
    """Name the origin and area when residency (or the round trip inside TTFT) leaves a class of an
    origin with no unit that may serve it."""
    served = {k for _, k in problem.pairs()}
    for key in sorted(problem.flow_keys):
        if key in served or problem.demand.get(key, 0) <= 0:
            continue
        m, (w, o) = key[0], problem.flow_keys[key]
        pm = next(p for p in inputs.models if p.spec.name == m)
        rule, ttft = origin_residency(pm.spec.demand.origins)[o], pm.spec.slo.ttft_ms
        if rule != "none":
            return InfeasibleError(
                f"model {m}: requests {w} from origin {o} must stay in {area_name(o, rule)} (residency: {rule}), "
                f"and no allowed offer there serves them within TTFT {ttft:g} ms",
                hint=f"allow clouds/regions/GPUs in {area_name(o, rule)}, or relax demand.origins.{o}.residency",
                details={"relax": [{"residency": {"model": m, "origin": o, "area": area_name(o, rule)}}]})
        return InfeasibleError(
            f"model {m}: requests {w} from origin {o}: no allowed offer serves them within TTFT {ttft:g} ms once the "
            "round trip from the origin is added", hint=f"allow offers in or near {o}, or loosen slo.ttft_ms",
            details={"relax": [{"slo": {"model": m, "origin": o, "ttft_ms": ttft}}]})
    return None
