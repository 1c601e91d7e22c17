"""Mixed-GPU pipelines in deploy and replan: Pulumi only, and priced stage by stage."""

from __future__ import annotations

import pytest

from hetinfra.deploy.apply import changes, path_of
from hetinfra.document import Plan
from hetinfra.document.state import RunningAllocation
from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.offers import Offer
from hetinfra.replan.diff import decide
from tests.plan.golden_plans import golden_allocation, golden_plan_with

MIXED = RunningAllocation.model_validate(golden_allocation(
    unit="m", cloud="aws", region="test-1", instance_type="h1+l1", gpu="H100+L40S", gpus_per_instance=1, pp=2,
    nodes_per_replica=2, count=2, instances=4, spot=False, custom_cloud=False, deployment_unit="big-aws-test-1-h1-l1",
    skypilot_task=None, alternates=[], cost_usd_per_hour=11.0, price_per_instance_usd_per_hour=2.75, path="pulumi",
    stages=[{"instance_type": "h1", "gpu": "H100", "gpus": 1, "layers": 50, "price_usd_per_hour": 4.0},
            {"instance_type": "l1", "gpu": "L40S", "gpus": 1, "layers": 30, "price_usd_per_hour": 1.5}]))


def _plan(**overrides):
    return Plan.parse(golden_plan_with([MIXED.to_dict()], **overrides))


def _offer(itype, gpu, price):
    return Offer("aws", "test-1", itype, gpu, 1, 80, 8, 64, price, None, "2026-11-01", "test")


def test_mixed_units_go_through_pulumi_only():
    assert path_of(MIXED, "all", _plan(deploy={"skypilot_clouds": ["aws"]})) == "pulumi"
    assert path_of(MIXED, "pulumi", _plan()) == "pulumi"
    with pytest.raises(InvalidInputError, match="mixed-GPU pipeline"):
        path_of(MIXED, "skypilot", _plan())


def test_preview_counts_each_stage_type():
    rows = {(c.instance_type, c.gpu): (c.before, c.after, c.after_cost) for c in changes([], [MIXED])}
    assert rows == {("h1", "H100"): (0, 2, 8.0), ("l1", "L40S"): (0, 2, 3.0)}


def test_replan_prices_a_running_mixed_pipeline_by_stage():
    new_plan = _plan(cost_usd_per_hour=11.0)
    same = decide([MIXED], new_plan, [_offer("h1", "H100", 4.0), _offer("l1", "L40S", 1.5)], {},
                  min_savings_pct=5, min_savings_usd_h=1)
    assert same.kind == "none" and not same.triggers and same.running_cost_new == pytest.approx(11.0)
    dearer = decide([MIXED], new_plan, [_offer("h1", "H100", 4.0), _offer("l1", "L40S", 2.0)], {},
                    min_savings_pct=5, min_savings_usd_h=1)
    assert dearer.running_cost_new == pytest.approx(12.0)
    assert any("l1 in aws/test-1: $1.5/h -> $2/h" in t for t in dearer.triggers)
    gone = decide([MIXED], new_plan, [_offer("h1", "H100", 4.0)], {}, min_savings_pct=5, min_savings_usd_h=1)
    assert any("l1 in aws/test-1 is no longer offered" in t for t in gone.triggers)
    capped = decide([MIXED], new_plan, [_offer("h1", "H100", 4.0), _offer("l1", "L40S", 1.5)],
                    {("aws", "test-1", "L40S"): 1}, min_savings_pct=5, min_savings_usd_h=1)
    assert any("L40S in aws/test-1: 2 GPUs run but only 1" in t for t in capped.triggers)
