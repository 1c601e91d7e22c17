"""The vetoed plan, padded: an alternative to the search the confirmation sent back
(docs/verification.md, "A vetoed plan, padded").

When the confirmation on fresh seeds misses a plan its search met (a veto, hetinfra.plan.verify), the
search resumes its rounds with the missed models' regimes derated. Those rounds can end far from the
plan they left: held-out h136 (one model, p90 at the edge of a 100k-token mixture) was vetoed at a
mixed L40S + H100 fleet, and its resumed rounds, on seeds of their own, met only on L40S fleets of
$79-80/h (padded to $83.75/h), while the vetoed fleet with one or two more replicas meets on fresh seeds.

So, at each veto, before the search resumes, the vetoed plan is padded as a plan is after the last
veto (hetinfra.plan.pad: one replica at a time to the unit that misses most, within the spec's rules,
each padded plan judged on FRESH confirm seeds no decision saw). Where every model it missed then
meets there, and the search's seeds still meet it, and the next fresh block of confirm seeds meets it
again (the padding stopped on the block that met: those seeds chose its replicas), it is kept as the
alternative. Verification ends
on the cheaper of the alternative and the plan the resumed search confirms (or pads): both are held to
the same standard, a confirmation on seeds no decision saw, so taking the cheaper of two confirmed
plans keeps no plan that only its own sample passed. Seeds are never reused: each padding step, and
the resumed search's confirmation, take blocks of their own (``Replicated.fresh``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetinfra.plan.planner import PlanResult
from hetinfra.plan.rounds import simulation_view

__all__ = ["Alternative", "padded_alternative", "keep_cheaper", "ALTERNATIVE_CUT"]

#: what the work budget names when it stops the padding of a vetoed plan (plan.json work_budget.stopped)
ALTERNATIVE_CUT = "the padding of a vetoed plan (the resumed search's plan stands)"


@dataclass
class Alternative:
    """A vetoed plan padded until the confirmation met it on fresh seeds."""
    #: which veto (1-based, Verification.vetoes) sent the search back from it
    veto: int
    pr: PlanResult
    #: its judgement on the search's seeds, and on the fresh confirm seeds of the padding
    sim: dict
    confirmation: dict
    #: hetinfra.plan.pad's records, each with ``after_veto``
    padded: list[dict]
    #: the vetoed plan's trim: its removals, the removals put back, its last pass, its rounds by model
    trimmed: list[dict]
    put_back: list[dict]
    last_pass: list[dict]
    round_by_model: dict[str, int]
    cost: float


def padded_alternative(out, decide, confirm, best: Alternative | None) -> Alternative | None:
    """``best``, or the plan ``out`` holds (the one the confirmation just vetoed: its judgement
    ``out.confirmation``) padded where that meets on fresh confirm seeds and on the search's and costs
    less than ``best``. Recorded on the veto (``out.vetoes[-1]``): ``padded_usd_per_hour`` where it met."""
    from hetinfra.plan.budget import current
    from hetinfra.plan.pad import padded

    if best is not None and out.pr.result.cost(out.pr.problem) >= best.cost - 1e-9:
        return best  # padding only adds replicas: nothing cheaper than ``best`` can come of it
    if not current().check(ALTERNATIVE_CUT):
        return best
    pr, conf, records = padded(out.pr, out.confirmation, confirm, decide)
    if not conf.get("met") or not all(r["met"] for r in records):
        return best
    sim = decide(simulation_view(pr))
    cost = pr.result.cost(pr.problem)
    if not sim["met"] or (best is not None and best.cost <= cost + 1e-9):
        return best
    conf = _confirmed_again(pr, conf, records, confirm)
    if conf is None:
        return best
    out.vetoes[-1]["padded_usd_per_hour"] = round(cost, 4)
    veto = len(out.vetoes)
    return Alternative(veto, pr, sim, conf, [{**r, "after_veto": veto} for r in records], list(out.trimmed),
                       list(out.put_back), list(decide.last_pass), dict(out.round_by_model), cost)


def _confirmed_again(pr: PlanResult, conf: dict, records: list[dict], confirm) -> dict | None:
    """``conf`` with the padded models judged once more on their next block of confirm seeds, or None
    where that misses. The padding stopped on the block that met, so its last judgement is the one the
    replicas were chosen on; the alternative is a candidate of its own beside the resumed search's plan,
    and keeping the cheaper of two on the samples that chose them keeps the lucky one (held-out h105b, an
    attainment of 0.99 at its edge: a padding step met on its block, and 5x the requests missed by 0.1%)."""
    from hetinfra.plan.confirm import sized_confirmation
    from hetinfra.plan.pad import merged
    from hetinfra.plan.parts import reduced

    models = sorted({r["model"] for r in records})
    confirm.fresh(models)
    again = sized_confirmation(confirm, reduced(simulation_view(pr), set(models)))
    if not again["met"]:
        return None
    seeds = {m["model"]: list(m.get("seeds") or ()) for m in again["models"]}
    for r in records:
        r["seeds"] = seeds.get(r["model"], r["seeds"])
    return merged(conf, again)


def keep_cheaper(out, alt: Alternative | None) -> None:
    """``out`` (verification after its last veto, padding included) becomes ``alt`` where ``alt`` costs
    less, or ``out`` still misses (on either judge): the veto it came from is marked ``kept``."""
    if alt is None:
        return
    met = out.sim["met"] and out.confirmation.get("met", False)
    if met and out.pr.result.cost(out.pr.problem) <= alt.cost + 1e-9:
        return
    out.pr, out.sim, out.confirmation, out.padded = alt.pr, alt.sim, alt.confirmation, alt.padded
    out.trimmed, out.put_back, out.round_by_model = alt.trimmed, alt.put_back, alt.round_by_model
    out.last_pass = alt.last_pass
    out.vetoes[alt.veto - 1]["kept"] = True
