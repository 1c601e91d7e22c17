"""A demand profile's smaller fleets, judged and mended (docs/verification.md, "Off-peak fleets").

Verification searches, trims and confirms the peak fleet (``allocations[].count``); a plan with
``demand.profile`` also states a fleet per period (``counts_by_period``: the top-up units scaled down
off-peak), and its average cost assumes them. Each distinct off-peak fleet is judged on the
confirmation's judge, each model at its largest demand over the periods that run the fleet (models
are simulated apart; a model's demand only falls from there with the same units), routed as the
gateway routes once the top-up is gone (hetinfra.sim.period, hetinfra.gateway.balancer): each class
(and each origin's row) over the peak's units that stay, in their peak shares renormalised, else over
the model's other units (those whose template serves it) by their overall share.

A fleet that misses is mended, not only reported: each model it misses gets one of its units'
replicas back in those periods (never above the unit's peak count, never past the model's
``max_spot_fraction``, an availability cap or the spec's budget on the average cost), the unit
holding the most of the model's requests outside its bounds first (hetinfra.plan.pad's order), and
is judged again on confirm seeds no judgement of it saw (``Replicated.fresh``), until it meets. The
gateway weighs units, not replicas: a unit that keeps one of its three replicas off-peak still takes
its peak share of the model's traffic, so the solver's own per-period routing (which
``solver.periods.fold`` drops) is not what runs. At the peak's counts the fleet is the peak's, which
the confirmation met at a demand at least as high, so the mend ends there unless a rule stops it; a
fleet still missing, or left unjudged by the work budget, is a plan warning naming its periods."""

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
    differ from the peak's): each model at its largest demand over the levels that run the fleet,
    against its peak's (models are simulated apart, so one view judges each at its own worst; a level
    busiest in sum ran one model at 0.3 where another level of the same fleet ran it at 0.6)."""
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
    return [(levels, dict(counts), {m: max(periods[lv].multiplier(m) for lv in levels) / (peak_mult[m] or 1.0)
                                    for m in names})
            for counts, levels in sorted(fleets.items())]


def _profile_periods(pr, levels: list[int]) -> list[int]:
    """The profile periods (0-based) that run ``levels`` (indices into ``pr.problem.periods``)."""
    return sorted(t for lv in levels for t in pr.problem.periods[lv].hours)


def off_peak_views(pr, view: dict) -> list[tuple[list[int], dict]]:
    """(profile periods, simulation view) of each distinct off-peak fleet of ``pr``, each model at its
    largest demand over the periods that run it."""
    return [(_profile_periods(pr, levels), fleet_view(view, counts, scale)) for levels, counts, scale in _fleets(pr)]


def mended_off_peak(pr, view: dict, judge, more=lambda: True, budget: float | None = None
                    ) -> tuple[object, list[dict], list[str]]:
    """(plan, records, warnings): ``pr`` with each off-peak fleet that ``judge`` (the confirmation's
    hetinfra.plan.replicated.Replicated) finds missing given replicas back until it meets (see the
    module docstring); one record per fleet judged (plan.json ``fidelity.confirmation.off_peak[]``); a
    warning per fleet still missing or left unjudged. ``more()``: whether the work budget allows
    another judgement; ``budget``: the spec's $/h limit on the plan's average cost, if it holds one."""
    levels = [{**lv, "counts": dict(lv["counts"])} for lv in pr.result.periods]
    records, warnings = [], []
    for lvs, counts, scale in _fleets(pr):
        periods = ", ".join(map(str, _profile_periods(pr, lvs)))
        if not more():
            warnings.append(OFF_PEAK_UNJUDGED.format(hours=periods))
            continue
        record = _mended_fleet(pr, view, judge, more, (lvs, counts, scale), levels, budget)
        records.append(record)
        if record["missed"]:
            warnings.append(OFF_PEAK_MISS.format(hours=periods, models=", ".join(record["missed"])))
    return replace(pr, result=replace(pr.result, periods=levels)), records, warnings


def _mended_fleet(pr, view: dict, judge, more, fleet_of: tuple, levels: list[dict], budget: float | None) -> dict:
    """One fleet (levels, counts, scale) judged, and given replicas back while a model misses, each
    re-judged on fresh seeds; ``levels`` (the plan's, being mended) take its counts; its record."""
    from hetinfra.plan.parts import reduced

    lvs, counts, scale = fleet_of
    record = {"periods": _profile_periods(pr, lvs), "met": False, "replicas_added": {}, "missed": []}
    fleet = fleet_view(view, counts, scale)
    judged = judge(fleet)
    verdicts = {m["model"]: m for m in judged["models"]}
    while (missed := sorted(name for name, m in verdicts.items() if not m["met"])) and more():
        grown = []
        for name in missed:  # one replica per missed model, each within every rule with the others
            uid = _unit_to_restore(pr, counts, fleet, judged, name, lambda u: _allowed(pr, counts, u, lvs, levels, budget))
            if uid is not None:
                grown.append(uid)
                counts[uid] = counts.get(uid, 0) + 1
                record["replicas_added"][uid] = record["replicas_added"].get(uid, 0) + 1
                for lv in lvs:
                    levels[lv]["counts"][uid] = counts[uid]
        if not grown:
            break
        fleet = fleet_view(view, counts, scale)
        touched = {pr.units[uid].model for uid in grown}
        judge.fresh(sorted(touched))  # seeds no judgement of these models saw: the last one decides
        judged = judge(reduced(fleet, touched))
        verdicts.update({m["model"]: m for m in judged["models"]})
    record["missed"] = sorted(name for name, m in verdicts.items() if not m["met"])
    record["met"] = not record["missed"]
    return record


def _unit_to_restore(pr, counts: dict[str, int], fleet: dict, judged: dict, model: str, allowed) -> str | None:
    """The unit of ``model`` to give one replica back in the fleet ``counts``: below its peak count and
    ``allowed`` (the spec's rules hold with it); the units that run first, in the padding's order on the
    last judgement and their req/s per replica in the fleet (hetinfra.plan.pad.padding_order), then
    the units down off-peak by their req/s at the peak; None when none can."""
    from hetinfra.plan.pad import padding_order, routed_rps, unit_ratios

    rps: dict[str, float] = {}
    for rows in fleet["routing"].get(model, {}).values():
        for r in rows:
            rps[r["unit"]] = rps.get(r["unit"], 0.0) + float(r["rps"])
    room = [u for u, n in pr.result.n.items() if pr.units[u].model == model and counts.get(u, 0) < n]
    running = [u for u in room if counts.get(u, 0) > 0]
    down = [u for u in room if counts.get(u, 0) <= 0]
    ordered = padding_order(running, unit_ratios(judged), {u: rps.get(u, 0.0) / counts[u] for u in running}) + \
        padding_order(down, {}, routed_rps(pr, model))
    return next((u for u in ordered if allowed(u)), None)


def _allowed(pr, counts: dict[str, int], uid: str, lvs: list[int], levels: list[dict], budget: float | None) -> bool:
    """Whether one more replica of ``uid`` in the fleet ``counts`` (run by ``lvs``) keeps the spec's
    rules the solver holds each level to: the availability caps and its model's max_spot_fraction
    (solver.recheck.count_breaches, on the rules that replica touches), and ``budget`` on the average
    cost over the horizon (``levels`` with the replica added)."""
    from hetinfra.solver.recheck import count_breaches

    more = {**counts, uid: counts.get(uid, 0) + 1}
    if count_breaches(pr.problem, more, {uid}):
        return False
    if budget is not None:
        after = [{**lv, "counts": {**lv["counts"], uid: more[uid]}} if k in lvs else lv for k, lv in enumerate(levels)]
        return replace(pr.result, periods=after).cost(pr.problem) <= budget + 1e-9
    return True
