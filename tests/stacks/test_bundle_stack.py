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
    assert asg["desiredCapacity"] == Plan.of(plan).allocations[0].count  # a replica is the whole node
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
