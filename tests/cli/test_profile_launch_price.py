"""`profile --launch` quotes the price of what it launches (on demand: `use_spot: false`), never a
spot unit's spot price, and long cluster names stay distinct when shortened."""

from __future__ import annotations

from hetinfra.cli.profile_launch import bench_tasks, launch_price
from hetinfra.document import Plan
from hetinfra.facts import fit_label
from tests.plan.golden_plans import golden_allocation, golden_plan_with


def _alloc(**kw) -> dict:
    base = dict(unit="u", deployment_unit="u", count=1, instances=1, nodes_per_replica=1, gpus_per_instance=1,
                cloud="aws", region="us-east-1", instance_type="p5.48xlarge", gpu="H100", spot=True,
                price_per_instance_usd_per_hour=1.26, cost_usd_per_hour=1.26, confidence="extrapolated")
    return golden_allocation(**{**base, **kw})


def test_a_spot_unit_is_quoted_at_the_on_demand_price_it_launches_at():
    spot = _alloc()
    doc = Plan.parse(golden_plan_with([spot], cost_usd_per_hour=1.26))
    a = doc.allocations[0]
    assert launch_price(a, {("aws", "us-east-1", "p5.48xlarge"): 6.05}) == 6.05
    assert launch_price(a, {}) is None  # unknown: said so, never the spot price
    with_fallback = Plan.parse(golden_plan_with([_alloc(ondemand_fallback={"price_per_hour": 6.1})],
                                                cost_usd_per_hour=1.26)).allocations[0]
    assert launch_price(with_fallback) == 6.1
    on_demand = Plan.parse(golden_plan_with([_alloc(spot=False)], cost_usd_per_hour=1.26)).allocations[0]
    assert launch_price(on_demand) == 1.26
    [task] = bench_tasks(doc, on_demand={("aws", "us-east-1", "p5.48xlarge"): 6.05})
    assert task.cost_usd == round(6.05 * task.hours, 2)


def test_shortened_names_stay_distinct_and_fit():
    names = [f"hetinfra-profile-{'x' * 50}-{k}" for k in range(50)] + ["short"]
    fitted = [fit_label(n) for n in names]
    assert len(set(fitted)) == len(names) and all(len(f) <= 63 for f in fitted)
    assert fit_label("short") == "short" and fit_label("a" * 63) == "a" * 63


def test_kubernetes_pool_names_stay_distinct_when_shortened():
    from hetinfra.compile.kubernetes.nodes import pool_name

    service = "s" * 40
    names = {pool_name(service, f"{'x' * 30}.{k}xlarge", spot) for k in range(20) for spot in (False, True)}
    assert len(names) == 40 and all(len(n) <= 63 for n in names)
