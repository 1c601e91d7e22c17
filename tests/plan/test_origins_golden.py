"""Specs without origins plan as before routing by origin (issue 25): their plan.json has neither
``origins`` nor ``routing_by_origin`` (and is otherwise byte-identical to its golden file:
tests/plan/test_plan_golden.py); examples with origins route per origin, and summed over origins
each class's routing is the class routing."""

from __future__ import annotations

import pytest
import yaml

from tests.plan.golden_plans import EXAMPLES, REPO


@pytest.mark.parametrize("name", EXAMPLES)
def test_origin_keys_only_where_origins_are_declared(name, example_plans):
    got = example_plans[name][1]
    spec = yaml.safe_load((REPO / "services" / f"{name}.yaml").read_text())
    if not any(m["demand"].get("origins") for m in spec["models"]):
        assert "origins" not in got and "routing_by_origin" not in got
        return
    for model, by_origin in got["routing_by_origin"].items():
        for cls, flows in got["routing"][model].items():
            per_origin = sum(f["rps"] for rows in by_origin.values() for f in rows.get(cls, ()))
            assert per_origin == pytest.approx(sum(f["rps"] for f in flows), abs=1e-3), (model, cls)
