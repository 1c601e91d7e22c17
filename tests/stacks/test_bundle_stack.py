"""A prefill/decode bundle through the Pulumi program under mocks: the AWS group runs the planned
count of bundle nodes, and each node's boot script holds both roles' engines, the hop and its plan
(hetinfra.compile.bundle), within EC2's 16 KB of user data."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.document import Plan  # noqa: E402
from tests.compile.split_plan import UNIT, split_plan  # noqa: E402
from tests.stacks.test_program import by_name, run_program  # noqa: E402

EC2_USER_DATA_MAX = 16 * 1024  # bytes before base64 (EC2 user data limit)


@pytest.mark.parametrize("runtime", ["container", "virtualenv"])
def test_the_aws_group_boots_bundle_nodes(mocks, runtime, tmp_path):
    plan = split_plan("2P1D", runtime=runtime)
    run_program(plan, clouds=("aws",))
    asg = by_name(mocks, "aws:autoscaling/group:Group")[f"{UNIT}-asg"]
    assert asg["desiredCapacity"] == Plan.parse(plan).allocations[0].count  # a replica is the whole node
    (lt,) = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate").values()
    raw = base64.b64decode(lt["userData"])
    assert len(raw) <= EC2_USER_DATA_MAX
    script = raw.decode()
    assert script.count("--kv-transfer-config") == 3  # two prefill engines, one decode engine
    assert "/opt/hetinfra/hop/venv/bin/hetinfra gateway /opt/hetinfra/hop/plan.json" in script
    assert "HETINFRA_PACKAGE=" in script
    hop = script.split("<<'HOPPLAN'\n", 1)[1].split("\nHOPPLAN\n", 1)[0]
    assert [a["deployment_unit"] for a in json.loads(hop)["allocations"]] == [UNIT]
    if runtime == "container":  # the hop's virtualenv and plan are where the container's script looks
        assert "-v /opt/hetinfra/hop:/opt/hetinfra/hop" in script
    (tmp_path / "boot.sh").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "boot.sh")], capture_output=True).returncode == 0


def _moved(cloud: str, region: str, itype: str) -> dict:
    """The split plan's bundle on another cloud's 8 x H200 (or H100) instance type."""
    plan = split_plan("2P1D", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAItest user@host")
    a = plan["allocations"][0]
    a.update(cloud=cloud, region=region, instance_type=itype)
    a["unit"] = a["unit"].replace("aws|p5en.48xlarge", f"{cloud}|{itype}").replace("us-east-1", region)
    for rows in plan["routing"]["qwen32"].values():
        for r in rows:
            r["unit"] = a["unit"]
    return Plan.parse(plan).to_dict()


def test_gcp_and_azure_groups_boot_bundle_nodes(mocks):
    from tests.stacks.test_program import unwrap

    run_program(_moved("gcp", "us-central1", "a3-ultragpu-8g"), clouds=("gcp",))
    (template,) = by_name(mocks, "gcp:compute/instanceTemplate:InstanceTemplate").values()
    run_program(_moved("azure", "eastus", "Standard_ND96isr_H100_v5"), clouds=("azure",))
    (vmss,) = by_name(mocks, "azure-native:compute:VirtualMachineScaleSet").values()
    scripts = [unwrap(template["metadataStartupScript"]),
               base64.b64decode(unwrap(vmss["virtualMachineProfile"]["osProfile"]["customData"])).decode()]
    for script in scripts:
        assert script.count("--kv-transfer-config") == 3 and "<<'HOPPLAN'" in script
        assert "/opt/hetinfra/hop/venv/bin/hetinfra gateway /opt/hetinfra/hop/plan.json" in script
