"""The Pulumi programs under mocks: what they would create equals the plan, to the flag."""

from __future__ import annotations

import base64
import json

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.compile.artifacts import sky_units  # noqa: E402
from hetinfra.compile.skypilot import vllm_serve_command  # noqa: E402
from hetinfra.stacks.common import FleetSecrets  # noqa: E402

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
            fleets += build(plan, c, secrets, gcp_project="demo-project")
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
    units = {u.name: u for u in sky_units(three_cloud_plan)}
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


def test_secret_store_reads_and_no_secret_in_boot_data(mocks, three_cloud_plan):
    three_cloud_plan["deploy"]["management_cidrs"] = ["198.51.100.7/32"]
    run_program(three_cloud_plan)
    # each cloud keeps the secrets in its store, written from the Pulumi secrets
    [v] = [a for a in mocks.of("aws:secretsmanager/secretVersion:SecretVersion") if "us-east-1" in a.name]
    assert json.loads(unwrap(v.inputs["secretString"])) == {"HF_TOKEN": "hf_SECRETTOKEN", "VLLM_API_KEY": API_KEY}
    assert mocks.of("gcp:secretmanager/secretVersion:SecretVersion")
    assert mocks.of("azure-native:keyvault:Secret") and mocks.of("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert len(mocks.of("azure-native:authorization:RoleAssignment")) == 3  # one per Azure VM identity
    boot = 0
    for a in mocks.created:
        for key in ("userData", "metadataStartupScript", "osProfile"):
            if key in a.inputs:
                text = json.dumps(unwrap(a.inputs[key]), default=str)
                if key == "userData" and a.typ.startswith("aws:ec2/launchTemplate"):
                    text = base64.b64decode(a.inputs[key]).decode()
                if key == "osProfile":
                    text = base64.b64decode(unwrap(a.inputs[key])["customData"]).decode()
                assert API_KEY not in text and "hf_SECRETTOKEN" not in text, a.name
                assert "fetch-secrets.sh" in text
                boot += 1
        if "secretString" in a.inputs or "secretData" in a.inputs:
            continue
        if a.typ == "azure-native:keyvault:Secret":
            continue
        assert API_KEY not in json.dumps(a.inputs, default=str), a.name
    assert boot == 2 + 2 + 3  # 2 AWS launch templates, 2 GCP VMs, 3 Azure VMs
    # management CIDRs reach the vLLM port (the cron host's health checks), never 0.0.0.0/0
    fws = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert fws["demo-gcp-us-central1-fw-mgmt"]["sourceRanges"] == ["198.51.100.7/32"]
    for fw in fws.values():
        assert "0.0.0.0/0" not in (fw.get("sourceRanges") or [])


def test_gcp_pipeline_instances_accelerators_and_head_ip(mocks, three_cloud_plan):
    endpoints = run_program(three_cloud_plan, clouds=("gcp",))
    vms = by_name(mocks, "gcp:compute/instance:Instance")
    head, worker = (vms[f"big-70b-gcp-us-central1-a2-highgpu-4g-r0-n{k}"] for k in (0, 1))
    assert len(vms) == 2
    for inp in (head, worker):
        assert inp["machineType"] == "a2-highgpu-4g"
        assert inp["guestAccelerators"] == [{"type": "nvidia-tesla-a100", "count": 4}]
        assert inp["scheduling"]["onHostMaintenance"] == "TERMINATE"
        assert inp["scheduling"]["provisioningModel"] == "STANDARD"
        assert inp["zone"] == "us-central1-a"  # first zone that is UP, sorted
    head_script, worker_script = unwrap(head["metadataStartupScript"]), unwrap(worker["metadataStartupScript"])
    unit = next(u for u in sky_units(three_cloud_plan) if u.cloud == "gcp")
    serve = vllm_serve_command(unit)
    assert "--pipeline-parallel-size 2 --distributed-executor-backend ray" in serve
    assert serve in head_script and "VLLM_PP_LAYER_PARTITION=42,38" in head_script
    assert "NODE_RANK=0" in head_script and "HEAD_IP=" not in head_script.split("<<'ENV'")[1].split("ENV\n")[0]
    # The worker joins the head's private IP (the mock gave the head 10.42.0.x).
    head_ip = [line for line in worker_script.splitlines() if line.startswith("echo HEAD_IP=")]
    assert head_ip and head_ip[0].startswith("echo HEAD_IP=10.42.0.") and "NODE_RANK=1" in worker_script
    assert "ExecStartPre=/opt/hetinfra/find-head.sh" in worker_script
    # One endpoint per replica: the head's public IP.
    assert list(endpoints) == ["big-70b-gcp-us-central1-a2-highgpu-4g"]
    assert len(endpoints["big-70b-gcp-us-central1-a2-highgpu-4g"]) == 1
    assert endpoints["big-70b-gcp-us-central1-a2-highgpu-4g"][0].startswith("http://198.51.100.")
    fw = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert fw["demo-gcp-us-central1-fw-vllm"]["sourceRanges"] == ["10.0.0.0/8"]
    assert "demo-gcp-us-central1-fw-ssh" not in fw


def test_azure_vms_sizes_spot_and_cloud_init(mocks, three_cloud_plan):
    endpoints = run_program(three_cloud_plan, clouds=("azure",))
    vms = by_name(mocks, "azure-native:compute:VirtualMachine")
    assert len(vms) == 3
    unit = next(u for u in sky_units(three_cloud_plan) if u.cloud == "azure")
    for inp in vms.values():
        assert inp["hardwareProfile"] == {"vmSize": "Standard_NC24ads_A100_v4"}
        assert inp["priority"] == "Spot" and inp["evictionPolicy"] == "Delete"
        os_profile = unwrap(inp["osProfile"])
        script = base64.b64decode(unwrap(os_profile["customData"])).decode()
        assert vllm_serve_command(unit) in script and "expected 1 x A100-80GB" in script
        assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True
    nsg = next(iter(by_name(mocks, "azure-native:network:NetworkSecurityGroup").values()))
    assert [(r["destinationPortRange"], r["sourceAddressPrefixes"]) for r in nsg["securityRules"]] == [
        ("8000", ["10.0.0.0/8"])]
    assert sorted(len(v) for v in endpoints.values()) == [3]


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
