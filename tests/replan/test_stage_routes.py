"""A replan stage's plan.json (hetinfra.replan.safe.stage_plan) is a whole plan: a stage cut short by
--max-changes may not yet run a unit the new plan routes to, and a plan routed to a unit it does not
allocate is refused by every reader (the gateway reloads OUT/plan.json between stages)."""

from __future__ import annotations

import pytest

from hetinfra.document import Plan
from hetinfra.replan.safe import stage_plan
from tests.plan.golden_plans import filled_golden


@pytest.mark.parametrize("name", ["multi-region", "europe", "batch"])
def test_a_stage_without_some_units_routes_only_to_those_it_runs(name):
    plan = filled_golden(name)
    left_out = plan["allocations"][0]["unit"]
    counts = {a["unit"]: a["count"] for a in plan["allocations"] if a["unit"] != left_out}
    staged = Plan.parse(stage_plan(plan, [], counts), "out/plan.json")  # refused before: a route to left_out
    units = {a.unit for a in staged.allocations}
    assert left_out not in units
    routes = [e.unit for per in staged.routing.values() for rows in per.values() for e in rows]
    routes += [e.unit for per in (staged.routing_by_origin or {}).values() for o in per.values()
               for rows in o.values() for e in rows]
    assert set(routes) <= units


def test_a_model_with_no_unit_in_the_stage_is_unmet_there():
    plan = filled_golden("chat")
    staged = Plan.parse(stage_plan(plan, [], {}), "out/plan.json")
    assert staged.allocations == [] and all(rows == [] for rows in staged.routing["chat-8b"].values())
    assert sum(staged.unmet_rps.values()) == pytest.approx(plan["models"][0]["rate_rps"], rel=1e-6)


def test_an_adapters_class_falls_back_only_to_staged_units_that_hold_it(tmp_path, run_cli):
    """benchmarks/specs/lora-origins.yaml (units holding different adapters), each unit staged alone: an
    adapter's class whose units are not staged goes to the staged units that hold its adapter, or is
    unmet; it went to every unit of the model, and the stage was refused ('sends adapter 't01''s
    requests to unit ..., which does not hold it')."""
    import json
    from pathlib import Path

    from hetinfra.spec.adapters import adapter_of

    spec = Path(__file__).resolve().parents[2] / "benchmarks/specs/lora-origins.yaml"
    code, _out, err = run_cli("plan", str(spec), "--out", str(tmp_path / "out"), "--no-verify", "--no-baselines")
    assert code == 0, err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    refused_before = 0
    for a in plan["allocations"]:
        staged = Plan.parse(stage_plan(plan, [], {a["unit"]: a["count"]}), "out/plan.json")
        held = {h.name for h in (staged.allocations[0].adapters.held if staged.allocations[0].adapters else [])}
        for cls, rows in staged.routing.get(a["model"], {}).items():
            assert adapter_of(cls) is None or not rows or adapter_of(cls) in held
        refused_before += any(adapter_of(c) not in (None, *held) for c in plan["routing"].get(a["model"], {}))
    assert refused_before, "no unit of lora-origins lacks an adapter: pick another spec"
