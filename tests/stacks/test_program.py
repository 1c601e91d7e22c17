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


def test_aws_instances_equal_the_plan(mocks, three_cloud_plan):
    run_program(three_cloud_plan, clouds=("aws",))
    vms = by_name(mocks, "aws:ec2/instance:Instance")
    assert sorted(vms) == ["chat-8b-aws-us-east-1-g6-12xlarge-r0-n0", "chat-8b-aws-us-east-1-g6-12xlarge-r1-n0",
                           "chat-8b-aws-us-west-2-g5-xlarge-spot-r0-n0"]
    units = {u.name: u for u in sky_units(three_cloud_plan)}
    for name, inp in vms.items():
        unit = units[name.rsplit("-r", 1)[0]]
        assert inp["instanceType"] == unit.instance_type
        script = unwrap(inp["userData"])
        assert vllm_serve_command(unit) in script
        assert "--tensor-parallel-size 2" in script and "--data-parallel-size 2" in script or unit.tp == 1
        assert inp["metadataOptions"]["httpTokens"] == "required"
        assert inp["rootBlockDevice"]["volumeSize"] == 200
        assert inp["amiId" if "amiId" in inp else "ami"] == "ami-0123456789abcdef0"
    spot = vms["chat-8b-aws-us-west-2-g5-xlarge-spot-r0-n0"]
    assert spot["instanceMarketOptions"]["marketType"] == "spot"
    assert "instanceMarketOptions" not in vms["chat-8b-aws-us-east-1-g6-12xlarge-r0-n0"]
    # One provider per region; subnets in the first AZ that offers the type.
    providers = by_name(mocks, "pulumi:providers:aws")
    assert {p["region"] for p in providers.values()} == {"us-east-1", "us-west-2"}
    subnets = by_name(mocks, "aws:ec2/subnet:Subnet")
    assert {s["availabilityZone"] for s in subnets.values()} == {"us-east-1a", "us-west-2a"}
    # The security group opens 8000 to the declared CIDR only, SSH not at all.
    for sg in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").values():
        cidr_rules = [r for r in sg["ingress"] if r.get("cidrBlocks")]
        assert cidr_rules == [{"protocol": "tcp", "fromPort": 8000, "toPort": 8000, "cidrBlocks": ["10.0.0.0/8"],
                               "description": "vLLM API"}]


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
    head_ip = [line for line in worker_script.splitlines() if line.startswith("HEAD_IP=")]
    assert head_ip and head_ip[0].startswith("HEAD_IP=10.42.0.") and "NODE_RANK=1" in worker_script
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


def test_secrets_are_never_plain_inputs(mocks, three_cloud_plan):
    run_program(three_cloud_plan)
    scripts = 0
    for a in mocks.created:
        text = json.dumps(a.inputs, default=str)
        for key in ("userData", "metadataStartupScript", "osProfile"):
            if key in a.inputs:
                assert SECRET_SIG in json.dumps(a.inputs[key]), f"{a.name}.{key} is not a secret"
                scripts += 1
        # Outside secret-wrapped values the key and token never appear.
        plain = {k: v for k, v in a.inputs.items() if not (isinstance(v, dict) and SECRET_SIG in v)}
        assert API_KEY not in json.dumps(plain, default=str) and "hf_SECRETTOKEN" not in json.dumps(plain, default=str)
        assert text  # every resource serialises
    assert scripts == 3 + 2 + 3


def test_port_and_runtime_follow_the_deploy_section(mocks, three_cloud_plan):
    three_cloud_plan["deploy"].update(port=9000, runtime="virtualenv", ingress_cidrs=[])
    run_program(three_cloud_plan, clouds=("aws",), hf_token=None)
    vm = by_name(mocks, "aws:ec2/instance:Instance")["chat-8b-aws-us-east-1-g6-12xlarge-r0-n0"]
    script = unwrap(vm["userData"])
    assert "--port 9000" in script and "pip install -q vllm==0.11.0" in script and "docker" not in script
    assert "HF_TOKEN" not in script
    for sg in by_name(mocks, "aws:ec2/securityGroup:SecurityGroup").values():
        assert [r for r in sg["ingress"] if r.get("cidrBlocks")] == []  # nothing declared: nothing open


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
    assert len(exported["vms"]) == 3
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
    vms = by_name(mocks, "aws:ec2/instance:Instance")
    [a] = plan["allocations"]
    names = sorted(vms)
    assert names == [f"{a['deployment_unit']}-r0-n{k}" for k in range(3)]
    assert [vms[n]["instanceType"] for n in names] == [s["instance_type"] for s in a["stages"]]
    scripts = [unwrap(vms[n]["userData"]) for n in names]
    partition = ",".join(str(s["layers"]) for s in a["stages"])
    for rank, (script, gpu) in enumerate(zip(scripts, [s["gpu"] for s in a["stages"]])):
        assert f"expected 1 x {gpu}, found" in script and f"NODE_RANK={rank}" in script
        assert f"VLLM_PP_LAYER_PARTITION={partition}" in script
        assert ('--distributed-executor-backend mp --nnodes 3 --node-rank "$NODE_RANK" --master-addr "$HEAD_IP"'
                in script) and "ray start" not in script
        assert "--max-num-seqs 256 --max-num-batched-tokens 2048" in script  # the smaller GPU's default
        assert "exec vllm serve" in script and "--headless" in script
    head_ip = [line for line in scripts[1].splitlines() if line.startswith("HEAD_IP=")]
    assert head_ip and head_ip[0].startswith("HEAD_IP=10.42.0.")
