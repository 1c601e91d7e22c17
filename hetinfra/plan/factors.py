"""Verification's factor rules (docs/verification.md, "Derate where the miss is, credit where there is
slack"): from a round's judgement, each regime's factor for the next round. ``hetinfra.plan.rounds``
runs the rounds that read them (and re-exports them: its callers and tests name them there)."""

from __future__ import annotations

import math

from hetinfra.plan.floors import Floors

__all__ = ["BRACKET", "CREDIT_BELOW", "CREDIT_STEP", "FACTOR_MAX", "FACTOR_MIN", "MIN_CREDIT", "next_factors"]

#: bounds of one round's derating factor: never more than halve a template's rated capacity at once,
#: and always take at least 8% off a template that misses (so a near miss converges in a few rounds)
FACTOR_MIN, FACTOR_MAX = 0.5, 0.92
#: stop refining a template's factor once the bracket [met, missed] is narrower than 25%
BRACKET = 1.25
#: credit a template whose units' worst ratio is under this, by at most CREDIT_STEP per round
CREDIT_BELOW, CREDIT_STEP = 0.8, 1.25
#: a credit smaller than this (its regime is that close to the top of its confidence interval: a
#: measured template's interval is +-5%) is not taken: it costs a re-solve and a simulation for at
#: most that much capacity, which the trim takes back where it is a whole replica. On Mélange V1
#: the +5% credits took two rounds and ended on a dearer plan ($29.42/h against $29.09/h)
MIN_CREDIT = 1.1

def next_factors(sim: dict, doc: dict, g: dict[str, float], ok: dict[str, float], bad: dict[str, float],
                 ceiling: dict[str, float], regimes: dict[str, tuple[str, str]], rise: bool = True,
                 floors: Floors | None = None) -> dict[str, float]:
    """Each regime's factor for the next round (see the module docstring); records the factors at
    which regimes met (``ok``) and missed (``bad``). ``regimes``: template id -> (regime, model).
    ``rise`` False (the rounds settle): no factor rises, by credit or by refining a bracket.
    A model that missed also derates its regimes never simulated yet, by its worst step: what
    its traffic does to one layout (queueing at a percentile, bursts, the spread inside a bucket) it
    does to the untried ones, which would otherwise be picked next, as optimistic. Not a layout at its latency
    floor (``floors``: hetinfra.plan.floors): its miss is its own, and where one is found the model's untried
    layouts go back to their starting factors."""
    model_met = {m["model"]: m["met"] for m in sim["models"]}
    unit_regime = _unit_regimes(doc, regimes)
    missed_units = {unit_regime[u["unit"]][1] for u in sim["units"] if u["unit"] in unit_regime
                    and u.get("count") and not u["objective"]["met"]}
    worst, model_of = _worst_by_regime(sim, unit_regime)
    out = dict(g)
    step: dict[tuple[str, bool], float] = {}  # (model, bundle?) -> its worst derating step this round
    floored_now: set[tuple[str, bool]] = set()  # (model, bundle?) of a layout found at its floor this round
    for r, ratio in sorted(worst.items()):
        model, f = model_of[r], g.get(r, 1.0)
        if not model_met.get(model, True) and (ratio > 1.0 or model not in missed_units):
            bad[r] = min(bad.get(r, math.inf), f)
            if ok.get(r, 0.0) >= f:  # it met at this factor in another plan: that no longer vouches for it
                del ok[r]
        else:
            ok[r] = max(ok.get(r, 0.0), f)
        out[r] = _factor(r, f, ratio, ok, bad, ceiling.get(r, 1.0))
        if not rise:
            out[r] = min(out[r], f)
        kind = (model, "|pd" in r)  # a bundle's regime learns from bundles, a colocated one from colocated
        missed = r in bad and r not in ok
        if floors is not None and floors.judged(r, f, ratio, missed and ratio > 1.0):
            floored_now.add(kind)
        if missed and (floors is None or r not in floors.floored):
            step[kind] = min(step.get(kind, 1.0), out[r] / f)
    for r, model in sorted({v for v in regimes.values()}):
        kind = (model, "|pd" in r)  # the split removes the interference a colocated miss shows
        if r in ok or r in bad:
            continue
        if kind in step:
            out[r] = g.get(r, 1.0) * step[kind]
        elif kind in floored_now:  # derated only by the floored layout's misses: back to where it started
            out[r] = max(g.get(r, 1.0), floors.initial.get(r, 1.0))
    return out


