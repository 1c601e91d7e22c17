"""The confirmation: the final plan judged on fresh seeds that no decision of the search saw
(docs/verification.md, "A search that cannot overfit its check").

Credit, the trim and the sustained-load search decide on the "decide" seeds; each drives the plan to
the edge of what those replications show. The "confirm" seeds (``hetinfra.sim.replications.
seeds_for``) judge the plan the search returns. A removal of the trim is kept only if the
confirmation holds: where a model misses there, its removals are put back, the last removed first,
until it meets (or none is left); then the trim runs once more, taking only removals that meet on
both sets of seeds, so that the final plan is minimal for both: every removal of one replica or of
one unit misses on the decide or on the confirm seeds.

The confirmation runs as long as the plan it confirms needs (``hetinfra.sim.replications.
requests_for`` of THAT plan, measured on its first confirm seed), never only as long as the first
plan of the search needed: a trimmed or derated plan serves its requests slower, so its longest
class passes through fewer times in the same run (a benchmark fleet's kept plan needed 27,000
requests per replication where the first plan's 20,000 were stated). :func:`sized_confirmation`
lengthens the confirmation's runs (never shortens them) and judges again until the plan's need is
met; plan.json ``fidelity.requests`` states the length the final plan was confirmed at."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.plan.plan_json import simulation_view
from hetinfra.plan.planner import PlanResult

__all__ = ["confirmed", "restored", "sized_confirmation", "CONFIRMATION_CUT"]

PUT_BACK_REASON = "the confirmation on fresh seeds missed without it"
#: what the work budget names when it was spent before a confirmation (plan.json work_budget.stopped
#: and fidelity.confirmation.reason): the plan is then not confirmed, never called met
CONFIRMATION_CUT = "the confirmation on fresh seeds (the plan is not confirmed)"


def confirmed(pr: PlanResult, sim: dict, steps: list, decide, confirm) -> tuple:
    """(plan, its decide judgement, its confirmation, the removals put back, the removals kept as
    (removal, plan before it)) for the trimmed plan ``pr`` (``sim``: its decide judgement; ``steps``:
    the trim's removals). ``decide``, ``confirm``: hetinfra.plan.replicated.Replicated judges."""
    from hetinfra.plan.trim import trim

    steps = list(steps)
    view = simulation_view(pr)  # the plan's view, built once per plan (the judges only read it)
    presized(confirm, decide, view)
    conf = budgeted_confirmation(confirm, view)
    put_back: list[dict] = []
    while not conf["met"]:
        missed = {m["model"] for m in conf["models"] if not m["met"]}
        decide.veto(view, missed)  # the search may not take these plans again
        last = {}
        for k, (removal, _before) in enumerate(steps):
            if removal["model"] in missed:
                last[removal["model"]] = k
        if not last:
            break
        for model, k in sorted(last.items(), key=lambda kv: -kv[1]):
            removal, before = steps.pop(k)
            pr = restored(pr, before, model)
            put_back.append({**removal, "reason": PUT_BACK_REASON})
        view = simulation_view(pr)
        conf = budgeted_confirmation(confirm, view)
    if put_back:  # minimal again, for both judges: what is removable now must meet on both seed sets
        pr, sim, steps = trim(pr, decide, confirm, steps)
        conf = budgeted_confirmation(confirm, simulation_view(pr))
    return pr, sim, conf, put_back, steps


def budgeted_confirmation(confirm, view: dict) -> dict:
    """:func:`sized_confirmation` of ``view`` while the plan command's work budget lasts; once it is
    spent, a judgement that confirms nothing: not met, no seeds, no models, and ``reason`` saying why
    (plan.json fidelity.confirmation.reason and a warning). A plan is never called confirmed on a
    confirmation that did not run."""
    from hetinfra.plan.budget import current

    if not current().check(CONFIRMATION_CUT):
        return {"met": False, "seeds": [], "models": [], "units": [], "reason": NOT_CONFIRMED}
    return sized_confirmation(confirm, view)


#: fidelity.confirmation.reason of a confirmation the work budget stopped
NOT_CONFIRMED = ("not confirmed: the work budget (planning.time_limit_s) was spent before the confirmation on "
                 "fresh seeds ran")


def sized_confirmation(confirm, view: dict) -> dict:
    """``confirm``'s judgement of ``view`` at no fewer requests per replication than ``requests_for``
    asks for that plan, measured on its first confirm seed at the length judged (see the module
    docstring): where it asks for more, ``confirm`` runs longer from now on (the need is measured
    again at the new length; it only grows, up to MOST_REQUESTS). The need is measured BEFORE the
    judgement: the judgement's screening seed is that very simulation (the memo serves it), and no
    judgement is run at a length that is then thrown away.

    A model the judgement itself finds under pressure (KV or seats in a later replication than the
    first) is judged again at the plan's longest run, as :func:`wanted` asks of such a model:
    bench_scale.py --mix other --seed 3's o04-llama-2-13b (independent) showed no pressure on its
    first seed, was judged on 13 seeds at its own 20,000 requests, none preempting, and its A10 unit
    preempted in 4 of 10 audit runs at the plan's 96,000 (one a cascade, 3.6x its objective)."""
    from hetinfra.sim.replications import requests_each

    while True:
        need = requests_each(view, confirm.first_replication(view), least=int(confirm.config.requests))
        asked = wanted(confirm, view, need)
        if all(n <= confirm.length(m) for m, n in asked.items()):
            judged = confirm(view)
            asked = wanted(confirm, view, need)  # with the pressure the judgement found
            if all(n <= confirm.length(m) for m, n in asked.items()):
                return judged
        confirm.lengthen(asked)


def wanted(confirm, view: dict, need: dict[str, int]) -> dict[str, int]:
    """Per model, the run its confirmation needs: its own ``need`` (requests_each), and the plan's
    longest for a model under pressure, KV or seats (Replicated.under_pressure). A queue near KV exhaustion
    falls into a preemption cascade at some rate per request, so the run a user's `hetinfra
    simulate` makes (every model at the longest) falls more often than a shorter one: o11-llama-2-7b
    of bench_scale.py --mix other --seed 4, confirmed at its own 36,000 requests, missed on 3 of 10
    audit seeds at 73,000 (and 861x at 5x); at 73,000 its plan gets the replicas it needs. A model
    far from its KV limit keeps its own length (all at the longest made the independent fleet's
    plan 3.1x slower)."""
    longest = max(need.values(), default=0)
    return {m: longest if confirm.under_pressure(view, m) else n for m, n in need.items()}


def presized(confirm, decide, view: dict) -> None:
    """Size ``confirm``'s runs to what ``requests_for`` asks of ``view`` on the search's first seed
    (its judgement of ``view`` ran it: the memo has it), before the confirmation's first run: a
    plan's service times are alike on every seed, so :func:`sized_confirmation` then measures the
    need on its own first seed at that length, and seldom throws a run away (it threw one per model,
    at the first plan's length, whenever the trim or derating had slowed the plan). Shorter or longer
    than the last plan's (Replicated.resize: a plan the search left behind does not size this one);
    the confirmation's own measurement still decides, and only lengthens from there."""
    from hetinfra.plan.budget import current
    from hetinfra.sim.replications import requests_each

    if not current().exhausted():  # a spent budget confirms nothing (budgeted_confirmation)
        need = requests_each(view, decide.first_replication(view), least=int(confirm.config.requests))
        confirm.resize(wanted(confirm, view, need))


def restored(pr: PlanResult, before: PlanResult, model: str) -> PlanResult:
    """``pr`` with ``model``'s units, flows and period counts as in ``before`` (an earlier plan of the
    same problem), every other model's as in ``pr``: models share no unit, so one model's removals
    are put back without touching another's."""
    mine = {u for u, x in pr.units.items() if x.model == model}
    now, then = pr.result, before.result

    def merged(cur: dict, old: dict, is_mine) -> dict:
        return {k: v for k, v in cur.items() if not is_mine(k)} | {k: v for k, v in old.items() if is_mine(k)}

    n = merged(now.n, then.n, lambda u: u in mine)
    flow = merged(now.flow, then.flow, lambda k: k[1] == model)
    origin_flow = merged(now.origin_flow, then.origin_flow, lambda k: k[1] == model)
    periods = [{**lv, "counts": merged(lv["counts"], old["counts"], lambda u: u in mine)}
               for lv, old in zip(now.periods, then.periods)]
    return replace(pr, result=replace(now, n=dict(sorted(n.items())), flow=flow, origin_flow=origin_flow,
                                      periods=periods))
