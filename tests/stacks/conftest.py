"""Pulumi mocks for the stack tests (pattern from shared/notes/pulumi.md): the engine is replaced
by an in-process monitor that records every resource registration and invoke."""

from __future__ import annotations

import copy
import sys

import pytest

pulumi = pytest.importorskip("pulumi")
from pulumi.runtime.mocks import MockMonitor  # noqa: E402

from hetinfra.plan.naming import unit_name  # noqa: E402
from tests.plan.golden_plans import filled_golden, routed_to_allocations  # noqa: E402

GOLDEN = filled_golden("chat")


def as_plan(doc: dict):
    """The typed plan of plan.json's dict: what the stacks' program takes (it parses plan.json once
    where it reads it, a cloud's copy: cloud_copy); the tests build and edit plans as dicts and hand
    the program its model."""
    from hetinfra.document import Plan

    return Plan.parse(doc, cloud_copy=True)


class HetMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: list = []
        self.calls: list = []
        self._ip = 10
        # what the image lookups find (a test moves them to a newer release)
        self.newest_ami = "ami-0123456789abcdef0"
        self.newest_gce_image = "common-cu124-v20250101-ubuntu-2204-py310"

    def _next_ip(self, prefix: str) -> str:
        self._ip += 1
        return f"{prefix}.{self._ip}"

    def new_resource(self, args):
        self.created.append(args)
        out = dict(args.inputs)
        if args.typ == "aws:ec2/instance:Instance":
            out["publicIp"], out["privateIp"] = self._next_ip("203.0.113"), self._next_ip("10.42.0")
        elif args.typ == "gcp:compute/instance:Instance":
            nics = copy.deepcopy(out.get("networkInterfaces") or [{}])
            nics[0]["networkIp"] = self._next_ip("10.42.0")
            nics[0]["accessConfigs"] = [{"natIp": self._next_ip("198.51.100")}]
            out["networkInterfaces"] = nics
        elif args.typ == "azure-native:network:PublicIPAddress":
            out["ipAddress"] = self._next_ip("192.0.2")
        elif args.typ == "azure-native:network:NetworkInterface":
            cfgs = copy.deepcopy(out.get("ipConfigurations") or [{}])
            cfgs[0]["privateIPAddress"] = self._next_ip("10.42.0")
            out["ipConfigurations"] = cfgs
        elif args.typ == "azure-native:network:LoadBalancer":
            fes = copy.deepcopy(out.get("frontendIPConfigurations") or [{}])
            if "subnet" in fes[0]:  # internal frontend: a private address from the subnet
                fes[0]["privateIPAddress"] = self._next_ip("10.42.0")
            out["frontendIPConfigurations"] = fes
        if args.typ in ("azure-native:compute:VirtualMachine", "azure-native:compute:VirtualMachineScaleSet") \
                and out.get("identity"):
            out["identity"] = dict(out["identity"], principalId=f"{args.name}-principal")
        if args.typ == "aws:secretsmanager/secret:Secret":
            out["arn"] = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{args.name}"
        if args.typ == "aws:lb/loadBalancer:LoadBalancer":
            out["dnsName"] = f"{args.name}.elb.amazonaws.com"
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out["latestVersion"] = 1
        if args.typ == "gcp:compute/forwardingRule:ForwardingRule":
            public = out.get("loadBalancingScheme") == "EXTERNAL"
            out["ipAddress"] = self._next_ip("198.51.100" if public else "10.42.0")
        if args.typ == "gcp:compute/instanceTemplate:InstanceTemplate":
            out["selfLinkUnique"] = f"projects/demo-project/global/instanceTemplates/{args.name}?uniqueId=1"
        if args.typ == "gcp:compute/instanceGroupManager:InstanceGroupManager":
            out["instanceGroup"] = f"zones/{out.get('zone')}/instanceGroups/{out.get('name')}"
        if args.typ == "gcp:serviceaccount/account:Account":
            out["email"] = f"{out.get('accountId')}@demo-project.iam.gserviceaccount.com"
        if args.typ.startswith("azure-native:") and "name" not in out:
            out["name"] = args.name
        return f"{args.name}-id", out

    def call(self, args):
        self.calls.append(args)
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": self.newest_ami}
        if args.token == "gcp:compute/getImage:getImage":
            project = args.args.get("project")
            return {"name": self.newest_gce_image, "project": project,
                    "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/"
                                f"{self.newest_gce_image}"}
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            region = "us-west-2" if "us-west-2" in (args.provider or "") else "us-east-1"
            return {"locations": [f"{region}c", f"{region}a"], "instanceTypes": [], "locationTypes": []}
        if args.token == "azure-native:authorization:getClientConfig":
            return {"tenantId": "00000000-0000-0000-0000-0000000000aa", "subscriptionId": "sub-1",
                    "clientId": "c", "objectId": "o"}
        if args.token == "gcp:compute/getZones:getZones":
            return {"names": ["us-central1-c", "us-central1-a"]}
        return {}

    def of(self, typ: str) -> list:
        return [a for a in self.created if a.typ == typ]


