"""The padding: the last step of verification for a model the confirmation on fresh seeds still
misses once the search may not be sent back again (docs/verification.md, "A search that cannot
overfit its check").

After the last veto (hetinfra.plan.verify.VETOES) a model can still miss on the confirm seeds: its
rounds' plan passed the search's seeds by luck and nothing of the trim is left to put back. Rather
than ship a plan that misses, that model alone gets capacity: one replica at a time, to its unit
that misses the most on the last judgement (an unstable one, then the one holding the most of the
model's requests outside its bounds, then the largest worst ratio of a statistic to its objective,
then the most req/s per replica), within every other rule of the spec (``trim.breaks_rules``). Each
padded plan is judged on FRESH confirm seeds (``Replicated.fresh``), never on seeds a decision saw,
so the judgement that calls it met is a confirmation as the first one was. It never removes a
replica, and no other model's units, routing or judgement change (models share no unit). At most
PAD_STEPS replicas per model: a model still missing then is stated as missing, as before, and the
replicas tried for it are removed again (they bought no promise; its record says what was tried).

Where a unit cannot take one more replica within the spec's rules (a cap, the budget, a spot
fraction), it is relieved instead: one replica more of a sibling unit takes the share of its load one
replica more of it would have (hetinfra.plan.relief; the record's ``relieved``).

The same padding serves a model the search's own seeds still miss when its rounds
(planning.verify.max_rounds) run out (``missed_on: "search"``): it must then meet on fresh confirm
seeds AND on the search's seeds (judged again on a view of it alone: adding replicas only helps, so
those seeds are a fair check of that side), as any verified plan meets on both.
"""

from __future__ import annotations

from dataclasses import replace

from hetinfra.plan.budget import current
from hetinfra.plan.parts import reduced
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.rounds import simulation_view
from hetinfra.plan.trim import breaks_rules
from hetinfra.plan.verdicts import seeds_union

__all__ = ["padded", "with_replica", "unit_ratios", "padding_order", "routed_rps", "PAD_STEPS", "PAD_CUT"]

#: the most replicas the padding adds to one model (each judged on fresh seeds)
PAD_STEPS = 4
#: what the work budget names when it stops the padding (plan.json work_budget.stopped)
PAD_CUT = "the padding of models the confirmation still missed (the plan is not confirmed)"
#: fidelity.confirmation.padded[].reason where the padding stopped short of a confirmed model
STEPS_SPENT = f"still missed after {PAD_STEPS} replica(s) added, each judged on fresh confirm seeds"
NO_UNIT = ("no unit of it can take one more replica, nor hand load to one more replica of another unit, within the "
           "spec's rules")
BUDGET_SPENT = "the work budget (planning.time_limit_s) was spent"


def padded(pr: PlanResult, conf: dict, confirm, search=None, searched: dict | None = None) \
        -> tuple[PlanResult, dict, list[dict]]:
    """(plan, its confirmation, one record per padded model) for ``pr``, whose confirmation ``conf``
    missed: the models that missed get replicas until a judgement on fresh seeds meets (see the
    module docstring). ``confirm``: the confirmation's judge (hetinfra.plan.replicated.Replicated).
    ``search``, ``searched``: the search's judge and its judgement of ``pr`` where the rounds ran out
    with models missing: those models are padded too, and each must then meet on both (the search's
    seeds, and fresh confirm seeds). A record: model, the replicas added in all and per unit, the
    seeds of its last judgement, met, and why it stopped short (``reason``, only then)."""
    from hetinfra.plan.confirm import sized_confirmation  # with plan.json's sections: not at import
    from hetinfra.plan.kv_pressure import pressure_miss

    search_missed = {m["model"] for m in (searched or {}).get("models", ()) if not m["met"]}
    pressed = {m["model"]: why for m in conf["models"] if (why := pressure_miss(m))}  # thrashing, cliff
    records = {name: {"model": name, "missed_on": "search" if name in search_missed else
                      pressed.get(name, "confirmation"),
                      "replicas_added": 0, "replicas_by_unit": {}, "seeds": [], "met": False}
               for name in sorted({m["model"] for m in conf["models"] if not m["met"]} | search_missed)}
    ratios = unit_ratios(conf, searched or {})
    start, first = pr, conf
    missing = sorted(records)
    while missing:
        if not current().check(PAD_CUT):
            for name in missing:
                records[name]["reason"] = BUDGET_SPENT
            break
        for name in missing:
            pr = _pad_one(pr, ratios, records[name])
        missing = [n for n in missing if "reason" not in records[n]]
        if not missing:
            break
        # seeds no judgement of these models saw: neither the search's nor an earlier confirmation's
        confirm.fresh(missing)
        part = sized_confirmation(confirm, reduced(simulation_view(pr), set(missing)))
        conf = _merged(conf, part)
        ratios.update(unit_ratios(part, {}))
        for m in part["models"]:
            records[m["model"]].update(seeds=list(m.get("seeds") or ()), met=bool(m["met"]))
        missing = [m["model"] for m in part["models"] if not m["met"]]
        met_now = {m["model"] for m in part["models"] if m["met"]}
        # a relief moved load to a layout the search's rounds may never have simulated: its seeds judge it too
        relieved = {n for n in met_now if records[n].get("relieved")}
        missing += _still_missed_by_search(search, pr, (search_missed | relieved) & met_now, records, ratios)
        for name in missing:
            if records[name]["replicas_added"] >= PAD_STEPS:
                records[name]["reason"] = STEPS_SPENT
        missing = [n for n in missing if "reason" not in records[n]]
    pr, conf = _unpadded_where_missing(pr, conf, start, first, records)
    return pr, conf, [records[n] for n in sorted(records)]


