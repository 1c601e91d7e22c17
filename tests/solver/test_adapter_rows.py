"""The adapter families of solver.rows (issue 38, point 3): a unit holds at most its slots' adapters (on
every instance), routing only to holders, cover per area, residency; re-checked by solver.adapter_check, which a planted fault fails."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.solver.adapter_check import verify_adapters
from hetinfra.solver.periods import expand, split_name
from hetinfra.solver.problem import AdapterHold, AllocationProblem, Period, SolverUnit
from hetinfra.solver.rows import compile_rows
from hetinfra.solver.solve import solve

G = (("aws", "r1", "L4"), 1)


def unit(uid, slots, rate, keys, region="r1", cost=1.0):
    return SolverUnit(uid, "m", cost, 1, ((("aws", region, "L4"), 1),), {k: rate for k in keys}, region, slots=slots)


def problem(rates: list[float], *, big_rate=10.0, small_rate=10.0, big_slots=4, cover=1, regions=()):
    keys = ["c"] + [f"c~a{i}" for i in range(len(rates))]
    units = (unit("base", 0, 20.0, ["c"]), unit("small", 1, small_rate, keys), unit("big", big_slots, big_rate, keys))
    holds = tuple(AdapterHold(f"a{i}", "m", (("m", f"c~a{i}"),), regions, (((), cover),)) for i in range(len(rates)))
    demand = {("m", "c"): 1.0, **{("m", f"c~a{i}"): r for i, r in enumerate(rates)}}
    return AllocationProblem(units=units, demand=demand, adapters=holds)


def test_adapters_share_slots_on_one_instance_when_it_costs_nothing():
    res = solve(problem([1.0, 1.0, 1.0]))
    # one 4-slot instance holds all three adapters and serves everything (4 req/s of 10)
    assert res.n == {"big": 1} and sorted(a for (u, a) in res.holds) == ["a0", "a1", "a2"]
    assert verify_adapters(problem([1.0, 1.0, 1.0]), res) == []


def test_the_solver_trades_the_slowdown_of_more_slots_against_replicas():
    # 9 req/s, two adapters: a fast 4-slot tier holds both on one instance; a slow one (4 req/s) would
    # need three, so the plan buys 1-slot instances (two, one per adapter) instead
    fast, slow = solve(problem([4.0, 4.0], big_rate=10.0)), solve(problem([4.0, 4.0], big_rate=4.0))
    assert fast.n == {"big": 1} and fast.objective == pytest.approx(1.0)
    assert slow.objective == pytest.approx(2.0) and slow.n.get("small", 0) >= 1 and slow.n.get("big", 0) < 3


def test_adapter_demand_goes_only_to_instances_holding_it():
    p = problem([6.0, 0.5])
    res = solve(p)
    for (u, m, w), val in res.flow.items():
        if "~" in w:
            assert res.holds.get((u, w.split("~")[1]), 0) > 0, (u, w, val)


def test_two_copies_where_asked_and_residency_forbids_other_regions():
    res = solve(problem([0.5], cover=2))
    assert sum(c for (_, a), c in res.holds.items() if a == "a0") >= 2
    assert solve(problem([0.5], regions=("r9",))).status == "infeasible"


def test_the_pyomo_model_has_one_constraint_per_family():
    rows = compile_rows(problem([1.0, 2.0]))
    fams = {f for f, _ in rows.families}
    assert {"adapter_slots", "adapter_once", "adapter_routing", "adapter_cover"} <= fams
    assert len(rows.x) == 2 * 2  # small and big may hold each of two adapters; base has no slots


def test_the_check_fails_a_planted_fault():
    p = problem([1.0, 1.0, 1.0])
    res = solve(p)
    worse = dataclasses.replace(res, holds={k: v for k, v in list(res.holds.items())[1:]})
    assert any("does not hold" in v or "held by 0" in v for v in verify_adapters(p, worse))
    over = dataclasses.replace(res, holds={**res.holds, ("big", "a0"): 5})
    assert verify_adapters(p, over)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.05, 12.0), min_size=1, max_size=6), st.integers(1, 6), st.floats(3.0, 20.0))
def test_every_solution_keeps_the_rules(rates, slots, big_rate):
    """Whatever the demand: each unit holds at most its slots' distinct adapters, on a running unit,
    and adapter requests reach only holders (solver.adapter_check restates the rows)."""
    p = problem(rates, big_slots=slots, big_rate=big_rate)
    res = solve(p, time_limit_s=20)
    if len(rates) > 1 + slots:  # more adapters than the two units' slots: none may hold the rest
        assert res.status == "infeasible"
        return
    assert res.feasible and verify_adapters(p, res) == []
    for u in res.n:
        s = next(x.slots for x in p.units if x.id == u)
        assert sum(1 for (uu, _) in res.holds if uu == u) <= s


def test_replan_moves_adapters_with_their_demand_within_the_change_penalty():
    """Demand moves from a0 to a1: the running fleet stays (no instance started, so no churn paid) and
    the adapters move between its instances' slots."""
    before = problem([6.0, 0.2, 0.2], big_slots=2, big_rate=7.0, small_rate=7.0)
    first = solve(before)
    after = before.replace(demand={**before.demand, ("m", "c~a0"): 0.2, ("m", "c~a1"): 6.0},
                           running=dict(first.n), churn_hours=8.0)
    again = solve(after)
    assert again.n == first.n  # the same instances
    a1_holders = sum(c for (_, a), c in again.holds.items() if a == "a1")
    a1_flow = sum(v for (u, _, w), v in again.flow.items() if w == "c~a1")
    assert a1_flow == pytest.approx(6.0) and a1_holders >= 1 and verify_adapters(after, again) == []


