"""What an infeasible plan is told to relax (hetinfra.plan.diagnose): caps are named only where raising
them alone makes a plan; where the problem has no plan whatever the caps, the message says what else."""

from __future__ import annotations

from hetinfra.plan.diagnose import diagnose
from hetinfra.solver.problem import AdapterHold, AllocationProblem, SolverUnit

G = ("aws", "r1", "L4")


def _problem(demand: float, cap: int, regions: tuple[str, ...] = ()) -> AllocationProblem:
    units = (SolverUnit("u", "m", 1.0, 1, ((G, 1),), {"c": 1.0, "c~a": 1.0}, "r1", slots=1),)
    hold = AdapterHold("a", "m", (("m", "c~a"),), regions)
    return AllocationProblem(units=units, demand={("m", "c"): demand, ("m", "c~a"): 0.5}, caps={G: cap},
                             adapters=(hold,))


def test_too_small_a_cap_is_named_with_what_it_needs():
    err = diagnose(_problem(3.0, cap=2), 10, 0.0)
    assert "aws/r1 L4: cap 2 GPUs, needs 4" in str(err)
    assert err.details["relax"] == [{"availability": {"cloud": "aws", "region": "r1", "gpu": "L4", "max_gpus": 2,
                                                      "needed": 4}}]


def test_a_problem_no_cap_can_fix_does_not_blame_the_caps():
    """The adapter's residency holds no unit: no cap, however large, makes a plan. This said
    "availability caps are too small to serve the demand: " and named none."""
    err = diagnose(_problem(3.0, cap=2, regions=("r9",)), 10, 0.0)
    assert "caps are too small" not in str(err) and "relax" not in err.details


def test_a_diagnosis_the_time_limit_cut_says_so(monkeypatch):
    """The re-solve without the budget spends the whole limit (fake clock) and the elastic-caps one
    gets a moment, in which HiGHS stops before it finds anything: the error does not pass the
    generic "no plan satisfies all constraints together" off as a finding, it names the time limit."""
    import hetinfra.solver.solve as solve_module
    from hetinfra.plan.diagnose import CUT
    from hetinfra.solver import clock
    from hetinfra.solver.result import SolveResult

    now = [0.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    real = solve_module.solve

    def slow_first(p, *, time_limit_s, **kw):
        if time_limit_s <= clock.MOMENT_S:
            return SolveResult(status="no_solution")
        out = real(p, time_limit_s=time_limit_s, **kw)
        now[0] += time_limit_s
        return out

    monkeypatch.setattr(solve_module, "solve", slow_first)
    err = diagnose(_problem(3.0, cap=2), 10, 0.0)
    assert str(err).startswith(CUT) and "planning.time_limit_s" in err.hint