def _unpadded_where_missing(pr: PlanResult, conf: dict, start: PlanResult, first: dict, records: dict) -> tuple:
    """``pr`` less the replicas added to a model that still misses (they bought no promise: a plan
    that carries replicas it does not need breaks the other half of it), and ``conf`` with that
    model's judgement as before the padding; its record says what was tried and removed again."""
    from hetinfra.plan.confirm import restored

    undo = [r for r in records.values() if not r["met"] and r["replicas_added"]]
    if not undo:
        return pr, conf
    for r in undo:  # its units, flows and period counts as before the padding (a relief moved flows)
        pr = restored(pr, start, r["model"])
        r["reason"] = f"{r.get('reason', STEPS_SPENT)}; the {r['replicas_added']} replica(s) tried were removed again"
        r.update(replicas_added=0, replicas_by_unit={})
        r.pop("relieved", None)
    before = {m["model"]: m for m in first["models"]}
    names = {r["model"] for r in undo if r["model"] in before}
    back = {"models": [before[name] for name in sorted(names)],
            "units": [u for u in first.get("units") or () if u.get("model") in names]}
    return pr, _merged(conf, back)


def _still_missed_by_search(search, pr: PlanResult, again: set, records: dict, ratios: dict) -> list[str]:
    """Of ``again`` (models the search's judgement missed that now met on fresh seeds), those that
    still miss on the search's seeds, judged again on a view reduced to them: they go on being padded.
    The plan the padding returns must meet on both judges, as any verified plan."""
    if search is None or not again:
        return []
    judged = search(reduced(simulation_view(pr), set(again)))
    ratios.update(unit_ratios(judged, {}))
    out = [m["model"] for m in judged["models"] if not m["met"] and m["model"] in again]
    for name in out:
        records[name]["met"] = False
    return out


def unit_ratios(*judgements: dict) -> dict[str, tuple[bool, float, float]]:
    """Per unit, over ``judgements``, what :func:`padding_order` pads first by: whether it was unstable in one,
    the most requests outside its model's bounds per replication (``missed_requests``), and its worst
    objective ratio."""
    out: dict[str, tuple[bool, float, float]] = {}
    for judged in judgements:
        for u in judged.get("units") or ():
            ratio = float((u.get("objective") or {}).get("ratio") or 0.0)
            missed = float(u.get("missed_requests") or 0) / max(int(u.get("replications") or 1), 1)
            was = out.get(u["unit"], (False, 0.0, 0.0))
            out[u["unit"]] = (was[0] or not u.get("stable", True), max(was[1], missed), max(was[2], ratio))
    return out


def _pad_one(pr: PlanResult, ratios: dict[str, tuple[bool, float, float]], record: dict) -> PlanResult:
    """``pr`` with one replica more on ``record``'s model's unit that misses the most (see the module
    docstring), noted in ``record``: each unit in that order gets one replica more, or, where that
    breaks a rule of the spec, is relieved on a sibling unit (hetinfra.plan.relief), before the next
    unit is tried (a unit at a cap is relieved again at the next step, not passed over for a unit
    that holds none of the misses); where none can be, ``pr`` and the reason."""
    from hetinfra.plan.relief import relieved

    for uid in _order(pr, ratios, record["model"]):
        candidate = with_replica(pr, uid)
        if not breaks_rules(candidate):
            _added(record, uid)
            return candidate
        found = relieved(pr, uid)
        if found is not None:
            candidate, target, moved = found
            _added(record, target)
            off = record.setdefault("relieved", {})
            off[uid] = round(off.get(uid, 0.0) + moved, 6)
            return candidate
    record["reason"] = NO_UNIT
    return pr


