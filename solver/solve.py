"""Solve an :class:`AllocationProblem` with HiGHS and verify the answer before believing it."""

from __future__ import annotations

import math

from hetinfra.errors import SolverError
from hetinfra.solver import clock
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.recheck import verify  # re-exported: solver.solve.verify is its published name
from hetinfra.solver.result import SolveResult, settle_flows

__all__ = ["SolveResult", "greedy_start", "rounded_lp_start", "solve", "solve_pyomo", "verify", "warm_start"]

#: the least a MIP of the Pyomo path gets once its deadline has passed (the starts or an earlier solve
#: spent it): a moment to return its start or a first plan, so that a plan comes out, reported as a
#: safety stop; the direct path prices its first warm start so (``solver.block.START_FLOOR_S``)
MIP_FLOOR_S = 1.0


def _size(m) -> dict:
    from pyomo.environ import Constraint, Var

    variables = [v for v in m.component_data_objects(Var, active=True)]
    return {
        "variables": len(variables),
        "integer_variables": sum(1 for v in variables if v.is_integer() or v.is_binary()),
        "constraints": sum(1 for _ in m.component_data_objects(Constraint, active=True)),
    }


def _run_highs(m, time_limit_s: float, mip_gap: float, warm: bool = False):
    """HiGHS through Pyomo's contrib interface; ``warm``: hand the variables' current values to
    HiGHS as a starting MIP solution (``Highs.setSolution``), which Pyomo's interface has no option
    for. HiGHS checks the point and ignores it if it is infeasible."""
    from pyomo.contrib.solver.common.factory import SolverFactory

    from hetinfra.solver.highs_quiet import FD_CAPTURE, swallow_banner
    from hetinfra.solver.mip_hooks import mip_starting

    swallow_banner()  # Pyomo's interface creates its own Highs objects
    mip_starting()  # (solver.mip_hooks)
    solver = _warm_highs() if warm else SolverFactory("highs")
    # one thread, as the direct path: HiGHS's thread scheduler is process-wide and fixed by the first
    # run, so a default-threaded run here would make every later threads=1 Highs refuse to run
    with FD_CAPTURE:  # Pyomo captures the process's stdout/stderr descriptors: one solve at a time
        # the limit counts from when this run holds the lock, as solver.backends.run_pyomo's: a wait
        # for another thread's solve does not cut this one (the cold re-run gets what is left of it)
        deadline = clock.now() + time_limit_s
        res = solver.solve(m, tee=False, threads=1, time_limit=clock.remaining(deadline), rel_gap=mip_gap,
                           load_solutions=False, raise_exception_on_nonoptimal_result=False)
        if warm and res.incumbent_objective is not None:
            import pyomo.environ as pyo

            from hetinfra.solver.direct import stale

            res.solution_loader.load_vars()
            objective = next(m.component_data_objects(pyo.Objective, active=True))
            if stale(pyo.value(objective), res.incumbent_objective):  # HiGHS returned the start's vector
                return _run_highs(m, clock.remaining(deadline), mip_gap)  # (FD_CAPTURE is re-entrant)
    return res


def _run(m, solver: str, time_limit_s: float, mip_gap: float, warm: bool = False):
    """``m`` solved by ``planning.solver``: HiGHS through Pyomo's contrib interface (``warm``: from
    the variables' values), any other through ``solver.backends`` (cold)."""
    if solver == "highs":
        return _run_highs(m, time_limit_s, mip_gap, warm=warm)
    from hetinfra.solver.backends import run_pyomo

    return run_pyomo(m, solver, time_limit_s, mip_gap)


def _warm_highs():
    import highspy
    from pyomo.contrib.solver.solvers.highs import Highs

    class WarmStartHighs(Highs):
        def _solve(self):
            values = [0.0] * self._solver_model.getNumCol()
            for vid, col in self._pyomo_var_to_solver_var_map.items():
                var = self._vars[vid][0]
                values[col] = float(var.value) if var.value is not None else 0.0
            start = highspy.HighsSolution()
            start.col_value = values
            start.value_valid = True
            self._solver_model.setSolution(start)
            return super()._solve()

    return WarmStartHighs()