def _factor(r: str, f: float, ratio: float, ok: dict[str, float], bad: dict[str, float], ceiling: float) -> float:
    if r in bad and r not in ok:
        step = FACTOR_MAX if not math.isfinite(ratio) or ratio <= 1 else 1.0 / ratio
        return f * min(max(step, FACTOR_MIN), FACTOR_MAX)
    if r in bad:
        return math.sqrt(ok[r] * bad[r]) if bad[r] / ok[r] >= BRACKET else ok[r]
    if ratio < CREDIT_BELOW and f < ceiling:
        up = min(f * min(1.0 / max(ratio, 1e-9), CREDIT_STEP), ceiling)
        return up if up >= f * MIN_CREDIT else f
    return f


def _unit_regimes(doc: dict, regimes: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Unit -> (regime, model) of ``doc``'s allocations."""
    return {a["unit"]: regimes[a["template"]] for a in doc["allocations"] if a["template"] in regimes}


def _worst_by_regime(sim: dict, unit_regime: dict[str, tuple[str, str]]) -> tuple[dict[str, float], dict[str, str]]:
    """(regime -> the worst objective ratio of its simulated units, inf where one has none; regime -> its model)."""
    worst: dict[str, float] = {}
    model_of: dict[str, str] = {}
    for u in sim["units"]:
        if u["unit"] in unit_regime and u.get("count"):
            r, model = unit_regime[u["unit"]]
            ratio = u["objective"].get("ratio")
            worst[r] = max(worst.get(r, 0.0), math.inf if ratio is None else ratio)
            model_of[r] = model
    return worst, model_of


def record_slack(sim: dict, doc: dict, g: dict[str, float], regimes: dict[str, tuple[str, str]],
                 slack: dict[str, tuple[float, float]]) -> None:
    """Keep in ``slack`` each regime's latest evidence of room: (its factor, its units' worst ratio) from a
    round in which its model met and the ratio was under CREDIT_BELOW; a regime simulated otherwise loses
    its entry (the newer judgement speaks for it). Read by :func:`displaced_credit`."""
    model_met = {m["model"]: m["met"] for m in sim["models"]}
    worst, model_of = _worst_by_regime(sim, _unit_regimes(doc, regimes))
    for r, ratio in worst.items():
        if ratio < CREDIT_BELOW and model_met.get(model_of[r], True):
            slack[r] = (g.get(r, 1.0), ratio)
        else:
            slack.pop(r, None)


def displaced_credit(doc: dict, g: dict[str, float], bad: dict[str, float], ceiling, regimes: dict[str, tuple[str, str]],
                     slack: dict[str, tuple[float, float]]) -> dict[str, float]:
    """The factors once the rounds' own rules change none (:func:`next_factors` returned ``g``): each regime
    with room (``slack``, :func:`record_slack`) that the current plan does not use and that never missed
    takes one more credit step (CREDIT_STEP, at most its factor over its ratio then, and its ceiling).
    Credit is otherwise given only to regimes in the plan, so a layout that met far inside its objective
    at a low factor, credited once and then displaced by a cheaper one, was never tried again: held-out
    h108 (8B RAG, p50) kept 8 H100s on TP1 at $87.83/h, its TP2 regime met at a ratio of 0.27 at a factor
    of 0.5 and stayed at 0.625, while 6 H100s on TP2 meet at $65.87/h. The cheapest met round is kept,
    so a credited plan that misses costs a round, never the plan."""
    used = {regimes[a["template"]][0] for a in doc["allocations"] if a["template"] in regimes}
    out = dict(g)
    for r, (f0, ratio) in sorted(slack.items()):
        if r in used or r in bad:
            continue
        f = g.get(r, 1.0)
        up = min(f * CREDIT_STEP, f0 / max(ratio, 1e-9), ceiling.get(r, 1.0))
        if up >= f * MIN_CREDIT:
            out[r] = up
    return out
