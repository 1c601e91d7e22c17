"""Repeated solves (verification re-solves with some models derated) reuse the per-model blocks of
the models whose problem did not change, and give what a fresh solve gives."""

from __future__ import annotations

import dataclasses

import hetinfra.solver.decompose as decompose
import hetinfra.solver.memo as memo
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve


def unit(uid, model, cost, gpu, rate, region="r1"):
    return SolverUnit(uid, model, cost, 1, ((("lab", region, gpu), 1),), {"c": rate}, region, False)


UNITS = tuple(unit(f"{m}-{g}-{r}", m, cost * (1 + 0.1 * i), g, rate, r)
              for m in ("a", "b", "c") for g, cost, rate in (("X", 1.0, 10.0), ("Y", 1.7, 20.0))
              for i, r in enumerate(("r1", "r2")))
DEMAND = {("a", "c"): 25.0, ("b", "c"): 14.0, ("c", "c"): 31.0}
CAPS = {("lab", "r1", "X"): 40, ("lab", "r2", "Y"): 40}  # slack caps: models are solved alone


def derate(p: AllocationProblem, model: str, f: float) -> AllocationProblem:
    units = tuple(dataclasses.replace(u, rates={w: r * f for w, r in u.rates.items()}) if u.model == model else u
                  for u in p.units)
    return p.replace(units=units)


def test_unchanged_models_are_not_solved_again(monkeypatch):
    memo.clear()
    calls = []
    real = decompose._solve_alone
    monkeypatch.setattr(decompose, "_solve_alone", lambda p, m, **kw: calls.append(m) or real(p, m, **kw))
    p = AllocationProblem(units=UNITS, demand=DEMAND, caps=CAPS)
    first = solve(p, time_limit_s=10, mip_gap=0)
    assert sorted(calls) == ["a", "b", "c"]
    calls.clear()
    q = derate(p, "b", 0.6)
    second = solve(q, time_limit_s=10, mip_gap=0)
    assert calls == ["b"]  # a and c come from the memo
    memo.clear()
    fresh = solve(q, time_limit_s=10, mip_gap=0)
    assert (second.n, second.objective, second.bound, second.blocks) == (fresh.n, fresh.objective, fresh.bound,
                                                                         fresh.blocks)
    assert second.n != first.n  # b needs more capacity at 60%