def warm_start(m, problem: AllocationProblem, counts: dict[str, int], time_limit_s: float) -> float | None:
    """Load a complete feasible point with instance counts ``counts`` into ``m`` (the routing and
    every other variable from an LP with n fixed); returns its objective, or None (then ``m`` is
    unchanged) when those counts cannot serve the demand within the constraints."""
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.results import SolutionStatus

    for u in m.U:
        m.n[u].fix(int(counts.get(u, 0)))
    try:
        res = _run_highs(m, time_limit_s, 0.0)
        if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
            return None
        res.solution_loader.load_vars()
        return pyo.value(m.obj)
    finally:
        for u in m.U:
            m.n[u].unfix()


def greedy_start(problem: AllocationProblem) -> dict[str, int]:
    """The feasibility-first greedy start (``solver.heuristic``): counts that keep caps, budget,
    locality and spot fractions, improved by local search; {} when it finds none."""
    from hetinfra.solver.heuristic import feasible_start

    found = feasible_start(problem)
    return found[0] if found else {}


def rounded_lp_start(problem: AllocationProblem, time_limit_s: float) -> tuple[dict[str, int], float | None]:
    """The greedy start: the LP relaxation's instance counts rounded up (always enough capacity;
    caps or the budget may reject it), and the LP optimum (a lower bound on the cost)."""
    import math

    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.results import SolutionStatus

    from hetinfra.solver.model import build_model

    m = build_model(problem)
    pyo.TransformationFactory("core.relax_integer_vars").apply_to(m)
    res = _run(m, problem.solver, time_limit_s, 0.0)
    if res.solution_status != SolutionStatus.optimal:
        return {}, None
    res.solution_loader.load_vars()
    counts = {u: math.ceil(pyo.value(m.n[u]) - 1e-6) for u in m.U if pyo.value(m.n[u]) > 1e-6}
    return counts, res.incumbent_objective


def lp_relaxation_bound(problem: AllocationProblem, time_limit_s: float) -> float | None:
    """Optimum of the LP relaxation: a quick bound on the ILP (cost floor, or scale ceiling)."""
    return rounded_lp_start(problem, time_limit_s)[1]


def solve_pyomo(problem: AllocationProblem, *, time_limit_s: float = 30.0, mip_gap: float = 1e-3,
                with_lp_bound: bool = False, warm: bool = True) -> SolveResult:
    """The reference path: the Pyomo model of ``solver.model``, solved whole (no decomposition).

    Build, solve and verify. max_throughput is lexicographic: max s, then the cheapest plan at s.

    min_cost solves start warm: from the running deployment (when it still serves the demand), the
    LP relaxation rounded up, or the greedy single-unit choice per model, whichever is feasible with
    the lowest objective; HiGHS then only has to
    improve on it, and a time-limited solve returns at least that plan.

    ``problem.solver`` (``planning.solver``) other than ``highs`` solves the same model with that
    Pyomo solver (``solver.backends``), cold: the starts are HiGHS's own.

    ``time_limit_s`` bounds the whole call (``solver.clock``): the rounded LP, each warm start, the
    MIP(s) and the LP bound each get what is left of it."""
    deadline = clock.now() + time_limit_s
    if problem.periods:
        from hetinfra.solver.periods import expand, fold

        return fold(problem, solve_pyomo(expand(problem), time_limit_s=clock.remaining(deadline), mip_gap=mip_gap,
                                         with_lp_bound=with_lp_bound, warm=warm))
    if problem.unserved() and not (problem.unmet_penalty is not None and problem.objective == "min_cost"):
        return SolveResult(status="infeasible")
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    m, build_s = _built(problem)
    if m.trivially_infeasible:
        return SolveResult(status="infeasible", build_s=build_s)
    size = _size(m)
    t1 = clock.now()
    start_from = start_obj = lp_obj = None
    starts_cut = False  # the clock left a start with no answer: the start chosen may differ (finding its cut)
    if warm and problem.solver == "highs" and problem.objective == "min_cost" and not problem.elastic_caps:
        start_from, start_obj, lp_obj, starts_cut = _load_best_start(m, problem, deadline)
    res, bound_obj, bound, phase2_cut = _solve_lexicographic(m, problem, deadline, mip_gap,
                                                             warm=start_from is not None)
    solve_s = clock.now() - t1
    tc = res.termination_condition
    if tc in (TerminationCondition.provenInfeasible, TerminationCondition.infeasibleOrUnbounded):
        return SolveResult(status="infeasible", build_s=build_s, solve_s=solve_s, size=size)
    # the safety stop, reported as the decomposed path does: the MIP, or a step before it, cut by the clock
    cut = tc == TerminationCondition.maxTimeLimit or starts_cut or phase2_cut
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        # no incumbent (time limit or other stop): nothing to return
        return _stopped(SolveResult(status="no_solution", build_s=build_s, solve_s=solve_s, size=size), cut)
    res.solution_loader.load_vars()
    status = "optimal" if tc == TerminationCondition.convergenceCriteriaSatisfied else (
        "time_limit" if tc == TerminationCondition.maxTimeLimit else "optimal")

    out = _stopped(SolveResult(status=status, build_s=build_s, solve_s=solve_s, size=size, warm_start=start_from,
                               warm_start_objective=start_obj), cut)
    _read_answer(m, problem, out, bound_obj, bound)
    if with_lp_bound and lp_obj is None:
        out.lp_bound = _lp_bound_by(problem, deadline)
        _stopped(out, out.lp_bound is None and not out.safety_stop)  # plan.json's lp_bound null: said why
    elif with_lp_bound:
        out.lp_bound = lp_obj
    _believe(problem, out)
    return out


