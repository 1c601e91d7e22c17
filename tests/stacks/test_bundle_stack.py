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
from hetinfra.errors import InvalidInputError  # noqa: E402
from tests.compile.split_plan import UNIT, split_plan  # noqa: E402
from tests.plan.golden_plans import totals_added_up  # noqa: E402
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
    plan = split_plan("2P1D", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHetinfraTestKeyOnly user@host")
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


def _two_replicas(shape: str) -> dict:
    """``split_plan(shape)`` with 2 replicas (what the mocks need to see one placement group each)."""
    plan = split_plan(shape)
    a = plan["allocations"][0]
    a["count"], a["instances"] = 2, 2 * a["nodes_per_replica"]
    return Plan.parse(totals_added_up(plan)).to_dict()


def test_a_heterogeneous_bundle_across_nodes_boots_in_one_placement_group_over_efa(mocks, tmp_path):
    """Per replica: a cluster placement group holding a one-VM group per node, each node of its role's
    instance type with every EFA interface it has, in the private subnet behind a NAT gateway; the
    head's boot script looks the decode node up and runs the hop, the decode node's runs its engines
    only; each within EC2's 16 KB of user data and valid bash."""
    run_program(_two_replicas("hetero"), clouds=("aws",))
    pgs = by_name(mocks, "aws:ec2/placementGroup:PlacementGroup")
    assert {n: p["strategy"] for n, p in pgs.items()} == {f"{UNIT}-r0-pg": "cluster", f"{UNIT}-r1-pg": "cluster"}
    asgs = by_name(mocks, "aws:autoscaling/group:Group")
    assert sorted(asgs) == sorted(f"{UNIT}-r{r}-n{k}-asg" for r in (0, 1) for k in (0, 1))
    assert all(g["desiredCapacity"] == 1 and g["maxSize"] == 1 for g in asgs.values())  # a node replaced in place
    assert [g.get("targetGroupArns") or [] for n, g in sorted(asgs.items())].count([]) == 2  # decode nodes: no LB
    lts = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    for r in (0, 1):
        head, decode = lts[f"{UNIT}-r{r}-n0-lt"], lts[f"{UNIT}-r{r}-n1-lt"]
        assert (head["instanceType"], decode["instanceType"]) == ("p5en.48xlarge", "p4de.24xlarge")
        assert [len(lt["networkInterfaces"]) for lt in (head, decode)] == [16, 4]
        assert [i["interfaceType"] for i in decode["networkInterfaces"]] == ["efa", "efa-only", "efa-only", "efa-only"]
        assert "vpcSecurityGroupIds" not in decode
        scripts = [base64.b64decode(lt["userData"]) for lt in (head, decode)]
        assert all(len(raw) <= EC2_USER_DATA_MAX for raw in scripts)
        head_s, decode_s = (raw.decode() for raw in scripts)
        assert f"Values={UNIT}-r{r}-n1 " in head_s and "HETINFRA_PEERS=" in head_s and "hetinfra gateway" in head_s
        assert "hetinfra gateway" not in decode_s and "find-head" not in decode_s and "<<'HOPPLAN'" not in decode_s
        assert "expected 8 x A100-80GB" in decode_s and "--device=/dev/infiniband" in decode_s
        for i, text in enumerate((head_s, decode_s)):
            (tmp_path / f"boot{i}.sh").write_text(text)
            assert subprocess.run(["bash", "-n", str(tmp_path / f"boot{i}.sh")], capture_output=True).returncode == 0
    subnets = by_name(mocks, "aws:ec2/subnet:Subnet")
    private = [s for n, s in subnets.items() if "-subnet-private-" in n]
    assert len(private) == 1 and "mapPublicIpOnLaunch" not in private[0]
    assert len(by_name(mocks, "aws:ec2/natGateway:NatGateway")) == 1
    (sg,) = (g for n, g in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").items() if n.endswith("-sg"))
    assert any(e.get("self") for e in sg["egress"])  # EFA: all traffic to the group itself


@pytest.mark.parametrize("cloud, region, itype", [("gcp", "us-central1", "a3-ultragpu-8g"),
                                                  ("azure", "eastus", "Standard_ND96isr_H100_v5")])
def test_the_gcp_and_azure_programs_refuse_a_bundle_across_nodes(cloud, region, itype):
    from tests.compile.split_plan import across
    from hetinfra.stacks.fleet import fleets_for

    plan = _moved(cloud, region, itype)
    a = across(plan["allocations"][0])
    a["disaggregation"]["link"] = "roce" if cloud == "gcp" else "infiniband"
    with pytest.raises(InvalidInputError, match=f"the Pulumi stacks on {cloud} cannot place as planned"):
        fleets_for(Plan.parse(totals_added_up(plan)), cloud)


def test_the_heads_peer_lookup_writes_every_peer_in_rank_order_and_fails_bounded(tmp_path):
    """find-peers.sh run by bash against a stand-in `aws` CLI: the peers' IPs in rank order into the
    env file the head's service reads; a group with no running VM ends it (exit 1) after its tries."""
    from hetinfra.stacks.boot import HEAD_ENV, find_peers_script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text('#!/bin/bash\ncase "$*" in *Values=u-r0-n1\\ *) echo 10.0.0.7;; '
                                 '*Values=u-r0-n2\\ *) echo 10.0.0.9;; *) echo None;; esac\n')
    (bin_dir / "aws").chmod(0o755)
    env_file = tmp_path / "head.env"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def run(groups):
        script = find_peers_script("aws", groups, "us-east-1").replace(HEAD_ENV, str(env_file))
        script = script.replace("sleep 10", "sleep 0").replace("seq 1 90", "seq 1 3")
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=20)

    assert run(["u-r0-n2", "u-r0-n1"]).returncode == 0
    assert env_file.read_text() == "HETINFRA_PEERS=10.0.0.9 10.0.0.7\n"
    env_file.unlink()
    got = run(["u-r0-n1", "u-r0-n3"])
    assert got.returncode == 1 and "no running node in u-r0-n3" in got.stderr and not env_file.exists()
