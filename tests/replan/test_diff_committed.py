"""Re-planning against a running committed base: its price is the commitment's, not today's on-demand."""

from __future__ import annotations

import pytest

from hetinfra.document import Allocation, Plan
from hetinfra.price_feeds.offers import Offer
from hetinfra.replan.diff import decide
from tests.plan.golden_plans import golden_allocation, golden_plan_with

BASE = golden_allocation(unit="c", cloud="gcp", region="us-east4", instance_type="g2-standard-4", gpu="L4",
                         gpus_per_instance=1, count=2, instances=2, spot=False, custom_cloud=False,
                         deployment_unit="m-gcp-us-east4-g2-standard-4-c1y", skypilot_task=None, cost_usd_per_hour=0.9,
                         price_per_instance_usd_per_hour=0.45, purchase="committed_1y")


def test_running_commitment_is_not_repriced_at_on_demand():
    offer = Offer("gcp", "us-east4", "g2-standard-4", "L4", 1, 24, 4, 16, 0.70452, None, "2025-11-01", "test")
    d = decide([Allocation.model_validate(BASE)], Plan.parse(golden_plan_with([BASE], cost_usd_per_hour=0.9)), [offer], {},
               min_savings_pct=5, min_savings_usd_h=1)
    assert d.kind == "none" and not d.triggers and d.running_cost_new == pytest.approx(0.9)
    on_demand = dict(BASE, purchase="on_demand")  # an on-demand unit is re-priced as before
    d = decide([Allocation.model_validate(on_demand)], Plan.parse(golden_plan_with([on_demand], cost_usd_per_hour=0.9)),
               [offer], {},
               min_savings_pct=5, min_savings_usd_h=1)
    assert d.running_cost_new == pytest.approx(2 * 0.70452) and d.triggers


def test_one_price_move_is_one_trigger_line_however_many_units_share_the_type():
    """Two running units on one instance type saw the same price change: the trigger was listed twice
    (replan audit Q3)."""
    offer = Offer("gcp", "us-east4", "g2-standard-4", "L4", 1, 24, 4, 16, 0.70452, None, "2025-11-01", "test")
    a = dict(BASE, purchase="on_demand")
    b = dict(a, unit="d", deployment_unit="m-gcp-us-east4-g2-standard-4-d")
    d = decide([Allocation.model_validate(a), Allocation.model_validate(b)],
               Plan.parse(golden_plan_with([a, b], cost_usd_per_hour=1.8)), [offer], {},
               min_savings_pct=5, min_savings_usd_h=1)
    price = [t for t in d.triggers if "g2-standard-4" in t]
    assert len(price) == 1 and "+56.6%" in price[0], d.triggers
