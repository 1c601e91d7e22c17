"""The gateway VM and its firewall in the AWS, GCP and Azure stacks (Pulumi mocks): one gateway per
fleet region, clients reach the gateway port only, the vLLM port is open to the gateway only (no
backend port open to clients), secrets stay secret, the stack exports the gateway's URL."""

from __future__ import annotations

import base64

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.document import Plan
from hetinfra.compile.artifacts import sky_units  # noqa: E402
from hetinfra.stacks.common import FleetSecrets  # noqa: E402
from tests.stacks.conftest import as_plan  # noqa: E402
from tests.stacks.test_program import API_KEY, by_name, run_program, unwrap  # noqa: E402

GATEWAY = {"enabled": True, "port": 8443, "aws_instance_type": "c7i.large", "gcp_machine_type": "e2-standard-4",
           "azure_vm_size": "Standard_D4s_v5", "package": "hetinfra==0.1.0", "tls_cert": "cert.pem",
           "tls_key": "key.pem"}
CLIENTS = ["10.0.0.0/8"]  # three_cloud_plan's deploy.ingress_cidrs


@pytest.fixture
def gw_plan(three_cloud_plan):
    three_cloud_plan["deploy"]["gateway"] = dict(GATEWAY)
    return three_cloud_plan


def _net(plan, cloud, region, i=None) -> str:
    """The fleet's subnet ``i``, or (None) its gateway subnet, from the distinct per-region network."""
    from hetinfra.compile.network import gateway_subnet, network_cidrs, subnet
    from hetinfra.document import Plan

    net = network_cidrs(Plan.parse(plan))[(cloud, region)]
    return gateway_subnet(net) if i is None else subnet(net, i)


def fleet_sg_vpc(mocks) -> str:
    return by_name(mocks, "aws:ec2/vpc:Vpc")["demo-aws-us-east-1-vpc"]["cidrBlock"]


def gateway_urls(plan: dict, cloud: str) -> dict:
    """Run the program for ``cloud`` and resolve each fleet's gateway URL."""
    from hetinfra.stacks.program import build

    resolved: dict = {}

    @pulumi.runtime.test
    def run():
        secrets = FleetSecrets(api_key=pulumi.Output.secret(API_KEY), gateway_keys=pulumi.Output.secret("ops:ck-1"),
                               tls_cert=pulumi.Output.secret("CERT"), tls_key=pulumi.Output.secret("KEY"))
        fleets = build(as_plan(plan), cloud, secrets, gcp_project="demo-project")
        urls = pulumi.Output.from_input({f._name: f.gateway_url for f in fleets if f.gateway_url is not None})
        return urls.apply(resolved.update)

    run()
    return resolved


def check_script(script: str, region: str, unit: str, replicas: int, private_prefix: str = "http://10.") -> None:
    assert f"hetinfra gateway /etc/hetinfra/plan.json --host 0.0.0.0 --port 8443 --region {region}" in script
    assert "--tls-cert /etc/hetinfra/tls.crt" in script and "pip install -q hetinfra==0.1.0" in script
    # keys and TLS come from the secret store at every start, never from the boot data
    assert API_KEY not in script and "ops:ck-1" not in script and "CERT" not in script.replace("TLS_CERT", "")
    assert "ExecStartPre=/opt/hetinfra/fetch-secrets.sh" in script and "VLLM_API_KEY HETINFRA_API_KEY" in script
    assert '"TLS_CERT"' in script and "/etc/hetinfra/tls.key" in script
    assert script.count(f"--endpoint {unit}={private_prefix}") == replicas  # private addresses, one per replica head


def test_aws_gateway_vm_and_firewall(mocks, gw_plan):
    urls = gateway_urls(gw_plan, "aws")
    vms = by_name(mocks, "aws:ec2/instance:Instance")
    gateways = {n: v for n, v in vms.items() if n.endswith("-gateway")}
    assert sorted(gateways) == ["demo-aws-us-east-1-gateway", "demo-aws-us-west-2-gateway"]  # one per fleet region
    gw = gateways["demo-aws-us-east-1-gateway"]
    assert gw["instanceType"] == "c7i.large" and gw["tags"]["hetinfra-role"] == "gateway"
    assert "secretsmanager get-secret-value" in gw["userData"]
    # one backend per unit: its internal network load balancer
    check_script(gw["userData"], "us-east-1", "chat-8b-aws-us-east-1-g6-12xlarge", 1,
                 "http://chat-8b-aws-us-east-1-g6-12xlarge-nlb.elb.amazonaws.com")
    sgs = by_name(mocks, "aws:ec2/securityGroup:SecurityGroup")
    gw_sg, fleet_sg = sgs["demo-aws-us-east-1-gateway-sg"], sgs["demo-aws-us-east-1-sg"]
    assert [r["fromPort"] for r in gw_sg["ingress"] if r.get("cidrBlocks") == CLIENTS] == [8443]
    # no backend port open to clients: only the VPC (load balancer health checks) on the vLLM port
    assert [r["cidrBlocks"] for r in fleet_sg["ingress"] if r.get("cidrBlocks")] == [[fleet_sg_vpc(mocks)]]
    rules = by_name(mocks, "aws:ec2/securityGroupRule:SecurityGroupRule")
    rule = rules["demo-aws-us-east-1-vllm-from-gateway"]
    assert rule["fromPort"] == 8000 and rule["sourceSecurityGroupId"] == "demo-aws-us-east-1-gateway-sg-id"
    assert "cidrBlocks" not in rule
    assert set(urls) == {"demo-aws-us-east-1", "demo-aws-us-west-2"}
    assert urls["demo-aws-us-east-1"].startswith("https://203.0.113.") and urls["demo-aws-us-east-1"].endswith(":8443/v1")