def test_a_unit_holds_only_adapters_its_slot_rank_covers():
    """Rank-aware placement: a rank-64 adapter goes to the rank-64 unit even where the rank-16 unit is
    cheaper; the rank-16 adapters may share the cheaper unit (solver.problem.AdapterHold.rank)."""
    keys = ["c", "c~lo", "c~hi"]
    units = (SolverUnit("r16", "m", 1.0, 1, (G,), {k: 10.0 for k in keys}, "r1", slots=4, lora_rank=16),
             SolverUnit("r64", "m", 1.5, 1, (G,), {k: 10.0 for k in keys}, "r1", slots=4, lora_rank=64))
    holds = (AdapterHold("lo", "m", (("m", "c~lo"),), rank=16), AdapterHold("hi", "m", (("m", "c~hi"),), rank=64))
    p = AllocationProblem(units=units, demand={("m", "c~lo"): 1.0, ("m", "c~hi"): 1.0}, adapters=holds)
    res = solve(p)
    assert ("r16", "hi") not in res.holds and res.holds.get(("r64", "hi")) == 1 and verify_adapters(p, res) == []
    assert compile_rows(p).x.keys() == {("r16", "lo"), ("r64", "lo"), ("r64", "hi")}


def _ranked(rates: list[float], rank64: set[int], *, headroom: float = 0.0) -> AllocationProblem:
    """Adapters a0.. with demand ``rates`` (those in ``rank64`` at rank 64) in two regions whose units
    are a fast rank-16 tier and a slow rank-64 one; the origin r2's adapters may be held only there."""
    keys = ["c"] + [f"c~a{i}" for i in range(len(rates))]
    units = tuple(SolverUnit(f"{tier}-{rg}", "m", cost + (0.25 if rg == "r2" else 0.0), 1, ((("aws", rg, "L4"), 1),),
                             {k: rate for k in keys}, rg, slots=slots, lora_rank=rank)
                  for rg in ("r1", "r2")
                  for tier, cost, rate, slots, rank in (("lo", 1.0, 3.0, 2, 16), ("hi", 1.1, 1.0, 4, 64)))
    holds = tuple(AdapterHold(f"a{i}", "m", (("m", f"c~a{i}"),), ("r2",) if i % 2 else (), (((), 1),),
                              rank=64 if i in rank64 else 16) for i in range(len(rates)))
    demand = {("m", "c"): 0.5, **{("m", f"c~a{i}"): r for i, r in enumerate(rates)}}
    return AllocationProblem(units=units, demand=demand, adapters=holds, headroom=headroom)