def _lp_bound_by(problem: AllocationProblem, deadline: float) -> float | None:
    """The LP bound within what is left to ``deadline``; None once it has passed (not even the LP's
    Pyomo model is built: on a 32k-column LoRA MIP that alone ran seconds past the limit) or where
    the clock stopped the LP (the LP of a problem with a plan is feasible: only a stop leaves it
    without an optimum), the caller reporting the safety stop."""
    left = deadline - clock.now()
    return lp_relaxation_bound(problem, left) if left > clock.MOMENT_S else None


def _cut_short(granted_s: float, deadline: float) -> bool:
    """Whether a step that was granted ``granted_s`` and came back with no answer was cut by the clock
    (it had only a moment, or it ran to the deadline) rather than answering "none" (a warm start's
    counts that cannot serve the demand): a plan such a cut changes reports the safety stop."""
    return granted_s <= clock.MOMENT_S or clock.now() >= deadline


def _built(problem: AllocationProblem):
    """``solver.model``'s Pyomo model of ``problem``, and the seconds it took."""
    from hetinfra.solver.model import build_model

    t0 = clock.now()
    # another solver gets the rows exactly as the fast path passes them to HiGHS (cover cuts too)
    m = build_model(problem, cuts=problem.solver != "highs")
    return m, clock.now() - t0


def _load_best_start(m, problem: AllocationProblem, deadline: float
                     ) -> tuple[str | None, float | None, float | None, bool]:
    """Of the candidate starts (the running deployment, the rounded LP, the greedy plan), the one
    feasible with the lowest objective loaded into ``m``'s variables: (its name, its objective, the LP
    optimum, whether the clock cut a step: the rounded LP or a start's LP left with no answer), the
    first two None where none is feasible. Each HiGHS run gets what is left to ``deadline``."""
    import pyomo.environ as pyo

    start_from = start_obj = None
    granted = clock.remaining(deadline)
    lp_counts, lp_obj = rounded_lp_start(problem, granted)
    cut = lp_obj is None and _cut_short(granted, deadline)
    tried = [(name, counts) for name, counts in (("running", problem.running), ("rounded LP", lp_counts),
                                                 ("greedy", greedy_start(problem))) if counts]
    best_values = None
    for name, counts in tried:
        granted = clock.remaining(deadline)
        obj = warm_start(m, problem, counts, granted)
        cut |= obj is None and _cut_short(granted, deadline)
        if obj is not None and (start_obj is None or obj < start_obj):
            start_obj, start_from = obj, name
            best_values = [(v, v.value) for v in m.component_data_objects(pyo.Var)]
    for v, val in best_values or ():  # the best start's point, not the last one tried
        v.set_value(val, skip_validation=True)
    return start_from, start_obj, lp_obj, cut