def test_gcp_gateway_vm_and_firewall(mocks, gw_plan):
    urls = gateway_urls(gw_plan, "gcp")
    vms = by_name(mocks, "gcp:compute/instance:Instance")
    assert [n for n in vms if n.endswith("-gateway")] == ["demo-gcp-us-central1-gateway"]
    gw = vms["demo-gcp-us-central1-gateway"]
    assert gw["machineType"] == "e2-standard-4" and gw["labels"]["hetinfra-role"] == "gateway"
    assert "guestAccelerators" not in gw and gw["tags"] == ["hetinfra-demo-gateway"]
    assert "gcloud secrets versions access latest" in gw["metadataStartupScript"] and gw["serviceAccount"]
    # one backend per unit: its internal passthrough load balancer (a stable address while the groups heal)
    check_script(gw["metadataStartupScript"], "us-central1", "big-70b-gcp-us-central1-a2-highgpu-4g", 1)
    [rule] = by_name(mocks, "gcp:compute/forwardingRule:ForwardingRule").values()
    assert rule["loadBalancingScheme"] == "INTERNAL"
    fw = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert "demo-gcp-us-central1-fw-vllm" not in fw  # clients no longer reach the vLLM port
    client_rules = [r for r in fw.values() if set(r.get("sourceRanges") or ()) & set(CLIENTS)]
    assert [(r["targetTags"], r["allows"][0]["ports"]) for r in client_rules] == [(["hetinfra-demo-gateway"], ["8443"])]
    vllm = fw["demo-gcp-us-central1-fw-vllm-from-gateway"]
    assert vllm["sourceTags"] == ["hetinfra-demo-gateway"] and vllm["targetTags"] == ["hetinfra-demo"]
    assert vllm["allows"][0]["ports"] == ["8000"] and "sourceRanges" not in vllm
    # what else reaches the fleet comes from the fleet's own subnet (Ray, pipeline stages) and, on the
    # vLLM port only, Google's health-check probers (internal load balancer: no external ranges)
    fleet_rules = {n: r for n, r in fw.items() if r.get("targetTags") == ["hetinfra-demo"]}
    health = fleet_rules.pop("demo-gcp-us-central1-fw-health")
    assert health["sourceRanges"] == ["35.191.0.0/16", "130.211.0.0/22"] and health["allows"][0]["ports"] == ["8000"]
    assert all(r.get("sourceTags") or r.get("sourceRanges") == [_net(gw_plan, "gcp", "us-central1", 0)]
               for r in fleet_rules.values())
    assert urls == {"demo-gcp-us-central1": urls["demo-gcp-us-central1"]}
    assert urls["demo-gcp-us-central1"].startswith("https://198.51.100.")


