"""A demand profile's smaller fleets, judged (docs/verification.md, "Off-peak fleets").

Verification searches, trims and confirms the peak fleet (``allocations[].count``); a plan with
``demand.profile`` also states a fleet per period (``counts_by_period``: the top-up units scaled down
off-peak), and its average cost assumes them. Each distinct off-peak fleet is judged once on the
confirmation's judge, at the highest demand it serves (one period per fleet stands for all: demand
only falls from there with the same units), routed as the gateway routes once the top-up is gone
(hetinfra.gateway.balancer): each class over the peak's units that stay, in their peak shares
renormalised, else over the model's other units (those whose template serves it) by their overall
share. A fleet that misses is a plan warning naming its periods and what to do; the peak plan is not
changed (an off-peak fleet of the peak's size is the safe choice, and the one the warning names)."""

from __future__ import annotations

__all__ = ["off_peak_views", "off_peak_warnings"]


def off_peak_views(pr, view: dict) -> list[tuple[list[int], dict]]:
    """(profile periods, simulation view) of each distinct off-peak fleet of ``pr`` (its counts differ
    from the peak's), at the demand of the busiest period that runs it."""
    periods, peak = pr.problem.periods, dict(pr.result.n)
    if not periods or not pr.result.periods:
        return []
    fleets: dict[tuple, list[int]] = {}
    for lv, level in enumerate(pr.result.periods):
        counts = tuple(sorted((u, c) for u, c in level["counts"].items() if c > 0))
        if dict(counts) != {u: c for u, c in peak.items() if c > 0}:
            fleets.setdefault(counts, []).append(lv)
    peak_mult = {m["name"]: max(per.multiplier(m["name"]) for per in periods) for m in view["models"]}
    out = []
    for counts, levels in sorted(fleets.items()):
        busiest = max(levels, key=lambda lv: sum(periods[lv].multiplier(m) / (peak_mult[m] or 1.0) for m in peak_mult))
        scale = {m: periods[busiest].multiplier(m) / (peak_mult[m] or 1.0) for m in peak_mult}
        hours = sorted(t for lv in levels for t in periods[lv].hours)
        out.append((hours, _fleet_view(view, dict(counts), scale)))
    return out


def _fleet_view(view: dict, counts: dict[str, int], scale: dict[str, float]) -> dict:
    """``view`` with the allocations ``counts`` and each model's demand and routes scaled by ``scale``."""
    allocations = [dict(a, count=counts[a["unit"]]) for a in view["allocations"] if counts.get(a["unit"], 0) > 0]
    serves = {t["id"]: {w for w, r in (t.get("capacity_rps") or {}).items() if r > 0} for t in view["templates"]}
    staying = {a["unit"]: (a["model"], a["template"]) for a in allocations}
    overall: dict[str, float] = {}  # each unit's share of its model's traffic at the peak
    for per in view["routing"].values():
        for rows in per.values():
            for r in rows:
                overall[r["unit"]] = overall.get(r["unit"], 0.0) + float(r["rps"])
    routing = {}
    for model, per in view["routing"].items():
        routing[model] = {}
        for cls, rows in per.items():
            rps = sum(float(r["rps"]) for r in rows) * scale.get(model, 1.0)
            live = [(r, float(r["share"])) for r in rows if r["unit"] in staying]
            if not live:  # the class's units are all down: as the gateway, the model's others by overall share
                live = [({"unit": u}, overall.get(u, 0.0) or 1.0) for u, (m, tid) in sorted(staying.items())
                        if m == model and cls in serves.get(tid, ())]
            total = sum(w for _, w in live)
            routing[model][cls] = [dict(r, share=round(w / total, 6), rps=rps * w / total)
                                   for r, w in live if w > 0] if total > 0 else []
    models = [dict(m, rate_rps=float(m["rate_rps"] or 0.0) * scale.get(m["name"], 1.0)) for m in view["models"]]
    return {**view, "allocations": allocations, "routing": routing, "models": models, "routing_by_origin": None}


def off_peak_warnings(pr, view: dict, judge) -> list[str]:
    """Each off-peak fleet ``judge`` (the confirmation's) finds missing, as a plan warning."""
    out = []
    for hours, fleet in off_peak_views(pr, view):
        judged = judge(fleet)
        missed = sorted(m["model"] for m in judged["models"] if not m["met"])
        if missed:
            out.append(f"the off-peak fleet of profile period(s) {', '.join(map(str, hours))} misses the latency "
                       f"objective of {', '.join(missed)} in simulation: run the peak's counts in those periods "
                       "(ignore counts_by_period there)")
    return out