def test_the_area_cover_asks_the_rounded_instances_of_the_units_that_alone_may_carry_a_key():
    """a1 (rank 64, held only in r2) at 1.5 req/s against 1 req/s per rank-64 instance: the rank-64 units
    of r2 run at least two instances; the base's key and a0 (rank 16, anywhere) add a row over all four units."""
    p = _ranked([0.5, 1.5], {1})
    rows = compile_rows(p)
    covers = {tuple(sorted(u for u, c in rows.n.items() if c in idx)): lb
              for (family, _), (lb, _, idx, _) in zip(rows.families, rows.rows) if family == "adapter_area_cover"}
    assert covers[("hi-r2",)] == 2.0
    assert covers[tuple(sorted(rows.n))] == 2.0  # c, a0 and a1 on their fastest units: 0.5/3 + 0.5/3 + 1.5/1
    assert "adapter_area_cover" in {f for f, _ in compile_rows(p, cuts=False).families}  # the adapter path's model


@settings(max_examples=8, deadline=None)
@given(st.lists(st.floats(0.05, 4.0), min_size=1, max_size=4), st.sets(st.integers(0, 3)),
       st.sampled_from((0.0, 1 / 6)))
def test_the_area_covers_cut_no_integer_plan(rates, rank64, headroom):
    """Valid inequalities: the placement MIP has the same optimum with and without them (a cover that
    asked one instance too many fails this)."""
    from unittest import mock

    from hetinfra.solver import rows
    from hetinfra.solver.model import build_model
    from hetinfra.solver.solve import _run_highs

    p = _ranked(rates, {i for i in rank64 if i < len(rates)}, headroom=headroom)
    without = tuple(f for f in rows.FAMILIES if f is not rows.add_adapter_area_cover)
    with mock.patch.object(rows, "FAMILIES", without):
        bare = _run_highs(build_model(p), 20.0, 0.0).incumbent_objective
    assert _run_highs(build_model(p), 20.0, 0.0).incumbent_objective == pytest.approx(bare, rel=1e-6)


def _profiled(*mults: float) -> AllocationProblem:
    """Two adapters of 9 req/s each at the peak: a 1-slot unit ($1/h) and a 2-slot one ($1.50/h), 10
    req/s per instance, over equal periods at ``mults`` of the peak."""
    keys = ["c~a0", "c~a1"]
    units = (unit("small", 1, 10.0, keys, cost=1.0), unit("big", 2, 10.0, keys, cost=1.5))
    holds = tuple(AdapterHold(f"a{i}", "m", (("m", f"c~a{i}"),)) for i in range(2))
    periods = tuple(Period(1 / len(mults), (("m", x),), (i,)) for i, x in enumerate(mults))
    return AllocationProblem(units=units, demand={("m", k): 9.0 for k in keys}, adapters=holds, periods=periods)


def test_a_demand_profile_keeps_each_units_adapters_in_every_period():
    """With a profile, a unit holds the same adapters in every period (one --lora-modules list). Held
    per period, the cheapest is $2.00/h: at 1 req/s the 2-slot unit holds both ($1.50), at 18 req/s the
    1-slot unit holds a0 and the 2-slot a1 ($2.50); but the 1-slot unit holding a0 must then run in the
    quiet period too. Tied, the 2-slot unit holds both throughout: $1.50 and $3.00, $2.25/h. (A profile
    with adapters was infeasible before the holds had period copies: no unit's copy could hold them.)"""
    p = _profiled(1 / 18, 1.0)
    res = solve(p)
    assert res.feasible and res.objective == pytest.approx(2.25)
    assert res.holds == {("big", "a0"): 1, ("big", "a1"): 1} and verify_adapters(p, res) == []
    wide = solve(expand(p))
    by_level = {lv: {(split_name(u)[0], split_name(a)[0]) for (u, a) in wide.holds if split_name(u)[1] == lv}
                for lv in (0, 1)}
    assert by_level[0] == by_level[1] == set(res.holds)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from([0.25, 0.5, 1.0]), min_size=1, max_size=3), st.floats(0.3, 2.0))
def test_a_flat_profile_plans_as_no_profile(levels, scale):
    """Periods of equal demand plan as the same demand without periods, adapters included; and every
    profile's plan keeps the adapter rules at its peak."""
    flat = _profiled(*[scale] * len(levels))
    plain = AllocationProblem(units=flat.units, demand={k: v * scale for k, v in flat.demand.items()},
                              adapters=flat.adapters)
    assert solve(flat).objective == pytest.approx(solve(plain).objective)
    varied = _profiled(*levels)
    res = solve(varied)
    assert res.feasible and verify_adapters(varied, res) == []
