"""How `replan --apply` checks new capacity from the cron host (hetinfra.deploy.health): the way
chosen per unit, and the gateway way against the real gateway on loopback."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from hetinfra.deploy import health
from hetinfra.document import Allocation, Plan
from tests.plan.golden_plans import golden_allocation, golden_plan_with
from tests.gateway.conftest import UNITS, make_plan, procs, write_out  # noqa: F401  (procs: a fixture)


def _alloc(cloud):
    return Allocation.model_validate(golden_allocation(deployment_unit=f"u-{cloud}", cloud=cloud, region="r", count=1))


def _plan(deploy):
    return Plan.parse(golden_plan_with([], deploy=deploy))


@pytest.mark.parametrize("deploy, path, cloud, expected", [
    ({"gateway": {"enabled": True}, "ingress_cidrs": ["10.0.0.0/8"]}, "pulumi", "gcp", health.CLOUD),
    ({"gateway": {"enabled": True}, "ingress_cidrs": []}, "pulumi", "aws", health.CLOUD),
    ({}, "pulumi", "aws", health.CLOUD),
    ({}, "pulumi", "gcp", health.CLOUD),  # the MIGs' autohealer health
    ({}, "pulumi", "azure", health.CLOUD),  # the scale sets' health extension
    ({"management_cidrs": ["198.51.100.7/32"]}, "pulumi", "azure", health.CLOUD),
    ({}, "skypilot", "gcp", health.SKYSERVE),
])
def test_the_way_each_unit_is_checked(deploy, path, cloud, expected):
    # every Pulumi cloud's groups count serving replicas; a unit's load balancer (and the gateway,
    # whose backend it is) answers /health once any replica serves, so the cloud's count comes first
    assert health.method(_plan(deploy), _alloc(cloud), path) == expected


@pytest.mark.parametrize("deploy, expected", [
    ({"gateway": {"enabled": True}, "ingress_cidrs": ["10.0.0.0/8"]}, health.GATEWAY),
    ({"management_cidrs": ["198.51.100.7/32"]}, health.DIRECT),
    ({"ingress_cidrs": ["0.0.0.0/0"]}, health.DIRECT),
    ({"gateway": {"enabled": True}, "ingress_cidrs": []}, None),  # nobody reaches the gateway
    ({}, None),
])
def test_a_cloud_without_a_signal_falls_back_to_the_gateway_or_a_direct_check(deploy, expected, monkeypatch):
    monkeypatch.setattr(health, "CLOUD_SIGNAL", {})
    assert health.method(_plan(deploy), _alloc("gcp"), "pulumi") == expected
    assert health.unchecked_units(_plan(deploy), [(_alloc("gcp"), "pulumi")]) == ([] if expected else ["u-gcp"])


def test_health_through_the_real_gateway(procs, tmp_path, monkeypatch):
    monkeypatch.setattr(health, "CLOUD_SIGNAL", {})  # the way for a cloud without a signal of its own
    source = write_out(tmp_path / "gw")
    plan = make_plan()
    _, ok1 = procs.backend("A")
    _, ok2 = procs.backend("B")
    _, sick = procs.backend("C", mode="sick")
    _, url = procs.gateway(source, [f"{UNITS['u1']}={ok1}", f"{UNITS['u2']}={ok2}", f"{UNITS['u3']}={sick}"])
    plan["deploy"] = {"gateway": {"enabled": True}, "ingress_cidrs": ["10.0.0.0/8"]}
    state = {"state_version": 1, "service": "chat", "endpoints": {}, "pulumi": {},
             "allocations": [dict(a, path="pulumi") for a in plan["allocations"]],
             "gateways": {"chat-aws-us-east-1": url + "/v1", "chat-gcp-us-central1": url + "/v1"}}
    # the gateway counts a backend healthy until it failed 2 checks (0.2 s apart here): a unit must stay healthy
    kw = dict(env={}, interval_s=0.2, settle_s=1.0)
    plan = Plan.parse(plan)
    # the two waits run side by side, each from the gateway's start as before (each call keeps its own
    # settle clock): the sick unit's timeout and the healthy pair's settle overlap instead of adding up
    with ThreadPoolExecutor(2) as pool:
        sick_pair = pool.submit(health.wait_healthy, plan, state, [UNITS["u1"], UNITS["u3"]], timeout_s=2.0, **kw)
        ok_pair = pool.submit(health.wait_healthy, plan, state, [UNITS["u1"], UNITS["u2"]], timeout_s=4.0, **kw)
        assert sick_pair.result() == [UNITS["u3"]]
        assert ok_pair.result() == []