def test_azure_gateway_vm_and_firewall(mocks, gw_plan):
    urls = gateway_urls(gw_plan, "azure")
    vms = by_name(mocks, "azure-native:compute:VirtualMachine")
    assert [n for n in vms if n.endswith("-gateway")] == ["demo-azure-eastus-gateway"]
    gw = vms["demo-azure-eastus-gateway"]
    assert gw["hardwareProfile"]["vmSize"] == "Standard_D4s_v5" and gw["tags"]["hetinfra-role"] == "gateway"
    assert gw["storageProfile"]["imageReference"]["publisher"] == "Canonical"
    assert gw["identity"]["type"] == "SystemAssigned"
    unit = next(u.name for u in sky_units(Plan.parse(gw_plan)) if u.cloud == "azure")
    # one backend per unit: its internal load balancer, not the scale set's 3 VMs
    check_script(base64.b64decode(unwrap(gw["osProfile"])["customData"]).decode(), "eastus", unit, 1)
    [lb] = by_name(mocks, "azure-native:network:LoadBalancer").values()
    assert "subnet" in lb["frontendIPConfigurations"][0] and "publicIPAddress" not in lb["frontendIPConfigurations"][0]
    nsgs = by_name(mocks, "azure-native:network:NetworkSecurityGroup")
    fleet_rules = nsgs["demo-azure-eastus-nsg"]["securityRules"]
    assert [(r["name"], r["sourceAddressPrefixes"], r["destinationPortRange"]) for r in fleet_rules] == [
        ("allow-vllm-from-gateway", [_net(gw_plan, "azure", "eastus")], "8000")]  # no backend port open to clients
    gw_rules = nsgs["demo-azure-eastus-gateway-nsg"]["securityRules"]
    assert [(r["sourceAddressPrefixes"], r["destinationPortRange"]) for r in gw_rules] == [(CLIENTS, "8443")]
    subnets = by_name(mocks, "azure-native:network:Subnet")
    assert subnets["demo-azure-eastus-gateway-subnet"]["addressPrefix"] == _net(gw_plan, "azure", "eastus")
    assert subnets["demo-azure-eastus-gateway-subnet"]["networkSecurityGroup"]["id"] == "demo-azure-eastus-gateway-nsg-id"
    nic = by_name(mocks, "azure-native:network:NetworkInterface")["demo-azure-eastus-gateway-nic"]
    assert nic["ipConfigurations"][0]["subnet"]["id"] == "demo-azure-eastus-gateway-subnet-id"
    assert urls["demo-azure-eastus"].startswith("https://192.0.2.") and urls["demo-azure-eastus"].endswith(":8443/v1")


def test_gateway_fleets_pass_every_policy(mocks, gw_plan):
    from tests.stacks.test_policies import violations

    run_program(gw_plan)
    assert violations(mocks, allowed=CLIENTS) == []
    vm_types = {"aws:ec2/instance:Instance", "gcp:compute/instance:Instance", "azure-native:compute:VirtualMachine"}
    gateways = [a.name for a in mocks.created if a.typ in vm_types and a.name.endswith("-gateway")]
    assert len(gateways) == 4  # AWS x2, GCP, Azure


@pytest.mark.parametrize("cloud,typ", [("aws", "aws:ec2/instance:Instance"), ("gcp", "gcp:compute/instance:Instance"),
                                       ("azure", "azure-native:compute:VirtualMachine")])
def test_no_gateway_by_default_keeps_the_fleet_as_it_was(mocks, three_cloud_plan, cloud, typ):
    assert gateway_urls(three_cloud_plan, cloud) == {}
    assert not [n for n in by_name(mocks, typ) if n.endswith("-gateway")]


@pytest.mark.parametrize("gateway", [False, True])
def test_each_stack_writes_the_one_firewall_list(mocks, three_cloud_plan, gateway):
    """Every rule of hetinfra.compile.network.firewall_rules, and nothing else, in each cloud's terms
    (Azure's default NSG rules stand for the fleet-internal and prober rules)."""
    from hetinfra.stacks.fleet import fleets_for

    plan = three_cloud_plan
    plan["deploy"].update(ssh_cidrs=["192.0.2.0/24"], management_cidrs=["198.51.100.7/32"])
    if gateway:
        plan["deploy"]["gateway"] = dict(GATEWAY)
    run_program(plan)
    rules = {c: fleets_for(as_plan(plan), c)[0].firewall for c in ("aws", "gcp", "azure")}
    fw = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert sorted(fw) == sorted(f"demo-gcp-us-central1-fw-{r.name}" for r in rules["gcp"])
    nsgs = by_name(mocks, "azure-native:network:NetworkSecurityGroup")
    written = [(n, r["name"], r["destinationPortRange"]) for n, g in nsgs.items() for r in g["securityRules"]]
    want = [("demo-azure-eastus-" + ("nsg" if r.target == "fleet" else "gateway-nsg"),
             "allow-" + r.name.removeprefix("gateway-"), str(r.port)) for r in rules["azure"] if r.source in ("cidrs", "gateway")]
    assert sorted(written) == sorted(want)
    sgs = by_name(mocks, "aws:ec2/securityGroup:SecurityGroup")
    inline = {n: [(i["description"], i.get("fromPort")) for i in g.get("ingress") or []] for n, g in sgs.items()
              if n.startswith("demo-aws-us-east-1")}
    separate = [n for n in by_name(mocks, "aws:ec2/securityGroupRule:SecurityGroupRule") if "us-east-1" in n]
    assert sum(map(len, inline.values())) + len(separate) == len(rules["aws"])
    assert separate == (["demo-aws-us-east-1-vllm-from-gateway"] if gateway else [])
