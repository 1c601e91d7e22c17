"""The global entry point per cloud (issue 25) under Pulumi mocks: with routing by origin and a
gateway per region, Route 53 latency records (given a hosted zone), a GCP global external load
balancer, and an Azure Traffic Manager profile, each over that cloud's regional gateways; nothing
for a plan without origins."""

from __future__ import annotations

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.stacks.common import FleetSecrets  # noqa: E402
from hetinfra.stacks.fleet import fleets_for  # noqa: E402
from tests.stacks.conftest import as_plan  # noqa: E402
from tests.stacks.test_gateway_stack import GATEWAY  # noqa: E402
from tests.stacks.test_program import API_KEY, by_name  # noqa: E402

ZONE = {"dnsZoneId": "Z0123456789ABC", "dnsName": "api.example.com"}


@pytest.fixture
def origin_plan(three_cloud_plan):
    plan = three_cloud_plan
    plan["deploy"]["gateway"] = dict(GATEWAY)
    # each origin routes chat-8b's classes as the plan does (every class with demand is routed: Plan checks it)
    units = {a["unit"]: a for a in plan["allocations"]}
    rows = {c: [{**r, "deployment_unit": units[r["unit"]]["deployment_unit"], "region": units[r["unit"]]["region"],
                 "network_ms": 0.0} for r in per] for c, per in plan["routing"]["chat-8b"].items()}
    plan["routing_by_origin"] = {"chat-8b": {"us-east-1": rows, "us-west-2": rows}}
    # a second GCP region, so the GCP load balancer has two backends
    extra = dict(plan["allocations"][2], region="europe-west4", deployment_unit="big-70b-gcp-europe-west4-a2",
                 unit="big-70b|gcp|a2-highgpu-4g|europe-west4", skypilot_task="skypilot/big-70b-gcp-europe-west4-a2.yaml")
    plan["allocations"].append(extra)
    return plan


@pytest.fixture
def gmocks(mocks):
    """The shared mocks, plus the address Google gives a global address."""
    base = mocks.new_resource

    def new_resource(args):
        rid, out = base(args)
        if args.typ == "gcp:compute/globalAddress:GlobalAddress":
            out["address"] = "34.120.0.10"
        return rid, out

    mocks.new_resource = new_resource
    return mocks


def entry_url(plan: dict, cloud: str, config: dict | None = None):
    from hetinfra.stacks.global_entry import global_entry
    from hetinfra.stacks.program import build

    resolved: list = []

    @pulumi.runtime.test
    def run():
        secrets = FleetSecrets(api_key=pulumi.Output.secret(API_KEY))
        doc = as_plan(plan)
        fleets = build(doc, cloud, secrets, gcp_project="demo-project")
        regions = [a.region for a in fleets_for(doc, cloud)]
        url = global_entry(doc, cloud, list(zip(regions, fleets)), config)
        return pulumi.Output.from_input(url).apply(resolved.append)

    run()
    return resolved[0]


def test_aws_route53_latency_records_per_gateway_region(mocks, origin_plan):
    url = entry_url(origin_plan, "aws", ZONE)
    assert url == "https://api.example.com:8443/v1"
    records = by_name(mocks, "aws:route53/record:Record")
    assert sorted(r["setIdentifier"] for r in records.values()) == ["us-east-1", "us-west-2"]
    for r in records.values():
        assert r["zoneId"] == ZONE["dnsZoneId"] and r["name"] == ZONE["dnsName"] and r["type"] == "A"
        assert r["latencyRoutingPolicies"] == [{"region": r["setIdentifier"]}] and r["healthCheckId"]
        assert r["records"][0].startswith("203.0.113.")  # the gateway VM's public IP
    checks = by_name(mocks, "aws:route53/healthCheck:HealthCheck")
    assert len(checks) == 2 and all(c["resourcePath"] == "/health" and c["port"] == 8443 and c["type"] == "HTTPS"
                                    for c in checks.values())


def test_aws_without_a_hosted_zone_creates_nothing(mocks, origin_plan):
    assert entry_url(origin_plan, "aws") is None
    assert by_name(mocks, "aws:route53/record:Record") == {}


def test_gcp_global_load_balancer_over_both_gateways(gmocks, origin_plan):
    mocks = gmocks
    url = entry_url(origin_plan, "gcp")
    groups = by_name(mocks, "gcp:compute/instanceGroup:InstanceGroup")
    assert sorted(groups) == ["demo-gcp-global-europe-west4-ig", "demo-gcp-global-us-central1-ig"]
    assert all(g["namedPorts"] == [{"name": "gateway", "port": 8443}] for g in groups.values())
    (bs,) = by_name(mocks, "gcp:compute/backendService:BackendService").values()
    assert bs["loadBalancingScheme"] == "EXTERNAL_MANAGED" and bs["protocol"] == "HTTPS" and len(bs["backends"]) == 2
    hc = by_name(mocks, "gcp:compute/healthCheck:HealthCheck")["demo-gcp-global-hc"]
    assert hc["httpsHealthCheck"] == {"port": 8443, "requestPath": "/health"}
    fw = by_name(mocks, "gcp:compute/firewall:Firewall")
    hc_rules = [f for n, f in fw.items() if n.endswith("-fw-hc")]
    assert len(hc_rules) == 2 and all(f["sourceRanges"] == ["35.191.0.0/16", "130.211.0.0/22"] for f in hc_rules)
    (fr,) = by_name(mocks, "gcp:compute/globalForwardingRule:GlobalForwardingRule").values()
    assert fr["loadBalancingScheme"] == "EXTERNAL_MANAGED" and fr["portRange"] == "80"
    assert url == "http://34.120.0.10/v1"


def test_azure_traffic_manager_performance_routing(mocks, origin_plan):
    url = entry_url(origin_plan, "azure")
    (tm,) = by_name(mocks, "azure-native:trafficmanager:Profile").values()
    assert tm["trafficRoutingMethod"] == "Performance" and tm["location"] == "global"
    assert tm["monitorConfig"] == {"path": "/health", "port": 8443, "protocol": "HTTPS"}
    (ep,) = tm["endpoints"]
    assert ep["endpointLocation"] == "eastus" and ep["target"].startswith("192.0.2.")
    assert url == f"https://{tm['dnsConfig']['relativeName']}.trafficmanager.net:8443/v1"


def test_no_entry_point_without_origins(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["gateway"] = dict(GATEWAY)
    assert entry_url(three_cloud_plan, "azure") is None and entry_url(three_cloud_plan, "aws", ZONE) is None
    assert by_name(mocks, "azure-native:trafficmanager:Profile") == {}