@pytest.fixture
def mocks(monkeypatch):
    # SkyPilot's ux_utils.print_exception_no_traceback sets sys.tracebacklimit = 0 and does not
    # restore it when the block raises (as SkyPilot validation tests make it do); Pulumi's
    # registration walks the stack with traceback.extract_stack and breaks on an empty one.
    monkeypatch.setattr(sys, "tracebacklimit", 1000, raising=False)
    m = HetMocks()
    m.monitor = MockMonitor(m)
    pulumi.runtime.set_mocks(m, project="hetinfra", stack="test", preview=False, monitor=m.monitor)
    return m


def _alloc(model, cloud, region, itype, gpu, gpus, *, tp, pp=1, engines=1, count=1, spot=False, price=1.0,
           layers=None):
    name = unit_name(model, cloud, region, itype, spot=spot)
    return {**GOLDEN["allocations"][0], "alternates": [], "ondemand_fallback": None, "unit": f"{model}|{cloud}|{itype}|{region}", "model": model, "cloud": cloud, "region": region,
            "instance_type": itype, "gpu": gpu, "gpus_per_instance": gpus, "tp": tp, "pp": pp,
            "engines_per_instance": engines, "nodes_per_replica": pp, "layer_partition": layers,
            "count": count, "instances": count * pp, "spot": spot,
            "price_per_instance_usd_per_hour": price, "cost_usd_per_hour": price * count * pp,
            "deployment_unit": name, "skypilot_task": f"skypilot/{name}.yaml", "target_qps_per_replica": 2.0}


@pytest.fixture
def three_cloud_plan() -> dict:
    """A plan touching every feature a stack must carry: DP engines, a 2-node pipeline with an
    uneven split, spot, two regions on one cloud, all three clouds. A whole plan.json (the golden
    chat plan's other keys), as the stacks' program reads it through its model."""
    model = {**GOLDEN["models"][0], "params": None}
    return routed_to_allocations({
        **GOLDEN,
        "service": "demo",
        "models": [
            {**model, "name": "chat-8b", "source": "meta-llama/Llama-3.1-8B-Instruct", "precision": "bf16", "max_model_len": 4096},
            {**model, "name": "big-70b", "source": "meta-llama/Llama-3.1-70B-Instruct", "precision": "bf16", "max_model_len": 4096},
        ],
        "allocations": [
            _alloc("chat-8b", "aws", "us-east-1", "g6.12xlarge", "L4", 4, tp=2, engines=2, count=2, price=4.6),
            _alloc("chat-8b", "aws", "us-west-2", "g5.xlarge", "A10G", 1, tp=1, spot=True, price=0.4),
            _alloc("big-70b", "gcp", "us-central1", "a2-highgpu-4g", "A100", 4, tp=4, pp=2, layers=[42, 38], price=14.7),
            _alloc("chat-8b", "azure", "eastus", "Standard_NC24ads_A100_v4", "A100-80GB", 1, tp=1, count=3,
                   spot=True, price=1.5),
        ],
        "deploy": {"port": 8000, "ingress_cidrs": ["10.0.0.0/8"], "ssh_cidrs": [], "runtime": "container",
                   "vllm_version": "0.11.0", "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHetinfraTestKeyOnly user@host",
                   "gcp_project": "demo-project", "stack": "prod", "disk_gb": 200, "autoscale": False},
    })
