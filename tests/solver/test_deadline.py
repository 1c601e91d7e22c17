"""One deadline per solve (solver/clock.py): ``time_limit_s`` bounds the whole call, so every HiGHS run
of it (the cutoff's LP, the rounded LP, each warm start, the MIP, the LP bound, a diagnosis's re-solves)
is granted only what is left to the one deadline. On a fake clock each run spends half of what it was
granted; the invariant checked is that no run was granted time past the deadline, which a run granted
a fresh ``time_limit_s`` of its own breaks from the second run on (a spec with 30 LoRA adapters ran
its MIP for 598 s against planning.time_limit_s 300)."""

from __future__ import annotations

import pytest

import hetinfra.solver.solve as solve_module
from hetinfra.plan.diagnose import diagnose
from hetinfra.solver import clock, memo
from hetinfra.solver.cutoff import beating
from hetinfra.solver.direct import DirectModel
from hetinfra.solver.result import SolveResult
from tests.solver.test_adapter_rows import problem as adapter_problem
from tests.solver.test_warm_start import problem as warm_problem

LIMIT = 100.0


class Runs:
    """HiGHS runs on a fake clock: (fake time at the call, seconds granted) of each, each advancing
    the clock by ``share`` (a half) of what it was granted."""

    def __init__(self, monkeypatch):
        self.now, self.seen, self.share = 0.0, [], 0.5
        monkeypatch.setattr(clock, "now", lambda: self.now)

    def spending(self, run):
        def wrapped(*args, **kw):
            limit = kw["time_limit_s"] if "time_limit_s" in kw else args[1]
            self.seen.append((self.now, limit))
            out = run(*args, **kw)
            self.now += limit * self.share
            return out
        return wrapped

    def within_deadline(self, runs: int) -> None:
        assert len(self.seen) >= runs, self.seen
        for at, granted in self.seen:
            assert at + granted <= LIMIT + 1e-9, f"granted {granted:g} s at {at:g} s of {LIMIT:g}: {self.seen}"


@pytest.fixture
def runs(monkeypatch) -> Runs:
    """Every HiGHS run of the Pyomo path and of the direct path counted on the fake clock."""
    out = Runs(monkeypatch)
    monkeypatch.setattr(solve_module, "_run_highs", out.spending(solve_module._run_highs))
    monkeypatch.setattr(DirectModel, "_run", out.spending(DirectModel._run))
    memo.clear()
    return out


def test_the_warm_starts_and_the_mip_share_one_deadline(runs):
    r = solve_module.solve_pyomo(warm_problem(), time_limit_s=LIMIT, mip_gap=0, with_lp_bound=True)
    assert r.warm_start is not None and r.n == {"x": 2}
    runs.within_deadline(3)  # the rounded LP, a warm start's LP, the MIP


def test_the_lp_bound_after_an_adapter_mip_gets_what_the_mip_left(runs):
    r = solve_module.solve(adapter_problem([1.0, 1.0]), time_limit_s=LIMIT, mip_gap=0)
    assert r.feasible and r.lp_bound is not None
    runs.within_deadline(2)  # the MIP, the LP bound


def test_no_lp_bound_is_built_once_the_mip_reached_the_deadline(runs, monkeypatch):
    runs.share = 1.0  # the MIP runs to its time limit
    monkeypatch.setattr(solve_module, "lp_relaxation_bound", lambda *a: pytest.fail("an LP built past the deadline"))
    r = solve_module.solve(adapter_problem([1.0, 1.0]), time_limit_s=LIMIT, mip_gap=0)
    assert r.feasible and r.lp_bound is None
    assert r.safety_stop  # plan.json's lp_bound null says the clock cut it: a faster machine reports a number
    runs.within_deadline(1)


def test_a_warm_start_the_clock_cut_is_reported(runs, monkeypatch):
    """The rounded LP spends the whole limit; the warm starts after it get a moment and come back
    with nothing (HiGHS stopped): the MIP's start differs from a fast machine's, so the safety stop."""
    real = solve_module.warm_start
    runs.share = 1.0
    monkeypatch.setattr(solve_module, "warm_start", lambda m, p, counts, limit: None if limit <= clock.MOMENT_S
                        else real(m, p, counts, limit))
    r = solve_module.solve_pyomo(warm_problem(), time_limit_s=LIMIT, mip_gap=0, with_lp_bound=True)
    assert r.n == {"x": 2} and r.warm_start is None and r.safety_stop


def test_a_warm_start_that_cannot_serve_the_demand_is_no_safety_stop(runs):
    """A start's counts that cannot serve the demand come back with nothing well within the limit."""
    p = warm_problem().replace(running={"x": 1})  # one instance serves 10 of the 15 req/s
    r = solve_module.solve_pyomo(p, time_limit_s=LIMIT, mip_gap=0, with_lp_bound=True)
    assert r.n == {"x": 2} and not r.safety_stop


def test_the_cutoffs_lp_counts_against_the_solve(runs):
    with beating(1e9):  # a cutoff far above the optimum: its LP runs, the solve goes on
        r = solve_module.solve(warm_problem(), time_limit_s=LIMIT, mip_gap=0)
    assert r.n == {"x": 2}
    runs.within_deadline(3)  # the cutoff's LP, the block's LP, its MIP


def test_a_diagnosis_shares_its_time_limit_among_its_re_solves(runs, monkeypatch):
    monkeypatch.setattr(solve_module, "solve", runs.spending(lambda p, **kw: SolveResult(status="infeasible")))
    p = warm_problem(budget=1.0, locality=0.5, local_demand={("m", "r1"): 15.0}, max_spot_fraction={"m": 0.5})
    diagnose(p, LIMIT, 0.0)
    runs.within_deadline(4)  # without the budget, with elastic caps, without locality, without spot limits
