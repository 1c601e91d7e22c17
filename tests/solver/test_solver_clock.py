"""The wall clock is only a safety stop (solver/clock.py): a solve cut anywhere by it says so
(``safety_stop``), and one it does not cut is the same plan on a clock 1000x slower or faster and
whatever order the per-model solves run ahead in (solver/ahead.py)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from contextlib import contextmanager

import pytest

import hetinfra.solver.decompose as decompose
import hetinfra.solver.lagrange as lagrange
import hetinfra.solver.solve as solve_module
from hetinfra.solver import clock, memo
from hetinfra.solver.direct import DirectModel, Outcome
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.solve import solve
from tests.solver.test_adapter_rows import problem as adapter_problem
from tests.solver.test_lagrange import _grid


def linked() -> AllocationProblem:
    """Models whose alone plans break shared caps (the Lagrangian and the joint MIP both run)."""
    return _grid(4, 3)


def outcome(r) -> tuple:
    return r.n, r.objective, r.bound, r.blocks, r.lp_bound, r.warm_start


def fresh(p: AllocationProblem):
    memo.clear()
    return solve(p, time_limit_s=30, mip_gap=0.01)


@pytest.fixture(scope="module")
def reference():
    p = linked()
    ref = fresh(p)
    assert not ref.safety_stop and {b["method"] for b in ref.blocks} & {"lagrangian", "joint"}
    return p, ref


@pytest.fixture(scope="module", params=["direct", "pyomo"])
def either_path(request, reference):
    """The linked problem (the direct path's blocks), or one with LoRA adapters (the whole Pyomo
    model: its MIP, then the LP bound plan.json reports)."""
    if request.param == "direct":
        return reference
    p = adapter_problem([1.0, 1.0])
    ref = fresh(p)
    assert not ref.safety_stop and ref.lp_bound is not None
    return p, ref


class _TimedOut:
    """A Pyomo-path HiGHS run the clock stopped before it found anything (Pyomo's contrib result)."""

    def __init__(self):
        from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

        self.termination_condition = TerminationCondition.maxTimeLimit
        self.solution_status = SolutionStatus.noSolution
        self.incumbent_objective = self.objective_bound = None


@pytest.mark.parametrize("speed", [1e-3, 1e3])
def test_a_slower_or_faster_clock_gives_the_same_plan_or_says_it_cut(monkeypatch, reference, speed):
    p, ref = reference
    t0 = time.perf_counter()
    monkeypatch.setattr(clock, "now", lambda: t0 + (time.perf_counter() - t0) * speed)
    got = fresh(p)
    assert got.safety_stop or outcome(got) == outcome(ref)
    if speed < 1:
        assert not got.safety_stop and outcome(got) == outcome(ref)


@pytest.mark.parametrize("blip", [False, True], ids=["jump", "blip"])
def test_a_cut_at_any_point_is_reported(monkeypatch, either_path, blip):
    """The clock reads 10^6 s late from its k-th reading on ("jump": everything after is cut too), or
    at its k-th reading only ("blip": one step is cut, the rest run as usual), for k across the whole
    solve: every path a cut sends the solve down either ends in the reference plan or reports the cut.
    A cut step that silently falls back to another path (a Lagrangian subproblem or its fixed-count LP
    answering "no plan" when the clock ended it) fails the blips; on the Pyomo path, so does an LP
    bound left out (plan.json's lp_bound null) with no safety stop said."""
    p, ref = either_path
    real_run, real_highs = DirectModel._run, solve_module._run_highs

    def run(self, *, time_limit_s, **kw):  # HiGHS cut before it found anything: what a loaded machine does
        return Outcome("time_limit") if time_limit_s <= 1e-3 else real_run(self, time_limit_s=time_limit_s, **kw)

    def run_highs(m, time_limit_s, *args, **kw):  # the same on the Pyomo path
        return _TimedOut() if time_limit_s <= 1e-3 else real_highs(m, time_limit_s, *args, **kw)

    monkeypatch.setattr(DirectModel, "_run", run)
    monkeypatch.setattr(solve_module, "_run_highs", run_highs)
    reads = []
    monkeypatch.setattr(clock, "now", lambda: reads.append(1) or time.perf_counter())
    fresh(p)
    total = len(reads)
    assert total >= 10
    for k in range(total):
        seen = []

        def late(k=k, seen=seen):
            seen.append(1)
            hit = len(seen) - 1 == k if blip else len(seen) - 1 >= k
            return time.perf_counter() + (1e6 if hit else 0.0)

        monkeypatch.setattr(clock, "now", late)
        got = fresh(p)
        assert got.safety_stop or outcome(got) == outcome(ref), f"cut at reading {k} of {total}"


def test_the_order_the_solves_ahead_finish_in_changes_nothing(monkeypatch, reference):
    """Per-model solves run ahead in threads; here they all finish first, in reverse order."""
    p, ref = reference

    @contextmanager
    def reversed_ahead(jobs):
        done = {}
        for m in reversed(list(jobs)):
            f = Future()
            f.set_result(jobs[m]())
            done[m] = f
        yield done

    monkeypatch.setattr(decompose, "ahead", reversed_ahead)
    monkeypatch.setattr(lagrange, "ahead", reversed_ahead)
    assert outcome(fresh(p)) == outcome(ref)
