"""One profile period's fleet of a plan, as the gateway runs it (``hetinfra simulate --period``, and
verification's off-peak fleets: hetinfra.plan.levels).

A plan with ``demand.profile`` states each top-up unit's instances per period
(``allocations[].counts_by_period``); committed units run every period at ``count``. plan.json's
demand and routing are the peak's. In period K each model's demand is its multiplier there over its
largest, and the gateway's balancer (hetinfra.gateway.balancer) weighs units, not replicas: each class
goes over the peak's units that still run, in their peak shares renormalised, else over the model's
other running units whose template serves it, by their overall share. A plan with origins routes each
origin's row the same way (its round trips kept; a unit the row did not name takes the origin's worst
round trip), so TTFT still carries the network time the peak's simulation adds."""

from __future__ import annotations

from hetinfra.errors import InvalidInputError

__all__ = ["fleet_view", "period_view"]


def fleet_view(view: dict, counts: dict[str, int], scale: dict[str, float]) -> dict:
    """``view`` (plan.json's dict, or verification's simulation view) with the allocations ``counts``
    (a unit not in it is down) and each model's demand and routes scaled by ``scale`` (1 where absent)."""
    allocations = [dict(a, count=counts[a["unit"]]) for a in view["allocations"] if counts.get(a["unit"], 0) > 0]
    serves = {t["id"]: {w for w, r in (t.get("capacity_rps") or {}).items() if r > 0} for t in view["templates"]}
    staying = {a["unit"]: (a["model"], a["template"]) for a in allocations}
    overall: dict[str, float] = {}  # each unit's share of its model's traffic at the peak
    for per in view["routing"].values():
        for rows in per.values():
            for r in rows:
                overall[r["unit"]] = overall.get(r["unit"], 0.0) + float(r["rps"])

    def others(model: str, cls: str) -> list[tuple[dict, float]]:
        """The class's units all down: as the gateway, the model's others that serve it, by overall share."""
        return [({"unit": u}, overall.get(u, 0.0) or 1.0) for u, (m, tid) in sorted(staying.items())
                if m == model and cls in serves.get(tid, ())]

    routing = {model: {cls: _rerouted(rows, staying, scale.get(model, 1.0), lambda m=model, c=cls: others(m, c))
                       for cls, rows in per.items()} for model, per in view["routing"].items()}
    models = [dict(m, rate_rps=float(m["rate_rps"] or 0.0) * scale.get(m["name"], 1.0)) for m in view["models"]]
    return {**view, "allocations": allocations, "routing": routing, "models": models,
            "routing_by_origin": _origin_rows(view, allocations, routing, staying, scale)}


def _rerouted(rows: list[dict], staying: dict, scale: float, fallback) -> list[dict]:
    """``rows`` (one class's routes) over the units that stay, their shares renormalised and their req/s
    scaled by ``scale``; ``fallback()``: (row, weight) pairs where none of them stays."""
    rps = sum(float(r["rps"]) for r in rows) * scale
    live = [(r, float(r["share"])) for r in rows if r["unit"] in staying] or fallback()
    total = sum(w for _, w in live)
    return [dict(r, share=round(w / total, 6), rps=rps * w / total) for r, w in live if w > 0] if total > 0 else []


def _origin_rows(view: dict, allocations: list[dict], routing: dict, staying: dict, scale: dict) -> dict | None:
    """``routing_by_origin`` of the fleet: each origin's class rows rerouted as ``routing``'s (a class whose
    units are all down takes the class's rerouted units, with the round trip the origin's rows name for
    the unit's region, else the origin's worst)."""
    by_origin = view.get("routing_by_origin")
    if not by_origin:
        return by_origin
    where = {a["unit"]: (a.get("region"), a.get("deployment_unit")) for a in allocations}
    out: dict = {}
    for model, per_origin in by_origin.items():
        out[model] = {}
        for origin, per in per_origin.items():
            rtt = {r.get("region"): r.get("network_ms") for rows in per.values() for r in rows}
            worst = ((view.get("origins") or {}).get(model) or {}).get(origin, {}).get("worst_network_ms")

            def row(u: str, share: float) -> tuple[dict, float]:
                region, deployment = where[u]
                return {"unit": u, "deployment_unit": deployment, "region": region,
                        "network_ms": rtt.get(region, worst) or 0.0}, share

            out[model][origin] = {cls: _rerouted(rows, staying, scale.get(model, 1.0), lambda c=cls, m=model: [
                row(r["unit"], float(r["share"])) for r in routing[m].get(c, ())]) for cls, rows in per.items()}
    return out


def period_view(plan, period: int, where: str) -> dict:
    """The plan (a hetinfra.document Plan) as its fleet runs in profile period ``period`` (0-based), as a
    simulation view; InvalidInputError (exit 2) for a plan without a demand profile or a period outside
    it (``where``: the plan's path; the Plan's own checks hold its per-period lists to the profile's
    length: hetinfra.document.consistency)."""
    profiles = {m.name: [float(x) for x in m.demand_profile.multipliers] for m in plan.models if m.demand_profile}
    if not profiles:
        raise InvalidInputError(f"{where}: --period {period}, but the plan has no demand profile "
                                "(models[].demand_profile)", hint="--period simulates a period of a plan whose spec "
                                "has demand.profile; leave it out to simulate the fleet plan.json deploys")
    n = max(len(x) for x in profiles.values())
    if not 0 <= period < n:
        raise InvalidInputError(f"{where}: --period {period} is outside the plan's profile periods 0..{n - 1}",
                                hint=f"give a period from 0 to {n - 1}")
    counts = {a.unit: (a.counts_by_period[period] if a.counts_by_period else a.count) for a in plan.allocations}
    if not any(counts.values()):
        raise InvalidInputError(f"{where}: no unit runs in profile period {period} (counts_by_period)",
                                hint="nothing to simulate there")
    scale = {name: (x[period] / max(x) if max(x) > 0 else 0.0) for name, x in profiles.items()}
    return fleet_view(plan.to_dict(), counts, scale)
