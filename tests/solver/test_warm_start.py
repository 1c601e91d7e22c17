"""Warm start: the start is feasible and complete, never changes the optimum, and the cheaper of
the running deployment and the rounded LP relaxation is used (hand-solved)."""

from __future__ import annotations

import pytest

from hetinfra.solver.model import build_model
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import greedy_start, rounded_lp_start, solve, warm_start

# X: $1/h, 10 req/s; Y: $2/h, 12 req/s; demand 15 req/s.
# LP relaxation: 1.5 X ($1.5) -> rounded up 2 X ($2), which is also the integer optimum.
UNITS = (SolverUnit("x", "m", 1.0, 1, ((("lab", "r1", "X"), 1),), {"c": 10.0}, "r1"),
         SolverUnit("y", "m", 2.0, 1, ((("lab", "r1", "Y"), 1),), {"c": 12.0}, "r1"))


def problem(**kw) -> AllocationProblem:
    return AllocationProblem(units=UNITS, demand={("m", "c"): 15.0}, **kw)


def test_rounded_lp_start():
    counts, lp = rounded_lp_start(problem(), 10)
    assert counts == {"x": 2} and lp == pytest.approx(1.5)


def test_start_from_rounded_lp_is_optimal_here():
    r = solve(problem(), time_limit_s=10, mip_gap=0)
    assert r.warm_start == "rounded LP" and r.warm_start_objective == pytest.approx(2.0)
    assert r.n == {"x": 2} and r.objective == pytest.approx(2.0)
    assert solve(problem(), time_limit_s=10, mip_gap=0, warm=False).n == r.n


def test_running_fleet_wins_when_churn_makes_moving_dear():
    # running 2 Y ($4) vs the rounded LP's 2 new X ($2 + 10 h x $2 churn = $22): start from running
    p = problem(running={"y": 2}, churn_hours=10.0)
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert r.warm_start == "running" and r.warm_start_objective == pytest.approx(4.0)
    assert r.n == {"y": 2}
    cheap = solve(problem(running={"y": 2}, churn_hours=0.0), time_limit_s=10, mip_gap=0)
    assert cheap.warm_start == "rounded LP" and cheap.n == {"x": 2}


def test_infeasible_counts_give_no_start_and_leave_the_model_free():
    p = problem()
    m = build_model(p)
    assert warm_start(m, p, {"x": 1}, 10) is None  # 10 req/s < 15
    assert not any(m.n[u].fixed for u in m.U)
    assert warm_start(m, p, {"y": 2}, 10) == pytest.approx(4.0)
    assert m.n["y"].value == 2 and sum(m.y[u, "m", "c"].value for u in ("x", "y")) == pytest.approx(15.0)


def test_greedy_start_beats_rounding_when_the_lp_splits():
    # classes a, b at 5 req/s each. X: $1 (a 10, b 1), Y: $1 (a 1, b 10), Z: $1.5 (a 10, b 10).
    # LP: half an X and half a Y ($1) -> rounded 1 X + 1 Y ($2); greedy: Z alone serves both ($1.5),
    # which is the integer optimum.
    def unit(name, cost, a, b):
        return SolverUnit(name, "m", cost, 1, ((("lab", "r1", name.upper()), 1),), {"a": a, "b": b}, "r1")

    p = AllocationProblem(units=(unit("x", 1.0, 10, 1), unit("y", 1.0, 1, 10), unit("z", 1.5, 10, 10)),
                          demand={("m", "a"): 5.0, ("m", "b"): 5.0})
    assert rounded_lp_start(p, 10)[0] == {"x": 1, "y": 1}
    assert greedy_start(p) == {"z": 1}
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert (r.warm_start, r.warm_start_objective, r.n) == ("greedy", pytest.approx(1.5), {"z": 1})


def test_a_start_presolve_beats_is_not_returned_as_the_optimum():
    # HiGHS 1.16 solves this in presolve and, given a start, reported the optimum's objective ($3)
    # with the start's vector ($4: two a1). The direct model and the Pyomo path both re-solve then.
    from hetinfra.solver.direct import DirectModel
    from hetinfra.solver.solve import solve_pyomo

    def unit(name, mod, gpus, rate, spot=False):
        return SolverUnit(name, mod, 1.0, gpus, ((("lab", "r1", "G"), gpus),), {"c": rate}, "r1", spot=spot)

    p = AllocationProblem(units=(unit("a0", "a", 2, 2.0), unit("a1", "a", 1, 5.0, True), unit("b0", "b", 1, 2.0),
                                 unit("b1", "b", 1, 2.0), unit("b2", "b", 1, 2.0)),
                          demand={("a", "c"): 5.0, ("b", "c"): 1.0}, caps={("lab", "r1", "G"): 5}, headroom=0.2,
                          max_spot_fraction={"a": 0.5}, churn_hours=0.5)
    start = DirectModel(p).with_counts({"a0": 1, "a1": 2, "b2": 1}, 10)
    assert start.objective == pytest.approx(4.0)
    dm = DirectModel(p)
    o = dm.mip(time_limit_s=10, mip_gap=0, max_nodes=None, start=start.values)
    assert o.objective == pytest.approx(3.0) and dm.objective_of(o.values) == pytest.approx(3.0)
    r = solve_pyomo(p, time_limit_s=10, mip_gap=0)
    assert r.objective == pytest.approx(3.0) and r.cost(p) == pytest.approx(3.0)
