"""Verification's choice by block: the cheapest verified plan takes each group of linked models from
the cheapest round in which that group met, not every group from one round.

Models that no constraint links (no shared availability cap, committed base or scale-out row, no
budget, the min_cost objective with no priced unmet demand: ``solver.decompose.components``) are
solved as separate blocks, and each model's simulation reads only its own allocations and routing
(``hetinfra.sim.plan_sim``). So a group's plan from round i and another group's from round j
together make a plan that the rounds have already simulated, and its cost is the sum of theirs.
When rounds 4-6 each miss in some model after others were credited, the old rule (one round, all
models met) kept round 3 for every model; this keeps each group's cheapest met round.

The composed plan is solved once more (:func:`compose`) with each template at the factor of the
round its group came from: each per-model block is the same problem as in that round, so the
solver's memo gives the same block back (``solver.memo``). Whatever the solver returns is simulated
again, and the composition is kept only where that simulation meets and it is cheaper."""

from __future__ import annotations

from typing import Callable

from hetinfra.plan.planner import PlanResult

#: a plan's simulation: {"met": bool, "models": [{"model": str, "met": bool, ...}], ...}
Sim = dict


def model_groups(prs: list[PlanResult]) -> list[tuple[str, ...]] | None:
    """The groups of models that no constraint links in any of ``prs``' problems
    (``solver.decompose.components`` of all their units at once: pruning can drop a linking unit in
    one round only); None when everything is one choice: a budget, max_throughput (one demand scale)
    or priced unmet demand link every model."""
    from hetinfra.solver.decompose import components

    first = prs[0].problem
    if first.objective != "min_cost" or first.budget is not None or first.unmet_penalty is not None:
        return None
    units = {u.id: u for pr in prs for u in pr.problem.units}
    every = first.replace(units=tuple(units.values()),
                          tied=tuple(dict.fromkeys(g for pr in prs for g in pr.problem.tied)),
                          nested=tuple(dict.fromkeys(pair for pr in prs for pair in pr.problem.nested)))
    return [tuple(comp) for comp in components(every)]


def group_cost(pr: PlanResult, models: tuple[str, ...]) -> float:
    """$/h of ``models``' share of ``pr`` (``SolveResult.cost`` restricted to their units)."""
    return pr.result.cost(pr.problem, {u.id for u in pr.problem.units if u.model in models})


def choose(rounds: list[tuple[PlanResult, Sim]], groups: list[tuple[str, ...]]) -> list[int] | None:
    """Per group, the index in ``rounds`` of the cheapest round in which all its models met (the
    earliest among equals); None when some group met in no round."""
    out = []
    for g in groups:
        met = [(round(group_cost(pr, g), 9), i) for i, (pr, sim) in enumerate(rounds)
               if all(m["met"] for m in sim["models"] if m["model"] in g)]
        if not met:
            return None
        out.append(min(met)[1])
    return out


def picks_by_group(rounds: list[tuple[PlanResult, Sim]]) -> tuple[list[tuple[str, ...]] | None, list[int] | None]:
    """(the groups of :func:`model_groups` over ``rounds``' plans, each group's cheapest met round by
    :func:`choose`); picks None where the models are one group (or nothing splits them) or some group
    met in no round: then only a round in which every model met can be kept."""
    groups = model_groups([pr for pr, _ in rounds])
    return groups, choose(rounds, groups) if groups and len(groups) > 1 else None


def compose(rounds: list[tuple[PlanResult, Sim]], groups: list[tuple[str, ...]], picks: list[int],
            resolve: Callable[[dict[str, float], dict[str, int]], PlanResult]) -> PlanResult:
    """The plan with each group's templates at the factors of its picked round, solved (through
    verification's ``resolve``) from that round's counts."""
    model_of = {u.template.id: u.model for u in rounds[0][0].all_units}
    derate: dict[str, float] = {}
    start: dict[str, int] = {}
    for models, pick in zip(groups, picks):
        pr = rounds[pick][0]
        derate.update({t: f for t, f in pr.derate.items() if model_of.get(t) in models})
        start.update({u: c for u, c in pr.result.n.items() if pr.units[u].model in models})
    return resolve(derate, start)
