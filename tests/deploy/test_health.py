"""How `replan --apply` checks new capacity from the cron host (hetinfra.deploy.health): the way
chosen per unit, and the gateway way against the real gateway on loopback."""

from __future__ import annotations

import pytest

from hetinfra.deploy import health
from tests.gateway.conftest import UNITS, make_plan, procs, write_out  # noqa: F401  (procs: a fixture)


def _alloc(cloud):
    return {"deployment_unit": f"u-{cloud}", "cloud": cloud, "region": "r", "count": 1}


@pytest.mark.parametrize("deploy, path, cloud, expected", [
    ({"gateway": {"enabled": True}, "ingress_cidrs": ["10.0.0.0/8"]}, "pulumi", "gcp", health.GATEWAY),
    ({"gateway": {"enabled": True}, "ingress_cidrs": []}, "pulumi", "aws", health.CLOUD),  # nobody reaches it
    ({}, "pulumi", "aws", health.CLOUD),
    ({}, "skypilot", "gcp", health.SKYSERVE),
    ({"management_cidrs": ["198.51.100.7/32"]}, "pulumi", "gcp", health.DIRECT),
    ({"ingress_cidrs": ["0.0.0.0/0"]}, "pulumi", "azure", health.DIRECT),
    ({"gateway": {"enabled": True}, "ingress_cidrs": []}, "pulumi", "azure", None),
    ({}, "pulumi", "gcp", None),
])
def test_the_way_each_unit_is_checked(deploy, path, cloud, expected):
    assert health.method({"deploy": deploy}, _alloc(cloud), path) == expected


def test_health_through_the_real_gateway(procs, tmp_path):
    source = write_out(tmp_path / "gw")
    plan = make_plan()
    _, ok1 = procs.backend("A")
    _, ok2 = procs.backend("B")
    _, sick = procs.backend("C", mode="sick")
    _, url = procs.gateway(source, [f"{UNITS['u1']}={ok1}", f"{UNITS['u2']}={ok2}", f"{UNITS['u3']}={sick}"])
    plan["deploy"] = {"gateway": {"enabled": True}, "ingress_cidrs": ["10.0.0.0/8"]}
    state = {"service": "chat", "endpoints": {}, "pulumi": {},
             "allocations": [dict(a, path="pulumi") for a in plan["allocations"]],
             "gateways": {"chat-aws-us-east-1": url + "/v1", "chat-gcp-us-central1": url + "/v1"}}
    # the gateway counts a backend healthy until it failed 2 checks (0.2 s apart here): a unit must stay healthy
    kw = dict(env={}, interval_s=0.2, settle_s=1.0)
    assert health.wait_healthy(plan, state, [UNITS["u1"], UNITS["u3"]], timeout_s=2.0, **kw) == [UNITS["u3"]]
    assert health.wait_healthy(plan, state, [UNITS["u1"], UNITS["u2"]], timeout_s=4.0, **kw) == []