def _added(record: dict, uid: str) -> None:
    record["replicas_by_unit"][uid] = record["replicas_by_unit"].get(uid, 0) + 1
    record["replicas_added"] += 1


def _order(pr: PlanResult, ratio: dict[str, tuple[bool, float, float]], model: str) -> list[str]:
    """``model``'s units, the one to pad first first (:func:`padding_order` on the last judgements
    ``ratio`` and each unit's routed req/s per replica)."""
    rps = routed_rps(pr, model)
    mine = [uid for uid in pr.result.n if pr.units[uid].model == model and pr.result.n[uid] > 0]
    return padding_order(mine, ratio, {u: rps.get(u, 0.0) / pr.result.n[u] for u in mine})


def routed_rps(pr: PlanResult, model: str) -> dict[str, float]:
    """Each of ``model``'s units' req/s in the plan's routing (at its peak, under a demand profile)."""
    rps: dict[str, float] = {}
    for (uid, m, _cls), r in pr.result.flow.items():
        if m == model:
            rps[uid] = rps.get(uid, 0.0) + float(r)
    return rps


def padding_order(units, ratio: dict[str, tuple[bool, float, float]], per_replica: dict[str, float]) -> list[str]:
    """``units`` in the order a model's capacity is added back (here, and to a demand profile's
    off-peak fleets: hetinfra.plan.levels), on the last judgements (``ratio``, per unit:
    :func:`unit_ratios`): an unstable unit (its queue fails its model whatever the others do), then the
    unit holding the most of its model's requests outside the bounds (a percentile over the model's
    requests is met by relieving where its misses are: padded by its own worst ratio, a 2 x
    A100-80GB unit carrying 1.5% of a 70B model's requests got the replica while the H100 unit that
    held the misses stayed, and the plan missed 2 of 10 audit seeds), then the worst ratio, then the
    most req/s per replica (``per_replica``), then by id (the same order on every run)."""
    def first(u: str) -> tuple:
        unstable, missed, worst = ratio.get(u, (False, 0.0, 0.0))
        return not unstable, -missed, -worst, -per_replica.get(u, 0.0), u

    return sorted(units, key=first)


def with_replica(pr: PlanResult, uid: str) -> PlanResult:
    """``pr`` with one replica more of unit ``uid``, its flows unchanged (the replicas share them); a
    demand profile's levels that ran the unit's peak count run one more too."""
    res = pr.result
    peak = res.n[uid]
    levels = [{**lv, "counts": {u: (c + 1 if u == uid and c == peak else c) for u, c in lv["counts"].items()}}
              for lv in res.periods]
    return replace(pr, result=replace(res, n={**res.n, uid: peak + 1}, periods=levels))


def _merged(conf: dict, part: dict) -> dict:
    """The confirmation ``conf`` with the models ``part`` judged (on other seeds) replaced by that
    judgement; ``seeds``: every seed a model's entry rests on."""
    judged = {m["model"]: m for m in part["models"]}
    models = [judged.get(m["model"], m) for m in conf["models"]]
    units = [u for u in conf.get("units") or () if u.get("model") not in judged] + list(part.get("units") or ())
    return {**conf, "met": all(m["met"] for m in models), "models": models, "units": units, "seeds": seeds_union(models)}


def net_of_trim(padded: list[dict], before: dict[str, int], after: dict[str, int]) -> list[dict]:
    """The padding's records (plan.json ``confirmation.padded[]``) once a trim took counts ``before``
    to ``after``: each unit's ``replicas_added`` is what the final plan still has over its count
    before the padding (never below 0), so the record never claims a replica the trim removed."""
    out = []
    for record in padded:
        by_unit = {u: n - max(0, before.get(u, 0) - after.get(u, 0)) for u, n in record["replicas_by_unit"].items()}
        by_unit = {u: n for u, n in by_unit.items() if n > 0}
        kept = {**record, "replicas_by_unit": by_unit, "replicas_added": sum(by_unit.values())}
        if by_unit != record["replicas_by_unit"]:  # the trim handed flows on: a relief's req/s no longer stand
            kept.pop("relieved", None)
        out.append(kept)
    return out
