"""The Pulumi programs under mocks: what they would create equals the plan, to the flag."""

from __future__ import annotations

import base64
import ipaddress
import json

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.document import Plan
from hetinfra.compile.artifacts import sky_units  # noqa: E402
from hetinfra.compile.engine import vllm_serve_command  # noqa: E402
from hetinfra.stacks.common import FleetSecrets  # noqa: E402
from tests.stacks.conftest import as_plan  # noqa: E402

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value on the wire
API_KEY = "sk-hetinfra-TOPSECRET"


def run_program(plan: dict, clouds=("aws", "gcp", "azure"), hf_token: str | None = "hf_SECRETTOKEN") -> dict:
    """Run the program for ``clouds`` under the active mocks; returns resolved endpoints."""
    from hetinfra.stacks.program import build

    resolved: dict = {}

    @pulumi.runtime.test
    def run():
        fleets = []
        for c in clouds:
            secrets = FleetSecrets(api_key=pulumi.Output.secret(API_KEY),
                                   hf_token=pulumi.Output.secret(hf_token) if hf_token else None)
            fleets += build(as_plan(plan), c, secrets, gcp_project="demo-project")
        endpoints = pulumi.Output.from_input({k: v for f in fleets for k, v in f.endpoints.items()})
        return endpoints.apply(resolved.update)

    run()
    return resolved