def _solve_lexicographic(m, problem: AllocationProblem, deadline: float, mip_gap: float, *, warm: bool):
    """``m`` solved (``warm``: from its variables' values) within what is left to ``deadline``;
    max_throughput then again for the cheapest plan at the scale found (``add_cheapest_at_scale``),
    phase 1's answer kept where phase 2 finds none. Returns (the result, phase 1's scale or None, the
    bound to report, whether the clock cut phase 2 before it found a plan: phase 1's is then kept)."""
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
    import pyomo.environ as pyo

    res = _run(m, problem.solver, max(MIP_FLOOR_S, clock.remaining(deadline)), mip_gap, warm=warm)
    if not (res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible)
            and problem.objective == "max_throughput"):
        return res, None, res.objective_bound, False
    res.solution_loader.load_vars()
    s_star = pyo.value(m.s)
    first = res
    add_cheapest_at_scale(m, problem, s_star)
    res = _run(m, problem.solver, max(MIP_FLOOR_S, clock.remaining(deadline)), mip_gap)
    cut = False
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        cut = res.termination_condition == TerminationCondition.maxTimeLimit
        res = first  # keep the phase-1 answer
        m.min_cost.deactivate()
        m.keep_scale.deactivate()
        m.obj.activate()
    return res, s_star, first.objective_bound, cut


def add_cheapest_at_scale(m, problem: AllocationProblem, s_star: float) -> None:
    """max_throughput's phase 2 on ``m``: the objective max s (``m.obj``) deactivated, and

        keep_scale:  s >= s* (1 - 1e-7)
        min_cost:    min  sum_u cost[u] n[u]        (``solver.model.cost_expr``)

    with s* the scale phase 1 reached (a relative 1e-7 below it, so that round-off in s* cannot make
    phase 1's own plan infeasible)."""
    import pyomo.environ as pyo

    from hetinfra.solver.model import cost_expr

    m.obj.deactivate()
    m.keep_scale = pyo.Constraint(expr=m.s >= s_star * (1 - 1e-7))
    m.min_cost = pyo.Objective(expr=cost_expr(m, problem), sense=pyo.minimize)


def _read_answer(m, problem: AllocationProblem, out: SolveResult, bound_obj: float | None,
                 bound: float | None) -> None:
    """The loaded solution of ``m`` into ``out``: counts, flows, unmet demand, adapters held, extra
    GPUs; then the objective, bound and gap (max_throughput's: phase 1's scale ``bound_obj`` and its
    ``bound``)."""
    import pyomo.environ as pyo

    from hetinfra.solver.model import allows_unmet

    out.n = {u: int(round(pyo.value(m.n[u]))) for u in m.U if pyo.value(m.n[u]) > 0.5}
    for u, mod, w in m.P:
        if problem.routing == "sliced":
            val = round(pyo.value(m.z[u, mod, w])) * problem.demand[(mod, w)] / problem.slice_factor
        else:
            val = pyo.value(m.y[u, mod, w])
        if val > 1e-9:
            out.flow[(u, mod, w)] = val
    if allows_unmet(problem):
        out.unmet = {k: pyo.value(m.q[k]) for k in m.K if pyo.value(m.q[k]) > 1e-9}
    if problem.adapters and hasattr(m, "x"):
        out.holds = {key: int(round(pyo.value(m.x[key]))) for key in m.A if pyo.value(m.x[key]) > 0.5}
    out.flow = settle_flows(problem, out.n, out.flow, out.holds)  # no tolerance-sized flow to a unit that does not run
    if problem.elastic_caps:
        out.extra_gpus = {g: pyo.value(m.e[g]) for g in m.G if pyo.value(m.e[g]) > 1e-6}
    if problem.objective == "max_throughput" and not problem.elastic_caps:
        out.scale = pyo.value(m.s)
        out.objective = bound_obj if bound_obj is not None else out.scale
        out.bound = bound
    else:
        out.objective = pyo.value(m.obj)
        out.bound = bound if bound is not None and math.isfinite(bound) else None
    if out.bound is not None and out.objective:
        out.gap = abs(out.objective - out.bound) / max(abs(out.objective), 1e-9)


