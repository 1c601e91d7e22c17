"""solve(start=...): an earlier plan is one more warm-start candidate in every block (verification's
re-solves pass the previous round's counts); it never enters the memo's key."""

from __future__ import annotations

import pytest

import hetinfra.solver.decompose as decompose
import hetinfra.solver.heuristic as heuristic
import hetinfra.solver.memo as memo
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve


def unit(name, model, cost, a, b, region="r1"):
    return SolverUnit(f"{model}-{name}", model, cost, 1, ((("lab", region, name.upper()), 1),), {"a": a, "b": b}, region)


# classes a, b at 5 req/s each. X: $1 (a 10, b 1), Y: $1 (a 1, b 10), Z: $1.5 (a 10, b 10): the LP
# splits (half X, half Y: $1), rounded up 1 X + 1 Y ($2); 1 Z ($1.5) is the integer optimum.
def problem(models=("m",), **kw) -> AllocationProblem:
    units = tuple(u for m in models for u in (unit("x", m, 1.0, 10, 1), unit("y", m, 1.0, 1, 10),
                                                 unit("z", m, 1.5, 10, 10)))
    demand = {(m, w): 5.0 for m in models for w in ("a", "b")}
    return AllocationProblem(units=units, demand=demand, **kw)


def test_a_cheaper_earlier_plan_is_the_start(monkeypatch):
    memo.clear()
    monkeypatch.setattr(heuristic, "feasible_start", lambda p: None)  # no greedy: rounded LP ($2) or the start
    r = solve(problem(), time_limit_s=10, mip_gap=0, start={"m-z": 1, "other-unit": 3})
    assert r.warm_start == "previous" and r.warm_start_objective == pytest.approx(1.5)
    assert r.n == {"m-z": 1}
    memo.clear()
    assert solve(problem(), time_limit_s=10, mip_gap=0).warm_start == "rounded LP"


def test_a_start_that_cannot_serve_is_ignored(monkeypatch):
    memo.clear()
    monkeypatch.setattr(heuristic, "feasible_start", lambda p: None)
    r = solve(problem(), time_limit_s=10, mip_gap=0, start={"m-x": 1})  # serves b at 1 of 5 req/s
    assert r.warm_start == "rounded LP" and r.n == {"m-z": 1}


def test_start_is_not_in_the_memo_key(monkeypatch):
    memo.clear()
    calls = []
    real = decompose._solve_alone
    monkeypatch.setattr(decompose, "_solve_alone", lambda p, m, **kw: calls.append(m) or real(p, m, **kw))
    caps = {("lab", "r1", "X"): 4}  # slack: each model is solved alone
    p = problem(("m", "n"), caps=caps)
    first = solve(p, time_limit_s=10, mip_gap=0)
    again = solve(p, time_limit_s=10, mip_gap=0, start={"m-x": 1, "m-y": 1, "n-z": 1})
    assert sorted(calls) == ["m", "n"] and again.n == first.n


def test_periods_take_the_start_in_every_level():
    from hetinfra.solver.problem import Period

    p = problem(periods=(Period(0.5, (("m", 1.0),)), Period(0.5, (("m", 0.5),))))
    r = solve(p, time_limit_s=10, mip_gap=0, start={"m-z": 1})
    assert r.feasible and r.objective == pytest.approx(solve(p, time_limit_s=10, mip_gap=0).objective)
