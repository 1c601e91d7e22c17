"""Whether the fleet that runs still meets a re-plan's demand: the check behind a forced move that
only the new plan's cost says is needed (:func:`hetinfra.replan.diff.decide`).

``decide`` calls a dearer plan forced on the reasoning that the solver, which prefers what runs, moves
to a dearer fleet only when the running one no longer meets the demand. That reasoning fails where the
re-plan's own verification routes the new demand differently from how the fleet runs it: a held-out
re-plan of services/multi-region.yaml with chat-8b at 22 req/s instead of 20 was "forced" from $19.39
to $20.40/h although the running fleet, simulated at the new demand, met on five fresh seeds (worst
ratio 0.74); applied, the next run moved back (stop 59's replan audit, B1). So before a move is forced
on cost alone, the running fleet is simulated at the new plan's demand, with its own routing, at the
load the promise is made at, and judged as ``hetinfra simulate --check --replications`` judges: a
prediction bound over :data:`SEEDS` replications on the confirmation's seeds. Where it meets, nothing is
forced; where it misses, is undecided, or cannot be judged (what runs is not the plan.json in OUT, or
the new demand has a class the running routing does not know), the move stays forced."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

#: replications of the check: four give a Student-t prediction bound of mean + 2.6 sd (a fleet near its
#: edge stays forced, as undecided is not met)
SEEDS = 4


def running_meets(old, new_plan, spec, spec_path: Path, running: list) -> str | None:
    """A line saying the running fleet meets ``new_plan``'s demand and objectives, or None where it
    does not or cannot be judged. ``old``: the running plan (OUT/plan.json; None where OUT has none);
    ``spec``: the spec the new plan was made from (the observed demand's, with --demand-log);
    ``running``: what runs (hetinfra.document.Allocation)."""
    from hetinfra.document.simulation import SimRun
    from hetinfra.errors import HetinfraError
    from hetinfra.plan.verify import verification_load
    from hetinfra.sim.replications import judge, seeds_for, simulate_replications
    from hetinfra.sim.workload import WorkloadConfig

    if old is None or _counts(old.allocations) != _counts(running) or not _routes_every_class(old, new_plan):
        return None  # what runs is not plan.json's fleet, or its routing cannot carry the new demand
    view = old.model_copy(update={"models": new_plan.models, "demand_scale": new_plan.demand_scale})
    fid = new_plan.fidelity
    load = fid.load if fid is not None and fid.load else verification_load(spec)
    settings = spec.planning.verify
    config = WorkloadConfig(requests=(fid.requests if fid is not None and fid.requests else settings.requests),
                            seed=0, load=load, burst_cv=settings.burst_cv)
    seeds = seeds_for(settings.seed, "confirm", SEEDS)
    try:  # the new spec may no longer describe the running units (a variant it dropped): not judged
        sims = simulate_replications(view, spec, spec_path, replace(config, seed=seeds[0]), seeds)
    except HetinfraError:
        return None
    judged = SimRun.of(judge(sims, margin=settings.margin))  # the promise's margin, as verification judges
    if not judged.models or not all(m.met for m in judged.models):
        return None
    within = f", within {1 - settings.margin:g} for planning.verify.margin" if settings.margin else ""
    return (f"the running fleet still meets the new demand (simulated at {load:g}x on {SEEDS} seeds, worst bound "
            f"{max(m.ratio or 0.0 for m in judged.models):.3f} of its objectives{within}): the re-plan's dearer plan "
            "is not needed")


def _counts(allocations) -> dict[str, int]:
    return {a.unit: a.count for a in allocations if a.count > 0}


def _routes_every_class(old, new_plan) -> bool:
    """Whether the running plan routes every class the new demand has requests in (a class it does not
    route would be simulated as unserved, which is no evidence that the fleet serves it), from the same
    origins in the same shares (the running routing by origin is what the simulation replays)."""
    # routed whole: shares that sum below 1 leave the rest unrouted, which the simulation does not run
    routed = {(model, cls) for model, classes in old.routing.items() for cls, shares in classes.items()
              if sum(r.share for r in shares) >= 1 - 1e-5}  # shares are rounded to 1e-6
    by_origin = old.routing_by_origin or {}
    if any(sum(r.share for r in shares) < 1 - 1e-5 for origins in by_origin.values() for classes in origins.values()
           for shares in classes.values()):
        return False
    same_origins = _origin_shares(old) == _origin_shares(new_plan)
    return same_origins and all((m.name, c.name) in routed for m in new_plan.models for c in m.classes
                                if c.rate_rps > 0)


def _origin_shares(plan) -> dict:
    """model -> origin -> (share, residency): where the demand comes from and may go, without what the
    plan's own regions make of it (``worst_network_ms`` differs between two fleets of one demand)."""
    return {m: {o: (round(x.share, 9), x.residency) for o, x in by.items()} for m, by in (plan.origins or {}).items()}
