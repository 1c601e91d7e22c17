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


def _local_problem(elsewhere: bool) -> AllocationProblem:
    """3 req/s, all from region r1 at locality 1, where L4 is capped at 2 GPUs (1 req/s each); with
    ``elsewhere`` an uncapped unit in r2 could serve it all were the locality lower."""
    units = [SolverUnit("u1", "m", 1.0, 1, ((G, 1),), {"c": 1.0}, "r1")]
    if elsewhere:
        units.append(SolverUnit("u2", "m", 1.0, 1, ((("aws", "r2", "L4"), 1),), {"c": 1.0}, "r2"))
    return AllocationProblem(units=tuple(units), demand={("m", "c"): 3.0}, caps={G: 2},
                             local_demand={("m", "r1"): 3.0}, locality=1.0)


def test_caps_that_suffice_at_locality_0_name_the_locality_too():
    """Held-out h74x (promise_stop62.txt): caps binding in one region at locality 0.8 were the whole
    story the error told ("raise those caps"), though the same caps plan at locality 0. The locality is
    named in the message, the hint and the relax details; the caps' figures are as before."""
    err = diagnose(_local_problem(elsewhere=True), 10, 0.0)
    assert "availability caps are too small to serve the demand at planning.locality 1:" in str(err)
    assert "aws/r1 L4: cap 2 GPUs, needs 3" in str(err)
    assert "lower planning.locality" in err.hint
    assert {"locality": {"current": 1.0}} in err.details["relax"]


def test_caps_that_locality_does_not_explain_do_not_name_it():
    """No unit outside the capped region: locality 0 plans nothing either, so only the caps are named."""
    err = diagnose(_local_problem(elsewhere=False), 10, 0.0)
    assert "aws/r1 L4: cap 2 GPUs, needs 3" in str(err) and "locality" not in str(err) + err.hint
    assert all("locality" not in r for r in err.details["relax"])
