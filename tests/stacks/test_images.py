"""Images pinned by id (hetinfra.compile.images) under Pulumi's mocks: without a pin the lookup's
newest image is used; with one, the pinned id is used whatever the lookup finds, so a new image
release changes nothing; the `images` output says both."""

from __future__ import annotations

import copy

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.stacks.common import FleetSecrets  # noqa: E402
from tests.stacks.conftest import as_plan  # noqa: E402
from tests.stacks.test_program import by_name  # noqa: E402

NEW_AMI = "ami-0fffffffffffffff0"
PINNED_AMI = "ami-0aaaaaaaaaaaaaaa0"


def build(plan: dict, cloud: str, pins: dict | None = None) -> dict:
    """Run the program for one cloud with ``pins``; returns the resolved ``images`` output."""
    from hetinfra.stacks.program import build as program_build

    images: dict = {}

    @pulumi.runtime.test
    def run():
        fleets = program_build(as_plan(plan), cloud, FleetSecrets(api_key=pulumi.Output.secret("k")),
                               gcp_project="demo-project", images=pins)
        merged = {}
        for f in fleets:
            merged.update(f.images)
        return pulumi.Output.from_input(merged).apply(images.update)

    run()
    return images


def _gateway(plan):
    plan = copy.deepcopy(plan)
    plan["deploy"]["gateway"] = {"enabled": True, "port": 8080}
    return plan


def test_aws_uses_the_lookup_until_pinned_then_the_pin_whatever_the_lookup_finds(mocks, three_cloud_plan):
    plan = _gateway(three_cloud_plan)
    images = build(plan, "aws")
    assert images["us-east-1"]["gpu"] == {"id": mocks.newest_ami, "latest": mocks.newest_ami}
    lts = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    assert {lt["imageId"] for lt in lts.values()} == {mocks.newest_ami}

    # A new DLAMI is released; us-east-1 is pinned (to what the first apply recorded), us-west-2 is not.
    first = {n: dict(i) for n, i in lts.items()}
    mocks.created.clear()
    mocks.newest_ami = NEW_AMI
    images = build(plan, "aws", {"us-east-1": {"gpu": PINNED_AMI, "gateway": PINNED_AMI}})
    lts = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    east = [n for n in lts if "us-east-1" in n]
    assert east and all(lts[n]["imageId"] == PINNED_AMI for n in east)
    assert all(lts[n]["imageId"] == NEW_AMI for n in lts if n not in east)
    gateways = by_name(mocks, "aws:ec2/instance:Instance")
    assert gateways["demo-aws-us-east-1-gateway"]["ami"] == PINNED_AMI
    assert gateways["demo-aws-us-west-2-gateway"]["ami"] == NEW_AMI
    assert images["us-east-1"]["gpu"] == {"id": PINNED_AMI, "latest": NEW_AMI}  # the newer one shows, unused
    # pinned to the id the first run used, a new release leaves the launch templates as they were
    mocks.created.clear()
    build(plan, "aws", {"us-east-1": {"gpu": first[east[0]]["imageId"]}})
    again = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    assert {n: again[n] for n in east} == {n: first[n] for n in east}


def test_gcp_resolves_the_family_to_a_concrete_image_and_keeps_a_pin(mocks, three_cloud_plan):
    plan = _gateway(three_cloud_plan)
    images = build(plan, "gcp")
    found = images["us-central1"]["gpu"]["id"]
    assert found.endswith("/projects/deeplearning-platform-release/global/images/"
                          "common-cu124-v20250101-ubuntu-2204-py310") and "/family/" not in found
    templates = by_name(mocks, "gcp:compute/instanceTemplate:InstanceTemplate")
    assert templates and {t["disks"][0]["sourceImage"] for t in templates.values()} == {found}
    gateway = by_name(mocks, "gcp:compute/instance:Instance")["demo-gcp-us-central1-gateway"]
    assert gateway["bootDisk"]["initializeParams"]["image"].endswith("/projects/ubuntu-os-cloud/global/images/"
                                                                     "common-cu124-v20250101-ubuntu-2204-py310")
    first = {n: t["disks"] for n, t in templates.items()}
    mocks.created.clear()
    mocks.newest_gce_image = "common-cu124-v20260101-ubuntu-2204-py310"
    images = build(plan, "gcp", {"us-central1": {"gpu": found}})
    # the pinned templates are unchanged (no MIG sees a new template); the unpinned gateway moves
    again = by_name(mocks, "gcp:compute/instanceTemplate:InstanceTemplate")
    assert {n: t["disks"] for n, t in again.items()} == first
    assert images["us-central1"]["gpu"]["latest"].endswith("common-cu124-v20260101-ubuntu-2204-py310")
    assert images["us-central1"]["gateway"]["id"].endswith("common-cu124-v20260101-ubuntu-2204-py310")


def _vmss_images(mocks) -> list[dict]:
    return [v["virtualMachineProfile"]["storageProfile"]["imageReference"]
            for v in by_name(mocks, "azure-native:compute:VirtualMachineScaleSet").values()]


def test_azure_pins_a_concrete_version_instead_of_latest(mocks, three_cloud_plan):
    images = build(three_cloud_plan, "azure")
    assert {r["version"] for r in _vmss_images(mocks)} == {"latest"}
    assert images["eastus"]["gpu"]["id"] == "latest"
    mocks.created.clear()
    build(three_cloud_plan, "azure", {"eastus": {"gpu": "22.04.2025010101"}})
    refs = _vmss_images(mocks)
    assert refs and all(r == {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204",
                              "version": "22.04.2025010101"} for r in refs)
