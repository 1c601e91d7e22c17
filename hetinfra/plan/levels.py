"""A demand profile's smaller fleets, judged and mended (docs/verification.md, "Off-peak fleets").

Verification searches, trims and confirms the peak fleet (``allocations[].count``); a plan with
``demand.profile`` also states a fleet per period (``counts_by_period``: the top-up units scaled down
off-peak), and its average cost assumes them. Each distinct off-peak fleet is judged on the
confirmation's judge, at the highest demand it serves (one period per fleet stands for all: demand
only falls from there with the same units), routed as the gateway routes once the top-up is gone
(hetinfra.gateway.balancer): each class over the peak's units that stay, in their peak shares
renormalised, else over the model's other units (those whose template serves it) by their overall
share.

A fleet that misses is mended, not only reported: each model it misses gets one of its units'
replicas back in those periods (never above the unit's peak count, never past the model's
``max_spot_fraction`` there), the unit holding the most of the model's requests outside its bounds
first (hetinfra.plan.pad's order), and is judged again on confirm seeds no judgement of it saw
(``Replicated.fresh``), until it meets. The gateway weighs units, not replicas: a unit that keeps one
of its three replicas off-peak still takes its peak share of the model's traffic, so the solver's
own per-period routing (which ``solver.periods.fold`` drops) is not what runs. At the peak's counts
the fleet is the peak's, which the confirmation met at a higher demand, so the mend ends; a fleet
still missing (the work budget spent) is a plan warning naming its periods."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.sim.period import fleet_view

__all__ = ["off_peak_views", "mended_off_peak", "OFF_PEAK_MISS", "OFF_PEAK_UNJUDGED"]

#: a plan warning: an off-peak fleet the mend could not make meet (its periods, its models)
OFF_PEAK_MISS = ("the off-peak fleet of profile period(s) {hours} misses the latency objective of {models} in "
                 "simulation: run the peak's counts in those periods (ignore counts_by_period there)")
#: a plan warning: an off-peak fleet the work budget left unjudged
OFF_PEAK_UNJUDGED = ("the off-peak fleet of profile period(s) {hours} was not simulated (the work budget, "
                     "planning.time_limit_s, was spent): run the peak's counts there, or plan with a larger budget")


def _fleets(pr) -> list[tuple[list[int], dict[str, int], dict[str, float]]]:
    """(levels, counts, demand scale per model) of each distinct off-peak fleet of ``pr`` (its counts
    differ from the peak's), the scale of the busiest level that runs it against the peak's."""
    periods, peak = pr.problem.periods, dict(pr.result.n)
    if not periods or not pr.result.periods:
        return []
    fleets: dict[tuple, list[int]] = {}
    for lv, level in enumerate(pr.result.periods):
        counts = tuple(sorted((u, c) for u, c in level["counts"].items() if c > 0))
        if dict(counts) != {u: c for u, c in peak.items() if c > 0}:
            fleets.setdefault(counts, []).append(lv)
    names = sorted({m for m, _cls in pr.problem.demand})
    peak_mult = {m: max(per.multiplier(m) for per in periods) for m in names}
    out = []
    for counts, levels in sorted(fleets.items()):
        busiest = max(levels, key=lambda lv: sum(periods[lv].multiplier(m) / (peak_mult[m] or 1.0) for m in names))
        out.append((levels, dict(counts), {m: periods[busiest].multiplier(m) / (peak_mult[m] or 1.0) for m in names}))
    return out


def _hours(pr, levels: list[int]) -> list[int]:
    return sorted(t for lv in levels for t in pr.problem.periods[lv].hours)


def off_peak_views(pr, view: dict) -> list[tuple[list[int], dict]]:
    """(profile periods, simulation view) of each distinct off-peak fleet of ``pr``, at the demand of
    the busiest period that runs it."""
    return [(_hours(pr, levels), fleet_view(view, counts, scale)) for levels, counts, scale in _fleets(pr)]


def mended_off_peak(pr, view: dict, judge, more=lambda: True) -> tuple:
    """(plan, records, warnings): ``pr`` with each off-peak fleet that ``judge`` (the confirmation's
    hetinfra.plan.replicated.Replicated) finds missing given replicas back until it meets (see the
    module docstring); one record per fleet (plan.json ``fidelity.confirmation.off_peak[]``); a
    warning per fleet still missing. ``more()``: whether the work budget allows another judgement."""
    from hetinfra.plan.parts import reduced

    levels = [{**lv, "counts": dict(lv["counts"])} for lv in pr.result.periods]
    records, warnings = [], []
    for lvs, counts, scale in _fleets(pr):
        record = {"periods": _hours(pr, lvs), "met": False, "replicas_added": {}, "missed": []}
        fleet = fleet_view(view, counts, scale)
        verdicts = {}
        judged = judge(fleet) if more() else None
        while judged is not None:
            verdicts.update({m["model"]: m for m in judged["models"]})
            missed = sorted(name for name, m in verdicts.items() if not m["met"])
            grown = [uid for name in missed if (uid := _unit_to_restore(pr, counts, fleet, judged, name))]
            if not missed or not grown or not more():
                break
            for uid in grown:
                counts[uid] = counts.get(uid, 0) + 1
                record["replicas_added"][uid] = record["replicas_added"].get(uid, 0) + 1
            fleet = fleet_view(view, counts, scale)
            touched = {pr.units[uid].model for uid in grown}
            judge.fresh(sorted(touched))  # seeds no judgement of these models saw: the last one decides
            judged = judge(reduced(fleet, touched))
        record["missed"] = sorted(name for name, m in verdicts.items() if not m["met"])
        record["met"] = bool(verdicts) and not record["missed"]
        for lv in lvs:
            levels[lv]["counts"].update(counts)
        records.append(record)
        hours = ", ".join(map(str, record["periods"]))
        if not verdicts:
            warnings.append(OFF_PEAK_UNJUDGED.format(hours=hours))
        elif record["missed"]:
            warnings.append(OFF_PEAK_MISS.format(hours=hours, models=", ".join(record["missed"])))
    return replace(pr, result=replace(pr.result, periods=levels)), records, warnings


def _unit_to_restore(pr, counts: dict[str, int], fleet: dict, judged: dict, model: str) -> str | None:
    """The unit of ``model`` to give one replica back in the fleet ``counts``: below its peak count,
    within the model's spot fraction; one that runs first, in the padding's order on the last
    judgement (unstable, most requests outside the bounds per replication, worst ratio), then the
    most req/s per replica, then the units down off-peak by their peak share; None when none can."""
    from hetinfra.plan.pad import unit_ratios

    ratios = unit_ratios(judged)
    rps: dict[str, float] = {}
    for rows in fleet["routing"].get(model, {}).values():
        for r in rows:
            rps[r["unit"]] = rps.get(r["unit"], 0.0) + float(r["rps"])
    peak_rps: dict[str, float] = {}
    for (uid, m, _cls), r in pr.result.flow.items():
        if m == model:
            peak_rps[uid] = peak_rps.get(uid, 0.0) + float(r)

    def first(u: str) -> tuple:
        unstable, missed, worst = ratios.get(u, (False, 0.0, 0.0))
        running = counts.get(u, 0) > 0
        load = rps.get(u, 0.0) / counts[u] if running else peak_rps.get(u, 0.0)
        return not running, not unstable, -missed, -worst, -load, u

    room = [u for u, n in pr.result.n.items()
            if pr.units[u].model == model and counts.get(u, 0) < n and _spot_allows(pr, counts, u)]
    return min(room, key=first) if room else None


def _spot_allows(pr, counts: dict[str, int], uid: str) -> bool:
    """Whether one more replica of ``uid`` keeps its model within max_spot_fraction in ``counts``."""
    unit = pr.units[uid]
    frac = pr.problem.max_spot_fraction.get(unit.model)
    if frac is None or not unit.spot:
        return True
    mine = [(u, c + (u == uid)) for u, c in {**counts, uid: counts.get(uid, 0)}.items() if pr.units[u].model == unit.model]
    total = sum(pr.units[u].gpus * c for u, c in mine)
    return sum(pr.units[u].gpus * c for u, c in mine if pr.units[u].spot) <= frac * total + 1e-9
