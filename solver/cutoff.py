"""A solve that is of use only below a known objective: skipped when its LP relaxation already costs more.

``hetinfra.plan.variants.raise_floors`` re-solves a plan with a model's accuracy floor raised and keeps
the re-solve only if it costs no more than the plan it has. Such a trial often cannot: the committed
example's trial (bf16 only, where the plan serves fp8) has an LP bound of $4.15/h against the plan's
$2.40/h, yet its MIP ran 387 nodes (3.1 s) to prove an optimum that was then thrown away. Inside
:func:`beating`, :func:`hetinfra.solver.solve.solve` first solves the problem's LP relaxation (the same
rows, ``solver.direct``) and answers ``status="cut_off"`` (not feasible: nothing to keep) where that
bound exceeds the objective by more than a margin far above the LP's tolerances. Every integer plan of
the problem costs at least its LP optimum, so what the full solve would have found costs more than the
objective too (whatever stopped it: node limit, gap, clock), and the caller would have dropped it: the
plan is the same, without the MIP.

Only min_cost objectives (max_throughput compares the demand scale first). A context variable, so the
caller's code path (the planner's own solve function) is untouched and nothing outside the ``with``
block sees a cutoff."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from hetinfra.solver.problem import AllocationProblem

#: the objective a solve must not exceed to be of use (None: every solve runs in full)
_CUTOFF: ContextVar[float | None] = ContextVar("hetinfra_solver_cutoff", default=None)
#: how far (relative, at least 1e-6 absolute) the LP bound must exceed the cutoff: HiGHS's LP
#: tolerances are 1e-7, so a bound this far above is above for every solution of the MIP too
MARGIN = 1e-6

__all__ = ["MARGIN", "beating", "cut_off"]


@contextmanager
def beating(objective: float | None) -> Iterator[None]:
    """Solves inside are of use only at an objective <= ``objective`` (None: no cutoff)."""
    token = _CUTOFF.set(objective)
    try:
        yield
    finally:
        _CUTOFF.reset(token)


def cut_off(problem: AllocationProblem, time_limit_s: float) -> bool:
    """Whether ``problem`` (min_cost, no periods: ``solve`` checks the expanded problem) provably
    costs more than the cutoff in force: its LP relaxation solved to optimality above it by MARGIN.
    False where there is no cutoff, the LP is not solved to optimality (infeasible, stopped), or the
    bound is within the margin: the full solve then decides."""
    cutoff = _CUTOFF.get()
    if cutoff is None or problem.objective != "min_cost" or problem.periods:
        return False
    from hetinfra.solver.direct import DirectModel

    dm = DirectModel(problem)
    if dm.trivially_infeasible:
        return False
    lp = dm.relaxation(time_limit_s)
    return lp.status == "optimal" and lp.objective is not None and \
        lp.objective > cutoff + MARGIN * max(1.0, abs(cutoff))