def _believe(problem: AllocationProblem, out: SolveResult) -> None:
    """Raise where ``out`` fails ``verify``: a wrong answer is a bug, never a plan."""
    violations = verify(problem, out)
    if violations:
        raise SolverError("the solver's answer fails re-checking: " + "; ".join(violations[:3]),
                          hint="this is a bug in hetinfra; please report it with the spec")


def _stopped(out: SolveResult, cut: bool) -> SolveResult:
    """``out`` with the safety stop reported where the wall clock ended the solve."""
    if cut:
        from hetinfra.solver.decompose import SAFETY_WARNING

        out.safety_stop = True
        out.warnings.append(SAFETY_WARNING)
    return out


def solve(problem: AllocationProblem, *, time_limit_s: float = 30.0, mip_gap: float = 1e-3,
          with_lp_bound: bool = False, warm: bool = True, max_nodes: int | None = None,
          decompose: bool = True, start: dict[str, int] | None = None) -> SolveResult:
    """Solve and verify (see ``solver.decompose``): unlinked models alone, linked blocks jointly
    from the per-model optima; ``max_nodes`` (deterministic) stops each MIP, ``time_limit_s`` is a
    safety stop for the whole call, reported in ``safety_stop``. ``with_lp_bound`` is kept for
    callers; the LP bound is always computed. A problem with ``periods`` is solved in its expanded
    form (a committed base and per-period top-ups, ``solver.periods``) and folded back.

    ``start``: unit id -> instances of an earlier plan of a problem like this one (verification's
    previous round): one more warm-start candidate in every block, restricted to the block's units
    and completed by a fixed-count LP like the others (``solver.decompose.solve_block``)."""
    from hetinfra.solver.cutoff import cut_off
    from hetinfra.solver.decompose import DEFAULT_MAX_NODES, solve_decomposed

    deadline = clock.now() + time_limit_s  # one deadline for all the work below (solver.clock)
    if cut_off(problem, time_limit_s):  # of no use to a caller that keeps only a cheaper plan (solver.cutoff)
        return SolveResult(status="cut_off")
    time_limit_s = clock.remaining(deadline)  # what the cutoff's LP left
    if problem.solver != "highs":  # planning.solver: the joint Pyomo model, whole (solver.backends)
        return solve_pyomo(problem, time_limit_s=time_limit_s, mip_gap=mip_gap, with_lp_bound=True, warm=warm)
    if problem.adapters:  # adapter placement: the joint model, whole (the blocks' paths read no x columns)
        return solve_pyomo(problem, time_limit_s=time_limit_s, mip_gap=mip_gap, with_lp_bound=True, warm=False)
    if problem.periods:
        from hetinfra.solver.periods import expand, fold, split_name

        wide = expand(problem)
        per_copy = {u.id: start[split_name(u.id)[0]] for u in wide.units if split_name(u.id)[0] in start} \
            if start else None  # the plan's count (its peak level's) in every level: a complete candidate
        return fold(problem, solve(wide, time_limit_s=time_limit_s, mip_gap=mip_gap, warm=warm,
                                   max_nodes=max_nodes, decompose=decompose, start=per_copy))

    out = solve_decomposed(problem, time_limit_s=time_limit_s, mip_gap=mip_gap, warm=warm,
                           max_nodes=DEFAULT_MAX_NODES if max_nodes is None else max_nodes, decompose=decompose,
                           start=start)
    if out.feasible:
        _believe(problem, out)
    return out
