"""CrossGuard policies run over the resources the programs register under mocks."""

from __future__ import annotations

import pytest

pytest.importorskip("pulumi_policy")
from pulumi_policy import ResourceValidationArgs  # noqa: E402

from hetinfra.stacks.policies import POLICIES  # noqa: E402
from tests.stacks.test_program import run_program  # noqa: E402


def violations(mocks, *, port=8000, allowed=()) -> list[tuple[str, str, str]]:
    found = []
    for a in mocks.created:
        for policy in POLICIES:
            args = ResourceValidationArgs(resource_type=a.typ, props=a.inputs, urn=f"urn:{a.name}", name=a.name,
                                          opts=None, provider=None,
                                          config={"port": port, "allowedCidrs": list(allowed)})
            policy.validate(args, lambda msg, urn=None, p=policy, n=a.name: found.append((p.name, n, msg)))
    return found


def test_generated_fleets_pass_every_policy(mocks, three_cloud_plan):
    run_program(three_cloud_plan)
    assert violations(mocks, allowed=three_cloud_plan["deploy"]["ingress_cidrs"]) == []
    assert len(mocks.created) > 30  # the policies really saw the whole graph


def test_world_open_port_is_a_violation_unless_declared(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["ingress_cidrs"] = ["0.0.0.0/0"]
    three_cloud_plan["deploy"]["ssh_cidrs"] = ["0.0.0.0/0"]
    run_program(three_cloud_plan)
    found = violations(mocks, allowed=[])
    port_hits = {n for p, n, _ in found if p == "vllm-port-not-open-to-world"}
    assert port_hits == {"demo-aws-us-east-1-sg", "demo-aws-us-west-2-sg", "demo-gcp-us-central1-fw-vllm",
                         "demo-azure-eastus-nsg"}
    assert {n for p, n, _ in found if p == "ssh-not-open-to-world"} == {
        "demo-aws-us-east-1-sg", "demo-aws-us-west-2-sg", "demo-gcp-us-central1-fw-ssh", "demo-azure-eastus-nsg"}
    # Declared: the port rule is accepted, SSH to the world never is.
    assert {p for p, _, _ in violations(mocks, allowed=["0.0.0.0/0"])} == {"ssh-not-open-to-world"}


def _check(typ: str, props: dict) -> list[str]:
    out = []
    for policy in POLICIES:
        policy.validate(ResourceValidationArgs(resource_type=typ, props=props, urn="u", name="n", opts=None,
                                               provider=None, config={"port": 8000, "allowedCidrs": []}),
                        lambda msg, urn=None: out.append(msg))
    return out


def test_gpu_vm_hygiene_catches_hand_edits():
    gce = {"guestAccelerators": [{"type": "nvidia-l4", "count": 1}], "scheduling": {"onHostMaintenance": "MIGRATE"},
           "labels": {"hetinfra-service": "s", "hetinfra-unit": "u"}}
    assert any("TERMINATE" in m for m in _check("gcp:compute/instance:Instance", gce))
    template = dict(gce, scheduling={"onHostMaintenance": "MIGRATE", "provisioningModel": "SPOT"})
    assert any("TERMINATE" in m for m in _check("gcp:compute/instanceTemplate:InstanceTemplate", template))
    assert any("tags" in m for m in _check("azure-native:compute:VirtualMachineScaleSet", {"tags": {"Name": "x"}}))
    ec2 = {"tags": {"hetinfra-service": "s"}, "metadataOptions": {"httpTokens": "optional"}}
    msgs = _check("aws:ec2/instance:Instance", ec2)
    assert any("IMDSv2" in m for m in msgs) and any("tags" in m for m in msgs)
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 7000, "toPort": 9000, "cidrBlocks": ["0.0.0.0/0"]}]}
    assert any("port 8000" in m for m in _check("aws:ec2/securityGroup:SecurityGroup", sg))
    nsg = {"securityRules": [{"direction": "Inbound", "access": "Allow", "destinationPortRange": "*",
                              "sourceAddressPrefix": "Internet"}]}
    assert len(_check("azure-native:network:NetworkSecurityGroup", nsg)) == 2  # vLLM port and SSH
