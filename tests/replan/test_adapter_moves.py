"""A re-plan prefers the LoRA placement that runs (issue 38): holding an adapter on a running unit
that does not hold it costs that unit's restart (solver.adapter_check.adapter_move_costs, churn's
price per running instance), so a demand shift moves only the adapters it must, and a change of one
adapter's source restarts only the units holding it (hetinfra.replan.diff.held_changes)."""

from __future__ import annotations

import json

import pytest
import yaml

from hetinfra.solver.adapter_check import adapter_move_costs
from hetinfra.solver.problem import AdapterHold, AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve

NAMES = "abcdef"
NOW = {"a": "u1", "b": "u1", "c": "u2", "d": "u2", "e": "u3", "f": "u3"}


def shifted(held_now: bool = True) -> AllocationProblem:
    """Three running 2-slot units holding two adapters each; demand moves from a to e, which now needs
    more than one unit's 10 req/s: a fourth unit must start."""
    units = tuple(SolverUnit(u, "m", 1.0, 1, ((("aws", "r1", "L4"), 1),), {f"c~{a}": 10.0 for a in NAMES}, "r1",
                             slots=2) for u in ("u1", "u2", "u3", "u4"))
    demand = {("m", f"c~{a}"): 1.0 for a in NAMES} | {("m", "c~a"): 0.1, ("m", "c~e"): 12.0}
    holds = tuple(AdapterHold(a, "m", (("m", f"c~{a}"),), held_now=(NOW[a],) if held_now else ()) for a in NAMES)
    return AllocationProblem(units=units, demand=demand, adapters=holds, running={"u1": 1, "u2": 1, "u3": 1},
                             churn_hours=0.5)


def held_after(p: AllocationProblem, res) -> dict[str, set[str]]:
    """What plan.json lists per unit: the solve's holdings, a running unit keeping its own while it has
    slots (plan/adapters.kept_running: the solver is indifferent to an x[u,a] that carries no flow)."""
    from hetinfra.plan.adapters import kept_running

    return {u: set(kept_running(p, u, sorted(a for (v, a) in res.holds if v == u), res.n.get(u, 0)))
            for u in ("u1", "u2", "u3", "u4")}


def test_a_demand_shift_moves_only_the_adapters_it_must():
    res = solve(shifted())
    held = held_after(shifted(), res)
    assert res.n == {"u1": 1, "u2": 1, "u3": 1, "u4": 1}
    assert held["u1"] == {"a", "b"} and held["u2"] == {"c", "d"} and held["u3"] == {"e", "f"}  # none restarts
    assert "e" in held["u4"]  # the new unit takes e's overflow
    # the penalty is churn's price of each running instance the move would restart, on no kept holding
    costs = adapter_move_costs(shifted())
    assert costs[("u1", "c")] == pytest.approx(0.5) and ("u1", "a") not in costs and ("u4", "a") not in costs


def test_without_the_running_placement_the_same_shift_restarts_running_units():
    """The planted fault: the same problem not knowing who holds what moves adapters between running units."""
    res = solve(shifted(held_now=False))
    held = held_after(shifted(held_now=False), res)
    assert any(held[u] != {a for a in NAMES if NOW[a] == u} for u in ("u1", "u2", "u3"))


def test_a_new_source_restarts_only_the_units_holding_that_adapter(shared_plan, tmp_path):
    from hetinfra.cli import cli
    from click.testing import CliRunner

    from hetinfra.document import load_plan
    from hetinfra.replan.diff import held_changes
    from tests.plan.test_adapter_plan import SPEC

    spec = yaml.safe_load(SPEC)
    before = shared_plan(spec, "--no-verify", "--no-baselines")
    spec["adapters"][0]["source"] = "org/sql-v2"
    path = tmp_path / "v2.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(cli, ["plan", str(path), "--out", str(tmp_path / "v2"), "--no-verify", "--no-baselines",
                                   "--state", str(before)])
    assert res.exit_code == 0, res.output
    old, new = load_plan(before / "plan.json"), load_plan(tmp_path / "v2" / "plan.json")
    holders = {a.unit for a in old.allocations if a.adapters and any(h.name == "sql" for h in a.adapters.held)}
    changes = held_changes(old.allocations, new.allocations)
    assert {c.unit for c in changes} == holders and all(c.changed == ("sql",) and not c.added and not c.removed
                                                        for c in changes)
    assert json.loads((tmp_path / "v2" / "plan.json").read_text())["gpus"] == old.gpus
