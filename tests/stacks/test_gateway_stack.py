"""The gateway VM and its firewall in the AWS stack (Pulumi mocks): clients reach the gateway only,
the vLLM port is open to the gateway's security group only, secrets stay secret."""

from __future__ import annotations

import pytest

pulumi = pytest.importorskip("pulumi")

from tests.stacks.test_program import by_name, run_program, unwrap  # noqa: E402


def test_aws_gateway_vm_and_firewall(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["gateway"] = {"enabled": True, "port": 8443, "aws_instance_type": "c7i.large",
                                             "package": "hetinfra==0.1.0", "tls_cert": "cert.pem", "tls_key": "key.pem"}
    run_program(three_cloud_plan, clouds=("aws",))
    vms = by_name(mocks, "aws:ec2/instance:Instance")
    gateways = {n: v for n, v in vms.items() if n.endswith("-gateway")}
    assert sorted(gateways) == ["demo-aws-us-east-1-gateway", "demo-aws-us-west-2-gateway"]  # one per fleet region
    gw = gateways["demo-aws-us-east-1-gateway"]
    assert gw["instanceType"] == "c7i.large" and gw["tags"]["hetinfra-role"] == "gateway"
    script = unwrap(gw["userData"])
    assert isinstance(gw["userData"], dict)  # a secret: it carries the backend key
    assert "hetinfra gateway /etc/hetinfra/plan.json --host 0.0.0.0 --port 8443 --region us-east-1" in script
    assert "--tls-cert /etc/hetinfra/tls.crt" in script and "pip install -q hetinfra==0.1.0" in script
    # backends by private address, one per replica head of the region's units
    assert script.count("--endpoint chat-8b-aws-us-east-1-g6-12xlarge=http://10.42.0.") == 2
    sgs = by_name(mocks, "aws:ec2/securityGroup:SecurityGroup")
    gw_sg, fleet_sg = sgs["demo-aws-us-east-1-gateway-sg"], sgs["demo-aws-us-east-1-sg"]
    assert [r["fromPort"] for r in gw_sg["ingress"] if r.get("cidrBlocks") == ["10.0.0.0/8"]] == [8443]
    assert not [r for r in fleet_sg["ingress"] if r.get("cidrBlocks")]  # no backend port open to clients
    rules = by_name(mocks, "aws:ec2/securityGroupRule:SecurityGroupRule")
    rule = rules["demo-aws-us-east-1-vllm-from-gateway"]
    assert rule["fromPort"] == 8000 and rule["sourceSecurityGroupId"] == "demo-aws-us-east-1-gateway-sg-id"
    assert "cidrBlocks" not in rule


def test_no_gateway_by_default_keeps_the_fleet_as_it_was(mocks, three_cloud_plan):
    run_program(three_cloud_plan, clouds=("aws",))
    assert not [n for n in by_name(mocks, "aws:ec2/instance:Instance") if n.endswith("-gateway")]
