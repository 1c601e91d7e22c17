"""The all-adapters plan as a candidate of every placed one (issue 38): a placed plan never costs more
than holding every adapter on every replica.

Holding all of a base's adapters on each replica (``planning.adapter_placement: everywhere``) is one
feasible placement: the placed pool offers the same tier (the slot tier at the highest slot rank that
holds them all, :func:`hetinfra.plan.adapters.rank_tiers`). At the starting factors the solver sees
that, so the first round never costs more. Verification then learns each regime's factor from the
plan it simulated, and a placed plan's small units (a few instances behind each hot adapter: a small
pool's p99 tail) can miss where one pool of all-adapter replicas meets at the starting factor; the
rounds that follow find a dearer plan (lora-50: 17 L40S placed against 16 holding all 50; 10 adapters at
20 req/s: 9 against 8).
So where the placed plan's verified cost exceeds what the everywhere plan costs at the
starting factors, or the placed plan misses, the everywhere pool is verified too (its own rounds,
trim and confirmation: what ``adapter_placement: everywhere`` plans) and the cheaper plan that meets
is kept. Where the everywhere plan starts at or above the placed plan's cost it is not tried: its
rounds only derate a plan that misses, and credit one that meets by the confirmation interval's
top, which the placed plan's rounds credit alike.

What was compared goes into plan.json ``adapter_candidates`` (hetinfra.document.adapters.AdapterCandidates):
each candidate, whether it was verified, its costs, which was kept and why.

Keying each slot tier's derate apart in the rounds (so the small tiers' misses leave the all-adapters
tier at its factor) was tried first: the solver then picks whichever tier still has the higher
factor, one round after another, and lora-50-ranks missed after six rounds (27 GPUs in two with one
factor per GPU layout). A candidate verified on its own keeps the rounds as they are.
"""

from __future__ import annotations

from typing import Callable

from hetinfra.spec.adapters import slot_rank

__all__ = ["candidates_summary", "cheaper_of", "everywhere_units"]


def everywhere_units(spec, units: list) -> list | None:
    """``units`` without the LoRA tiers that cannot hold all of their base's adapters (the pool
    ``adapter_placement: everywhere`` plans); None for a spec without adapters, one planned
    everywhere already, or a pool with nothing to leave out."""
    if not spec.adapters or spec.planning.adapter_placement != "placed":
        return None
    need: dict[str, tuple[int, int]] = {}  # base -> (its adapters, their highest slot rank)
    for a in spec.adapters:
        n, r = need.get(a.base, (0, 0))
        need[a.base] = n + 1, max(r, slot_rank(a.rank))
    kept = [u for u in units if u.template.lora is None
            or (u.template.lora.slots >= need[u.model][0] and u.template.lora.rank >= need[u.model][1])]
    return kept if len(kept) < len(units) else None


def cheaper_of(placed, spec, units: list, start_derate: dict, verify_over: Callable, solve_over: Callable):
    """(the verification outcome to keep, plan.json ``adapter_candidates`` or None): ``placed``
    (hetinfra.plan.verify.Verification), or the everywhere pool's, verified by ``verify_over(units)``
    where it may be cheaper (see the module docstring). ``solve_over(units, derate)``: the pool's plan
    at ``start_derate`` (the starting factors), whose cost decides whether the everywhere pool is
    verified at all. The record says which candidates were verified, their costs, which was kept and
    why; None where there is no other candidate (no adapters, or planned everywhere already)."""
    from hetinfra.errors import InfeasibleError

    pool = everywhere_units(spec, units)
    if pool is None:
        return placed, None
    cost = _cost(placed)
    try:
        start = solve_over(pool, start_derate)
    except InfeasibleError:
        return placed, _record(placed, None, None, "placed", "every adapter on every replica has no plan at the "
                                                              "starting factors (no slot tier holds them all)")
    first = start.result.cost(start.problem)
    if placed.met and first >= cost - 1e-9:
        # the figures are the record's (and the summary's line beside it): the reason says only why
        return placed, _record(placed, None, first, "placed", "every adapter on every replica costs no less before "
                                                              "verification than the placed plan verified, so it was "
                                                              "not verified")
    try:
        other = verify_over(pool, start)
    except InfeasibleError:
        return placed, _record(placed, None, first, "placed", "every adapter on every replica found no plan in "
                                                              "verification")
    if other.met and (not placed.met or _cost(other) < cost - 1e-9):
        why = "the placed plan missed its objectives" if not placed.met else \
            f"it meets at ${_cost(other):.2f}/h, below the placed plan's ${cost:.2f}/h"
        return other, _record(placed, other, first, "everywhere", why)
    why = "every adapter on every replica missed its objectives" if not other.met else \
        f"it meets at ${cost:.2f}/h, not above every adapter on every replica's ${_cost(other):.2f}/h"
    return placed, _record(placed, other, first, "placed", why if placed.met else
                           "neither met its objectives; the placed plan is kept (its misses are reported)")


def _candidate(name: str, outcome, starting: float | None) -> dict:
    """One ``adapter_candidates.placements`` entry (hetinfra.document.adapters.AdapterCandidate)."""
    out = {"name": name, "verified": outcome is not None, "starting_cost_usd_per_hour":
           None if starting is None else round(starting, 4)}
    if outcome is not None:
        pr = outcome.pr
        out.update(met=bool(outcome.met), cost_usd_per_hour=round(_cost(outcome), 4),
                   gpus=sum(pr.units[u].gpus * c for u, c in pr.result.n.items()))
    return out


def _record(placed, other, starting: float | None, kept: str, reason: str) -> dict:
    return {"placements": [_candidate("placed", placed, None), _candidate("everywhere", other, starting)],
            "kept": kept, "reason": f"{kept}: {reason}"}


def _cost(outcome) -> float:
    return outcome.pr.result.cost(outcome.pr.problem)


def candidates_summary(doc) -> list[str]:
    """The summary's line on the adapter placements compared (plan.json ``adapter_candidates``)."""
    rec = getattr(doc, "adapter_candidates", None)
    if rec is None:
        return []
    parts = []
    for c in rec.placements:
        if c.verified:
            parts.append(f"{c.name} {'met' if c.met else 'missed'} at ${float(c.cost_usd_per_hour):.2f}/h ({c.gpus} GPUs)")
        elif c.starting_cost_usd_per_hour is not None:
            parts.append(f"{c.name} not verified (${float(c.starting_cost_usd_per_hour):.2f}/h before verification)")
        else:
            parts.append(f"{c.name} not verified")
    return [f"adapter placements compared: {'; '.join(parts)}; kept {rec.reason}"]