def unwrap(value):
    """A secret input's plain value (mocks see the engine's wire form)."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return value["value"]
    return value


def by_name(mocks, typ: str) -> dict:
    return {a.name: a.inputs for a in mocks.of(typ)}


def _lt_scripts(mocks) -> dict:
    """Launch template name -> its boot script (base64-decoded user data)."""
    return {n: base64.b64decode(i["userData"]).decode() for n, i in by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate").items()}


def test_aws_groups_equal_the_plan_and_heal(mocks, three_cloud_plan):
    run_program(three_cloud_plan, clouds=("aws",))
    assert by_name(mocks, "aws:ec2/instance:Instance") == {}  # no bare VMs: every GPU VM is in a group
    asgs = by_name(mocks, "aws:autoscaling/group:Group")
    assert sorted(asgs) == ["chat-8b-aws-us-east-1-g6-12xlarge-asg", "chat-8b-aws-us-west-2-g5-xlarge-spot-asg"]
    od, spot = asgs["chat-8b-aws-us-east-1-g6-12xlarge-asg"], asgs["chat-8b-aws-us-west-2-g5-xlarge-spot-asg"]
    assert (od["desiredCapacity"], od["minSize"], od["maxSize"]) == (2, 2, 2)  # the planned count
    assert od["healthCheckType"] == "ELB" and od["healthCheckGracePeriod"] == 1800
    assert od["targetGroupArns"] and od.get("capacityRebalance") is False and "mixedInstancesPolicy" not in od
    assert spot["capacityRebalance"] is True and spot["desiredCapacity"] == 1
    dist = spot["mixedInstancesPolicy"]["instancesDistribution"]
    assert dist["onDemandBaseCapacity"] == 0 and dist["spotAllocationStrategy"] == "price-capacity-optimized"
    assert spot["mixedInstancesPolicy"]["launchTemplate"]["overrides"] == [{"instanceType": "g5.xlarge"}]
    tgs = by_name(mocks, "aws:lb/targetGroup:TargetGroup")
    for tg in tgs.values():
        assert tg["healthCheck"]["path"] == "/health" and tg["healthCheck"]["protocol"] == "HTTP"
        assert tg["healthCheck"]["port"] == "8000"
    lts = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    units = {u.name: u for u in sky_units(Plan.parse(three_cloud_plan))}
    for name, lt in lts.items():
        unit = units[name[:-3]]
        assert lt["instanceType"] == unit.instance_type and lt["imageId"] == "ami-0123456789abcdef0"
        assert lt["metadataOptions"]["httpTokens"] == "required"
        assert lt["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 200
        script = base64.b64decode(lt["userData"]).decode()
        assert vllm_serve_command(unit) in script and "secretsmanager get-secret-value" in script
        assert "arn:aws:secretsmanager:" in script and API_KEY not in script
    # with deploy.autoscale the group may grow to the SkyServe bound (2x)
    # One provider per region; distinct VPC CIDRs per region.
    providers = by_name(mocks, "pulumi:providers:aws")
    assert {p["region"] for p in providers.values()} == {"us-east-1", "us-west-2"}
    vpcs = [v["cidrBlock"] for v in by_name(mocks, "aws:ec2/vpc:Vpc").values()]
    assert len(set(vpcs)) == 2 and "10.42.0.0/16" not in vpcs
    # The security group opens 8000 to the VPC (health checks) and the declared CIDR only, SSH not at all.
    for sg in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").values():
        cidr_rules = [r for r in sg["ingress"] if r.get("cidrBlocks")]
        assert [r["cidrBlocks"] for r in cidr_rules][1:] == [["10.0.0.0/8"]]
        assert all(r["fromPort"] == 8000 and "0.0.0.0/0" not in r["cidrBlocks"] for r in cidr_rules)


def boot_texts(mocks) -> dict[str, str]:
    """Every boot script the programs registered, by resource name: EC2 launch templates' user data,
    GCE instance templates' and VMs' startup scripts, Azure scale sets' and VMs' custom data."""
    out = {}
    for a in mocks.created:
        i = a.inputs
        if a.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out[a.name] = base64.b64decode(i["userData"]).decode()
        elif a.typ == "aws:ec2/instance:Instance":
            out[a.name] = i["userData"]
        elif a.typ in ("gcp:compute/instanceTemplate:InstanceTemplate", "gcp:compute/instance:Instance"):
            out[a.name] = unwrap(i["metadataStartupScript"])
        elif a.typ == "azure-native:compute:VirtualMachineScaleSet":
            out[a.name] = base64.b64decode(unwrap(i["virtualMachineProfile"]["osProfile"]["customData"])).decode()
        elif a.typ == "azure-native:compute:VirtualMachine":
            out[a.name] = base64.b64decode(unwrap(i["osProfile"])["customData"]).decode()
    return out


def test_secret_store_reads_and_no_secret_in_boot_data(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["management_cidrs"] = ["198.51.100.7/32"]
    run_program(three_cloud_plan)
    # each cloud keeps the secrets in its store, written from the Pulumi secrets
    [v] = [a for a in mocks.of("aws:secretsmanager/secretVersion:SecretVersion") if "us-east-1" in a.name]
    assert json.loads(unwrap(v.inputs["secretString"])) == {"HF_TOKEN": "hf_SECRETTOKEN", "VLLM_API_KEY": API_KEY}
    [g] = mocks.of("gcp:secretmanager/secretVersion:SecretVersion")
    assert json.loads(unwrap(g.inputs["secretData"]))["VLLM_API_KEY"] == API_KEY
    [k] = mocks.of("azure-native:keyvault:Secret")
    assert json.loads(unwrap(unwrap(k.inputs["properties"])["value"]))["VLLM_API_KEY"] == API_KEY
    assert mocks.of("gcp:secretmanager/secretIamMember:SecretIamMember")
    # one Key Vault grant per scale set identity (its VMs share it)
    assert [a.name for a in mocks.of("azure-native:authorization:RoleAssignment")] == [
        "chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot-kv-reader"]
    boot = boot_texts(mocks)
    # 2 AWS launch templates, 2 GCE instance templates (pipeline head and worker), 1 Azure scale set
    assert len(boot) == 5 and len([n for n in boot if n.endswith("-vmss")]) == 1
    for name, text in boot.items():
        assert API_KEY not in text and "hf_SECRETTOKEN" not in text, name
        assert "/opt/hetinfra/fetch-secrets.sh" in text, name
    assert "gcloud secrets versions access latest --secret=hetinfra-demo-us-central1" in boot[
        "big-70b-gcp-us-central1-a2-highgpu-4g-r0-n0-it"]
    assert "https://hi-demo-012db8dd.vault.azure.net/secrets/hetinfra-secrets" in boot[
        "chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot-vmss"]
    for a in mocks.created:  # the key is a secret input of the stores only, nowhere else
        if "secretString" in a.inputs or "secretData" in a.inputs or a.typ == "azure-native:keyvault:Secret":
            continue
        assert API_KEY not in json.dumps(a.inputs, default=str), a.name
    # management CIDRs reach the vLLM port (the cron host's health checks), never 0.0.0.0/0
    fws = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert fws["demo-gcp-us-central1-fw-mgmt"]["sourceRanges"] == ["198.51.100.7/32"]
    for fw in fws.values():
        assert "0.0.0.0/0" not in (fw.get("sourceRanges") or [])


def test_every_fleet_has_its_own_network(mocks, three_cloud_plan):
    run_program(three_cloud_plan)
    nets = ([v["cidrBlock"] for v in by_name(mocks, "aws:ec2/vpc:Vpc").values()]
            + [s["ipCidrRange"] for s in by_name(mocks, "gcp:compute/subnetwork:Subnetwork").values()]
            + [v["addressSpace"]["addressPrefixes"][0] for v in by_name(mocks, "azure-native:network:VirtualNetwork").values()])
    assert len(nets) == 4  # AWS x2, GCP, Azure
    parsed = [ipaddress.ip_network(n) for n in nets]
    assert not any(a.overlaps(b) for i, a in enumerate(parsed) for b in parsed[i + 1:]), nets


def test_azure_without_ssh_key_is_a_clear_error(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["ssh_public_key"] = None
    with pytest.raises(ValueError, match="deploy.ssh_public_key"):
        run_program(three_cloud_plan, clouds=("azure",))


def test_port_and_runtime_follow_the_deploy_section(mocks, three_cloud_plan):
    three_cloud_plan["deploy"].update(port=9000, runtime="virtualenv", ingress_cidrs=[])
    run_program(three_cloud_plan, clouds=("aws",), hf_token=None)
    script = _lt_scripts(mocks)["chat-8b-aws-us-east-1-g6-12xlarge-lt"]
    assert "--port 9000" in script and "pip install -q vllm==0.11.0" in script and "docker" not in script
    assert "HF_TOKEN" not in script
    for sg in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").values():
        # nothing declared: only the VPC (load balancer health checks) reaches the vLLM port
        assert [r["cidrBlocks"] for r in sg["ingress"] if r.get("cidrBlocks")] == [
            [by_name(mocks, "aws:ec2/vpc:Vpc")[sg["description"] and n.replace("-sg", "-vpc")]["cidrBlock"]]
            for n in [k for k, v in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").items() if v is sg]]


def test_main_reads_stack_config_and_exports(mocks, three_cloud_plan, tmp_path, monkeypatch):
    from hetinfra.stacks import program

    (tmp_path / "plan.json").write_text(json.dumps(three_cloud_plan))
    monkeypatch.chdir(tmp_path)
    pulumi.runtime.set_all_config({"hetinfra:cloud": "aws", "hetinfra:apiKey": API_KEY},
                                  secret_keys=["hetinfra:apiKey"])
    exported = {}
    monkeypatch.setattr(program.pulumi, "export", lambda k, v: exported.__setitem__(k, v))

    @pulumi.runtime.test
    def run():
        program.main()
        return pulumi.Output.from_input(exported["endpoints"]).apply(lambda e: exported.__setitem__("resolved", e))

    run()
    assert sorted(exported["resolved"]) == ["chat-8b-aws-us-east-1-g6-12xlarge", "chat-8b-aws-us-west-2-g5-xlarge-spot"]
    assert len(exported["vms"]) == 2  # one Auto Scaling group per unit
    pulumi.runtime.set_all_config({})


def test_mixed_pipeline_nodes_types_and_mp_backend(mocks, tmp_path, run_cli):
    """A planned mixed pipeline (tests/solver/test_mixed_pipelines.py) becomes one VM per stage of
    the stage's instance type, each checking its own GPU and starting vLLM's mp backend at its rank."""
    import yaml

    from tests.solver.test_mixed_pipelines import _spec

    (tmp_path / "service.yaml").write_text(yaml.safe_dump(_spec(tmp_path, mixed=True)))
    code, _, err = run_cli("plan", str(tmp_path / "service.yaml"), "--out", str(tmp_path / "out"), "--no-verify")
    assert code == 0, err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    plan["deploy"] = {**plan["deploy"], "ingress_cidrs": ["10.0.0.0/8"]}
    run_program(plan, clouds=("aws",))
    vms = by_name(mocks, "aws:ec2/launchTemplate:LaunchTemplate")
    [a] = plan["allocations"]
    names = sorted(vms)
    assert names == [f"{a['deployment_unit']}-r0-n{k}-lt" for k in range(3)]  # one group per stage node
    asgs = by_name(mocks, "aws:autoscaling/group:Group")
    assert sorted(asgs) == [f"{a['deployment_unit']}-r0-n{k}-asg" for k in range(3)]
    assert [g["desiredCapacity"] for g in asgs.values()] == [1, 1, 1]
    assert len(mocks.of("aws:ec2/placementGroup:PlacementGroup")) == 1  # the replica stays together
    assert [vms[n]["instanceType"] for n in names] == [s["instance_type"] for s in a["stages"]]
    scripts = [_lt_scripts(mocks)[n] for n in names]
    partition = ",".join(str(s["layers"]) for s in a["stages"])
    for rank, (script, gpu) in enumerate(zip(scripts, [s["gpu"] for s in a["stages"]])):
        assert f"expected 1 x {gpu}, found" in script and f"NODE_RANK={rank}" in script
        assert f"VLLM_PP_LAYER_PARTITION={partition}" in script
        assert ('--distributed-executor-backend mp --nnodes 3 --node-rank "$NODE_RANK" --master-addr "$HEAD_IP"'
                in script) and "ray start" not in script
        assert "--max-num-seqs 256 --max-num-batched-tokens 2048" in script  # the smaller GPU's default
        assert "exec vllm serve" in script and "--headless" in script
    # workers find the head by its group's tag, with the instance profile
    assert f"Name=tag:hetinfra-group,Values={a['deployment_unit']}-r0-n0" in scripts[1]
    assert "find-head.sh" not in scripts[0].split("ExecStart")[0].split("FETCH")[-1]


def test_units_output_names_each_units_groups_as_created(mocks, three_cloud_plan):
    """`hetinfra status` finds a unit's groups in the refreshed state by the `units` output's
    resource name and type, and asks the cloud's API by its name (GCP: and project and zone) or
    ARM id: every member must be a group the program really creates, in VMGroup.groups order."""
    from hetinfra.stacks.program import build

    units: dict = {}

    @pulumi.runtime.test
    def run():
        fleets = []
        for c in ("aws", "gcp", "azure"):
            fleets += build(as_plan(three_cloud_plan), c, FleetSecrets(api_key=pulumi.Output.secret(API_KEY)),
                            gcp_project="demo-project")
        return pulumi.Output.from_input({k: v for f in fleets for k, v in f.units.items()}).apply(units.update)

    run()
    created = {(a.typ, a.name): a.inputs for a in mocks.created}
    by_cloud = {a["deployment_unit"]: a for a in three_cloud_plan["allocations"]}
    assert set(units) == set(by_cloud)
    for name, entry in units.items():
        a = by_cloud[name]
        assert (entry["replicas"], entry["nodes"]) == (a["count"], a["nodes_per_replica"])
        for m in entry["members"]:
            assert (m["type"], m["resource"]) in created, m
    aws = units["chat-8b-aws-us-east-1-g6-12xlarge"]
    assert [(m["resource"], m["replica"], m["rank"]) for m in aws["members"]] == [
        ("chat-8b-aws-us-east-1-g6-12xlarge-asg", None, 0)]
    assert "target_group" in aws  # the unit's target group ARN: the health wait's signal (None under mocks)
    pipeline = units["big-70b-gcp-us-central1-a2-highgpu-4g"]  # 1 replica of 2 nodes: a MIG per node
    assert [(m["resource"], m["type"], m["replica"], m["rank"], m["project"], m["zone"]) for m in pipeline["members"]] == [
        (f"big-70b-gcp-us-central1-a2-highgpu-4g-r0-n{k}-mig", "gcp:compute/instanceGroupManager:InstanceGroupManager",
         0, k, "demo-project", "us-central1-a") for k in (0, 1)]
    assert pipeline["members"][1]["name"] == created[(pipeline["members"][1]["type"],
                                                      pipeline["members"][1]["resource"])]["name"]
    azure = units["chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot"]
    [vmss] = azure["members"]
    assert (vmss["type"], vmss["replica"], vmss["resource"]) == (
        "azure-native:compute:VirtualMachineScaleSet", None, "chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot-vmss")
    assert created[(vmss["type"], vmss["resource"])]["vmScaleSetName"] == "chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot"
    assert vmss["id"] == f"{vmss['resource']}-id"  # the ARM id the scale set's VMs are listed under
