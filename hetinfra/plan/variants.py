"""A model's variants in the plan: the accuracy floor, and no accuracy given up for nothing.

The floor (``slo.min_accuracy``) holds per request: a variant scoring below it gets no template, so
no request is ever served by it (``PlannedModel.checkpoints``). Among the variants that meet it the
allocation ILP picks by cost alone, unit by unit. Where several plans cost the same (two variants
need the same instances), the solver could pick a less accurate one for nothing; so after the
solve, :func:`raise_floors` tries each model's floor raised to the score of each more accurate
variant in use (best first) and keeps the first plan that costs no more: the plan serves the most
accurate set of variants its cost allows, never a dearer plan.
"""

from __future__ import annotations

from typing import Callable

from hetinfra.errors import InfeasibleError, InvalidInputError
from hetinfra.plan.inputs import PlanInputs

#: relative tolerance when comparing a re-solve's objective with the plan's
TOL = 1e-9


def below_floor(pm) -> str:
    """Which variants the accuracy floor left out, for messages about what the others cannot do."""
    out = [f"{v.name} ({v.accuracy:g})" for v in pm.variants if not v.eligible]
    return f"; variants below slo.min_accuracy {pm.spec.slo.min_accuracy:g} not planned: {', '.join(out)}" if out else ""


def check_accuracy_floor(inputs: PlanInputs) -> None:
    """A model whose every variant scores below its ``slo.min_accuracy`` has no plan (exit 3)."""
    for pm in inputs.models:
        if pm.variants and not any(v.eligible for v in pm.variants):
            best = max(pm.variants, key=lambda v: v.accuracy)
            floor = pm.spec.slo.min_accuracy
            raise InfeasibleError(
                f"model {pm.spec.name}: no variant meets slo.min_accuracy {floor:g}: the most accurate is "
                f"{best.name} at {best.accuracy:g}",
                hint=f"lower slo.min_accuracy to at most {best.accuracy:g}, or add a variant scoring at least {floor:g}",
                details={"relax": [{"min_accuracy": {"model": pm.spec.name, "current": floor,
                                                     "best": best.accuracy}}]})


def raise_floors(inputs: PlanInputs, pool: list, solved: tuple, solve_pool: Callable[[list], tuple]) -> tuple:
    """``solved`` = (units, problem, result) of ``pool``; per model with several variants meeting its
    floor, re-solve with the floor raised to each more accurate variant's score than the least
    accurate one the plan uses (most accurate first), and keep the first re-solve that is no worse
    (min_cost: objective; max_throughput: demand scale, then cost). ``solve_pool(units)`` prunes
    and solves a unit pool like the plan's own solve. A min_cost trial whose LP relaxation already
    costs more than the plan is not solved further (``solver.cutoff``): it could not be kept."""
    from hetinfra.solver.cutoff import beating

    units, problem, result = solved
    for pm in inputs.models:
        scores = sorted({v.accuracy for v in pm.variants if v.eligible}, reverse=True)
        if len(scores) < 2:
            continue
        name = pm.spec.name
        by_id = {u.id: u for u in units}
        used = [by_id[u].template.accuracy for u, n in result.n.items() if n > 0 and by_id[u].model == name]
        if not used:
            continue
        for floor in (a for a in scores if a > min(used)):
            trial = [u for u in pool if u.model != name or (u.template.accuracy or 0.0) >= floor]
            try:
                with beating(_most_kept(problem, result)):
                    cand = solve_pool(trial)
            except (InfeasibleError, InvalidInputError):  # e.g. locality: those variants miss a region
                continue
            if cand[2].feasible and _no_worse(cand[1], cand[2], problem, result):
                units, problem, result = cand
                pool = trial
                break
    return units, problem, result


def _most_kept(p_old, r_old) -> float | None:
    """The highest objective a trial may reach and still be kept (:func:`_no_worse`); None where the
    comparison is not on the objective alone (max_throughput: the demand scale first)."""
    from hetinfra.solver.rows import network_tie_most

    if p_old.objective != "min_cost" or r_old.objective is None:
        return None
    # a trial of equal cost whose clients travel further (the objective's routing tie-break) is kept too
    return r_old.objective + TOL * max(1.0, abs(r_old.objective)) + network_tie_most(p_old)


def _no_worse(p_new, r_new, p_old, r_old) -> bool:
    if p_old.objective == "max_throughput":
        s_new, s_old = r_new.scale or 0.0, r_old.scale or 0.0
        return s_new >= s_old * (1 - TOL) and r_new.cost(p_new) <= r_old.cost(p_old) * (1 + TOL) + TOL
    return r_new.objective <= _most_kept(p_old, r_old)
