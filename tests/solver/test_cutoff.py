"""solver.cutoff: a solve inside ``beating(c)`` answers "cut_off" only where the full solve's plan
costs more than c (its caller, hetinfra.plan.variants.raise_floors, would drop it), and otherwise
exactly what the full solve answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.solver.cutoff import MARGIN, beating, cut_off
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve


def unit(uid: str, rate: float, cost: float) -> SolverUnit:
    return SolverUnit(uid, "m", cost, 1, ((("aws", "r1", "L4"), 1),), {"c": rate, "d": rate / 2}, "r1")


def problem(units: list[tuple[float, float]], demand: float) -> AllocationProblem:
    return AllocationProblem(units=tuple(unit(f"u{i}", r, c) for i, (r, c) in enumerate(units)),
                             demand={("m", "c"): demand, ("m", "d"): demand / 3})


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.floats(0.5, 20.0), st.floats(0.2, 9.0)), min_size=1, max_size=4),
       st.floats(0.3, 40.0), st.floats(0.5, 1.5))
def test_a_cut_off_solve_is_one_its_caller_would_drop(units, demand, factor):
    p = problem(units, demand)
    full = solve(p)
    cutoff = full.objective * factor
    with beating(cutoff):
        got = solve(p)
    if got.status == "cut_off":
        assert not got.feasible and full.objective > cutoff  # the caller keeps only objectives <= cutoff
    else:
        assert (got.status, got.n, got.objective) == (full.status, full.n, full.objective)
    if factor >= 1.0:  # the optimum itself is within the cutoff: never cut
        assert got.status != "cut_off"


def test_a_bound_far_above_the_cutoff_is_cut_and_nothing_outside_the_block_is():
    p = problem([(4.0, 3.0), (2.0, 1.0)], 12.0)
    full = solve(p)
    with beating(full.objective / 2):
        assert solve(p).status == "cut_off"
        with beating(None):  # a nested "no cutoff" restores full solves
            assert solve(p).n == full.n
    assert solve(p).n == full.n  # the cutoff ends with its block
    assert not cut_off(p, 10.0)


def test_the_margin_keeps_a_bound_at_the_cutoff():
    """An LP bound equal to the cutoff (to the LP's tolerance) is not cut: the MIP may reach it."""
    p = problem([(5.0, 2.0)], 10.0)  # 10 + 10/3 req/s on a 5 req/s unit... LP = the integer optimum here
    full = solve(p)
    with beating(full.objective * (1 - MARGIN / 10)):
        assert solve(p).status != "cut_off"


def test_max_throughput_is_never_cut():
    p = problem([(4.0, 3.0)], 12.0).replace(objective="max_throughput", budget=6.0)
    with beating(0.0):
        assert solve(p).status != "cut_off"
