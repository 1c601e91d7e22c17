"""Why a plan is infeasible, and what to relax: the budget, which availability caps (and by how
much), locality or the spot fractions (the solve stage, ``hetinfra.plan.planner.solve_units``,
raises what :func:`diagnose` returns)."""

from __future__ import annotations

from hetinfra.errors import InfeasibleError
from hetinfra.solver import clock
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

#: what the diagnosis says where the clock stopped a re-solve before it answered and nothing else was
#: found: "no plan satisfies all constraints together" would be a guess, not a finding
CUT = ("no plan satisfies all constraints together as far as the diagnosis could tell: the time limit "
       "(planning.time_limit_s) stopped its re-solves before they found which constraint to relax")


class _Resolves:
    """The diagnosis's re-solves, each within what is left to one ``deadline`` (``solver.clock``), and
    whether the clock stopped any before it answered (``cut``)."""

    def __init__(self, time_limit_s: float, mip_gap: float):
        self.deadline, self.mip_gap, self.cut = clock.now() + time_limit_s, mip_gap, False

    def __call__(self, problem: AllocationProblem) -> SolveResult:
        from hetinfra.solver.solve import solve

        r = solve(problem, time_limit_s=clock.remaining(self.deadline), mip_gap=self.mip_gap)
        self.cut |= r.safety_stop or r.status == "no_solution"
        return r


def diagnose(problem: AllocationProblem, time_limit_s: float, mip_gap: float) -> InfeasibleError:
    """Name what to relax: the budget, or which availability caps (and by how much). ``time_limit_s``
    bounds all the re-solves together: each gets what the ones before it left (``solver.clock``); where
    that stopped one before it answered and nothing was found, the error says so (:data:`CUT`)."""
    solve = _Resolves(time_limit_s, mip_gap)
    no_budget = problem.replace(budget=None, objective="min_cost")
    r = solve(no_budget)
    if r.feasible:
        cost = r.cost(no_budget)
        return InfeasibleError(
            f"budget ${problem.budget:g}/h is below the cheapest feasible plan, ${cost:.2f}/h",
            hint=f"raise budget_usd_per_hour to at least {cost:.2f}, lower demand, or loosen the SLOs",
            details={"relax": [{"budget_usd_per_hour": {"current": problem.budget, "needed": round(cost, 4)}}]})
    elastic = solve(no_budget.replace(elastic_caps=True))
    if not elastic.feasible or not elastic.extra_gpus:  # caps are not the cause, or not the only one
        return _diagnose_other(no_budget, solve)
    relax, parts = [], []
    for (cloud, region, gpu), extra in sorted(elastic.extra_gpus.items()):
        cap = problem.caps[(cloud, region, gpu)]
        need = cap + int(round(extra + 0.4999))
        relax.append({"availability": {"cloud": cloud, "region": region, "gpu": gpu, "max_gpus": cap, "needed": need}})
        parts.append(f"{cloud}/{region} {gpu}: cap {cap} GPUs, needs {need}")
    local = _locality_binds(no_budget, solve)
    msg = ("availability caps are too small to serve the demand"
           + (f" at planning.locality {problem.locality:g}" if local else "") + ": " + "; ".join(parts))
    if problem.budget is not None and elastic.feasible:
        cost = elastic.cost(no_budget)
        if cost > problem.budget:
            msg += f"; and the budget ${problem.budget:g}/h is below that plan's ${cost:.2f}/h"
    if local:
        relax.append({"locality": {"current": problem.locality}})
    hint = ("raise those caps, lower planning.locality (at 0 these caps suffice), or allow more regions, clouds or "
            "GPU types") if local else "raise those caps, or allow more regions, clouds or GPU types"
    return InfeasibleError(msg, hint=hint, details={"relax": relax})


def _locality_binds(problem: AllocationProblem, solve: _Resolves) -> bool:
    """Whether ``problem`` (caps too small) has a plan within its caps once planning.locality is 0: then the
    locality, which keeps each origin region's demand on that region's capped GPUs, is as much the cause
    as the caps. Held-out h74x (benchmarks/results/promise_stop62.txt): three models sharing capped GPUs
    in us-east-1 at locality 0.8 were told only to raise the caps, though locality 0 plans within them."""
    return problem.locality > 0 and solve(problem.replace(locality=0.0)).feasible


def _diagnose_other(problem: AllocationProblem, solve: _Resolves) -> InfeasibleError:
    """Caps and budget are not the cause: try dropping locality, then the spot fractions (``solve``:
    the diagnosis's re-solves)."""

    def feasible(relaxed: AllocationProblem) -> bool:
        return solve(relaxed).feasible

    if problem.locality > 0 and feasible(problem.replace(locality=0.0)):
        return InfeasibleError(
            f"planning.locality {problem.locality:g} cannot be met: some origin region lacks capacity for its local demand",
            hint="lower planning.locality, allow more GPUs in those regions, or raise their availability caps",
            details={"relax": [{"locality": {"current": problem.locality}}]})
    limited = {m: f for m, f in problem.max_spot_fraction.items() if f < 1}
    if limited and feasible(problem.replace(max_spot_fraction={})):
        names = ", ".join(f"{m} ({f:.0%})" for m, f in sorted(limited.items()))
        return InfeasibleError(f"max_spot_fraction cannot be met for {names}: not enough on-demand capacity",
                               hint="raise max_spot_fraction or the on-demand availability caps",
                               details={"relax": [{"max_spot_fraction": limited}]})
    if solve.cut:
        return InfeasibleError(CUT, hint="raise planning.time_limit_s to learn what to relax, or relax the "
                                         "availability caps, budget, locality or spot fractions")
    return InfeasibleError("no plan satisfies all constraints together",
                           hint="relax the availability caps, budget, locality or spot fractions")
