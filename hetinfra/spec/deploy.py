"""The ``deploy:`` section of the service spec: how the plan is deployed (ports, networks, engine,
Pulumi stack, gateway, SkyPilot failover). Planning reads only ``vllm_version`` from it."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, SerializationInfo, ValidationInfo, field_validator, model_serializer

from hetinfra.facts import AWS, AZURE, GATEWAY_PORT, GCP, SSH_PORT, VLLM_PORT
from hetinfra.spec.base import HostFilePath, ResourceWord, ShellArg, ShellChecked, dns_name

__all__ = ["DEFAULT_VLLM_VERSION", "DeploySpec", "FailoverSpec", "GatewaySpec", "KubeClusterSpec", "KubernetesSpec"]

#: what a vLLM version may look like (the spec's deploy.vllm_version, a profile row's vllm_version):
#: it reaches image tags, pip pins and the engine's calibration lookup
VLLM_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?([a-z0-9.+-]*)\Z")
#: the vLLM version plans are made for unless deploy.vllm_version says otherwise: the engine the
#: estimator's current-engine calibration data were measured on (hetinfra/perf/calibration.py)
DEFAULT_VLLM_VERSION = "0.12.0"
#: the schemes of Pulumi's state backends (`pulumi login`): the Pulumi Cloud or a self-hosted service over
#: http(s), and the DIY backends (a folder, S3, Google Cloud Storage, Azure Blob, PostgreSQL); any other
#: URL failed only inside `pulumi login` at apply time
BACKEND_SCHEMES = ("file", "s3", "gs", "azblob", "https", "http", "postgres")


def omit_at_default(data, key: str, default, *also: str):
    """Leave ``key`` (and ``also``) out of a dump while ``key`` holds ``default``: the fields added for
    the Kubernetes target, so that plan.json of the other targets stays byte-identical."""
    if isinstance(data, dict) and data.get(key) == default:
        for k in (key, *also):
            data.pop(k, None)
    return data


#: the shape of each cloud's VM type names (the gateway VM's; Pulumi hands them to the cloud as written, so a
#: name of another shape failed only inside `pulumi up`, after `apply` had begun): EC2 FAMILY.SIZE (c7i.large,
#: m7i-flex.large, u-6tb1.metal, i7ie.metal-24xl), GCE SERIES-KIND[-N] (e2-standard-2, e2-micro,
#: n2-custom-4-8192), Azure Standard_ or Basic_ then its size (Standard_D2s_v5, Basic_A1, a constrained-vCPU
#: Standard_E4-2s_v4)
VM_TYPE_SHAPES = {
    "aws_instance_type": (re.compile(r"[a-z][a-z0-9-]*\.(nano|micro|small|medium|large|[0-9]*xlarge|metal(-[0-9]+xl)?)\Z"),
                          "an EC2 instance type is FAMILY.SIZE, e.g. c7i.large or m7i.xlarge"),
    "gcp_machine_type": (re.compile(r"[a-z][a-z0-9]*-[a-z0-9]+(-[a-z0-9]+)*\Z"),
                         "a Compute Engine machine type is SERIES-KIND[-CPUS], e.g. e2-standard-2"),
    "azure_vm_size": (re.compile(r"(?i:standard|basic)_[A-Za-z0-9][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*\Z"),
                      "an Azure VM size starts Standard_ (or Basic_), e.g. Standard_D2s_v5"),
}


class GatewaySpec(ShellChecked):
    """The service's one public endpoint (`hetinfra gateway`), created by the Pulumi stacks with the fleet."""

    enabled: bool = Field(False, description="Create a gateway VM per cloud region with the fleet (Pulumi stacks; "
                                             "on the SkyPilot path a gateway task, skypilot/<service>-gateway.yaml); "
                                             "clients then reach only the gateway, the vLLM port only the gateway.")
    port: int = Field(GATEWAY_PORT, ge=1, le=65535, description="Port the gateway listens on (443 is usual with TLS).")
    aws_instance_type: ResourceWord = Field(AWS.gateway_vm_type, description="CPU instance type of the gateway VM on AWS.")
    gcp_machine_type: ResourceWord = Field(GCP.gateway_vm_type, description="Machine type of the gateway VM on GCP.")
    azure_vm_size: ResourceWord = Field(AZURE.gateway_vm_type, description="VM size of the gateway VM on Azure.")
    package: ShellArg = Field("hetinfra", description="pip requirement the gateway VM installs (e.g. hetinfra==0.1.0 or a "
                                                 "wheel URL on your own index).")
    tls_cert: HostFilePath | None = Field(None, description="PEM certificate file (chain) on the deploying machine: the gateway "
                                                   "serves HTTPS with it. Unset: plain HTTP (put a TLS proxy in front).")
    tls_key: HostFilePath | None = Field(None, description="PEM private key file of tls_cert; sent to the VM as a Pulumi secret.")
    kind: Literal["hetinfra", "inference-extension"] = Field(
        "hetinfra", description="deploy.target kubernetes: 'hetinfra' runs hetinfra's gateway as a Deployment + "
                                "Service per cluster; 'inference-extension' writes an InferencePool and an HTTPRoute "
                                "per model for the Gateway API Inference Extension (docs/kubernetes.md).")

    @field_validator("port")
    @classmethod
    def _not_ssh(cls, v: int) -> int:
        # the gateway VM keeps sshd on 22 (its firewall opens 22 to ssh_cidrs only): a gateway there
        # could not bind, and clients' CIDRs would be opened on the SSH port
        if v == SSH_PORT:
            raise ValueError(f"port {SSH_PORT} is the gateway VM's SSH port; pick another (443 with TLS, or "
                             f"{GATEWAY_PORT})")
        return v

    @field_validator(*VM_TYPE_SHAPES)
    @classmethod
    def _vm_type(cls, v: str, info: ValidationInfo) -> str:
        shape, what = VM_TYPE_SHAPES[info.field_name]
        if not shape.match(v):
            raise ValueError(f"{v!r} is not a VM type of its cloud: {what}")
        return v

    @model_serializer(mode="wrap")
    def _dump(self, handler, info: SerializationInfo):
        return omit_at_default(handler(self), "kind", "hetinfra")


class FailoverSpec(ShellChecked):
    """Where a SkyServe unit's replicas may go when its planned offer has no capacity (SkyPilot tasks only)."""

    max_alternates: int = Field(4, ge=0, le=16, description="Most equivalent offers (same GPU type and count, same "
                                "vLLM layout, so the unit's rates hold) listed after the planned one in each SkyPilot "
                                "task's `resources.ordered`, cheapest first (plan.json allocations[].alternates). "
                                "0: every task pinned to its planned offer.")
    max_premium: float = Field(0.25, ge=0, le=4, description="An alternate costs at most this fraction more per hour "
                               "than the planned offer (0.25: +25%). The plan's cost is the planned offers'; a replica "
                               "that fails over costs up to this much more.")
    ondemand_fallback: bool = Field(True, description="Spot units: SkyServe launches on-demand replicas in place of "
                                    "spot ones that are preempted or cannot be had, at the on-demand price, and "
                                    "removes them when spot capacity is back (replica_policy.dynamic_ondemand_fallback).")


class KubeClusterSpec(ShellChecked):
    """One Kubernetes cluster hetinfra deploys a cloud region's units into (it never creates clusters)."""

    context: ShellArg = Field(..., min_length=1, description="kubeconfig context of the cluster.")
    namespace: str = Field("hetinfra", description="Namespace of everything hetinfra creates in the cluster "
                                                   "(created by `hetinfra apply` when missing).")
    cluster_name: ResourceWord | None = Field(None, description="EKS: the cluster name of Karpenter's discovery tag "
                                     "(karpenter.sh/discovery) and default node role; default: the context.")
    node_role: ShellArg | None = Field(None, description="EKS: IAM role of Karpenter's GPU nodes; default "
                                  "KarpenterNodeRole-<cluster_name> (Karpenter's getting-started name).")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        return dns_name(v, "namespace")


class KubernetesSpec(ShellChecked):
    """deploy.target kubernetes: one existing cluster per cloud region of the plan."""

    clusters: dict[str, KubeClusterSpec] = Field({}, description="Cluster per fleet, keyed 'cloud/region' (e.g. "
                                                 "{'aws/us-east-1': {context: prod-use1}}); every cloud region the "
                                                 "plan uses needs one to be applied.")
    kubeconfig: HostFilePath | None = Field(None, description="kubeconfig file; default $KUBECONFIG or ~/.kube/config.")
    scaler: Literal["hpa", "keda"] = Field("hpa", description="Scaling between the autoscale bounds on vLLM's "
                                           "vllm:num_requests_waiting: 'hpa' (custom metrics through a Prometheus "
                                           "adapter) or 'keda' (a ScaledObject; KEDA must be installed).")
    prometheus_url: ShellArg = Field("http://prometheus-operated.monitoring.svc:9090", description="scaler keda: the "
                                "Prometheus server KEDA queries for vLLM's metrics.")

    @field_validator("clusters")
    @classmethod
    def _clusters(cls, v: dict[str, KubeClusterSpec]) -> dict[str, KubeClusterSpec]:
        for k in v:
            if not re.match(r"^(aws|gcp|azure)/[a-z0-9-]+\Z", k):  # \Z: "$" lets a final newline through
                raise ValueError(f"kubernetes.clusters key {k!r} must be cloud/region, e.g. aws/us-east-1")
        return v


class DeploySpec(ShellChecked):
    """How the plan is deployed: serving runtime, network exposure, Pulumi stack settings."""

    autoscale: bool = Field(False, description="SkyServe: autoscale each unit between its planned count and 2x at the "
                                               "plan's per-replica target QPS, instead of a fixed replica count.")
    port: int = Field(VLLM_PORT, ge=1024, le=65535, description="Port of the OpenAI-compatible vLLM endpoint.")
    ingress_cidrs: list[str] = Field([], description="CIDRs allowed to reach the vLLM port (e.g. your router's). "
                                                     "Empty: reachable only inside the network; 0.0.0.0/0 only if listed.")
    ssh_cidrs: list[str] = Field([], description="CIDRs allowed to reach port 22. Empty: no SSH ingress.")
    management_cidrs: list[str] = Field([], description="CIDRs of the hosts that run `hetinfra replan --apply` or "
                                        "`status` (e.g. the cron host's /32): allowed to the units' endpoints so their "
                                        "/health can be checked (vLLM still requires VLLM_API_KEY for the API). Not "
                                        "needed with a gateway (checked through it).")
    network_cidrs: dict[str, str] = Field({}, description="Network CIDR per fleet, keyed 'cloud/region' (e.g. "
                                          "{'aws/us-east-1': '10.50.0.0/16'}); unlisted fleets get a distinct "
                                          "10.x.0.0/16 derived from their cloud/region.")
    runtime: Literal["container", "virtualenv"] = Field(
        "container", description="Pulumi VMs: run vLLM in the vllm/vllm-openai container, or pip-install it in a venv.")
    vllm_version: str = Field(DEFAULT_VLLM_VERSION, description="vLLM version the plan is made for and the artifacts "
                              "run (image tag v<version> / pip vllm==<version>): the performance model uses that "
                              "engine's calibration; default: the version its current-engine data were measured on.")
    stack: str = Field("prod", description="Pulumi stack name of the generated projects.")
    backend_url: ShellArg | None = Field(None, description="Pulumi backend URL; default file://./state inside each project "
                                                      "(pulumi/<cloud>/state, relative, so the out dir can move).")
    gcp_project: ResourceWord | None = Field(None, description="GCP project for the gcp stack (else set gcp:project yourself).")
    ssh_public_key: str | None = Field(None, description="OpenSSH public key for the VMs' admin user (Azure needs one).")
    disk_gb: int | None = Field(None, ge=50, le=16384, description="Boot disk size of every VM, GB. Unset (default): "
                                "sized per unit to hold the model's weights, the engine (image or virtualenv) and the "
                                "OS image, +10%; set: `hetinfra apply` refuses a disk smaller than that.")
    gateway: GatewaySpec = Field(default_factory=GatewaySpec,
                                 description="The gateway in front of the fleet: one OpenAI-compatible endpoint.")
    skypilot_clouds: list[Literal["aws", "gcp", "azure"]] = Field(
        [], description="`hetinfra apply --target all`: units on these clouds are deployed as SkyServe services, "
                        "the others with the Pulumi stacks.")
    failover: FailoverSpec = Field(default_factory=FailoverSpec, description="SkyPilot tasks: equivalent offers a "
                                   "unit may fail over to, and on-demand fallback for spot units.")
    target: Literal["vms", "kubernetes"] = Field("vms", description="vms: the Pulumi VM stacks and/or SkyServe "
                                                 "(hetinfra apply --target); kubernetes: manifests and a "
                                                 "pulumi-kubernetes program per cluster (OUT/kubernetes/), applied "
                                                 "into the clusters of deploy.kubernetes (docs/kubernetes.md).")
    kubernetes: KubernetesSpec = Field(default_factory=KubernetesSpec, description="deploy.target kubernetes: the "
                                       "clusters per cloud region and how units scale there.")

    @model_serializer(mode="wrap")
    def _dump(self, handler, info: SerializationInfo):
        return omit_at_default(handler(self), "target", "vms", "kubernetes")

    @field_validator("network_cidrs")
    @classmethod
    def _networks(cls, v: dict[str, str]) -> dict[str, str]:
        for k, c in v.items():
            if not re.match(r"^(aws|gcp|azure)/[a-z0-9-]+\Z", k):
                raise ValueError(f"network_cidrs key {k!r} must be cloud/region, e.g. aws/us-east-1")
            try:
                net = ipaddress.ip_network(c, strict=True)
            except ValueError:
                raise ValueError(f"network_cidrs[{k!r}]: {c!r} is not a network CIDR (e.g. 10.50.0.0/16)") from None
            if not net.is_private or net.prefixlen > 20:
                raise ValueError(f"network_cidrs[{k!r}]: {c} must be a private range of /20 or larger")
        nets = [(k, ipaddress.ip_network(c)) for k, c in v.items()]
        for i, (k, a) in enumerate(nets):  # the fleets' stacks refused this inside `pulumi up` (a ValueError)
            for k2, b in nets[i + 1:]:
                if a.overlaps(b):
                    raise ValueError(f"network_cidrs[{k!r}] {a} and network_cidrs[{k2!r}] {b} overlap: give every "
                                     "cloud/region its own range")
        return v

    @field_validator("ingress_cidrs", "ssh_cidrs", "management_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for c in v:
            check_cidr(c)
        return v

    @field_validator("ssh_public_key")
    @classmethod
    def _ssh_key(cls, v: str | None) -> str | None:
        return v if v is None else check_ssh_key(v)

    @field_validator("backend_url")
    @classmethod
    def _backend(cls, v: str | None) -> str | None:
        scheme = v.split("://", 1)[0].lower() if v is not None and "://" in v else None
        if v is not None and scheme not in BACKEND_SCHEMES:
            raise ValueError(f"backend_url {v!r} is not a Pulumi backend: use one of "
                             + ", ".join(f"{s}://" for s in BACKEND_SCHEMES) + " (or leave it out for file://./state)")
        return v

    @field_validator("stack")
    @classmethod
    def _stack(cls, v: str) -> str:
        return dns_name(v, "stack name")

    @field_validator("vllm_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not VLLM_VERSION.match(v):
            raise ValueError(f"vllm_version {v!r} must look like 0.11.0")
        return v


def check_cidr(c: str) -> str:
    """``c`` where it is a network CIDR as a firewall rule reads it: an address with host bits under its prefix
    (10.0.0.1/8) is refused, naming the network and the host it may have meant; it was accepted and read as the
    whole network (cloud firewalls widen it so or refuse it at apply)."""
    try:
        ipaddress.ip_network(c, strict=False)
    except ValueError:
        raise ValueError(f"{c!r} is not a CIDR (write e.g. 10.0.0.0/8 or 203.0.113.7/32)") from None
    try:
        ipaddress.ip_network(c, strict=True)
    except ValueError:
        net, host = ipaddress.ip_network(c, strict=False), ipaddress.ip_interface(c).ip
        raise ValueError(f"{c!r} has host bits set under its /{net.prefixlen}: write {net} for the whole network, "
                         f"or {host}/{host.max_prefixlen} for that one host") from None
    return c


def check_ssh_key(v: str) -> str:
    """``v`` where it is one line of an OpenSSH public key, ``TYPE BASE64 [comment]``, whose base64 decodes to the
    key blob that begins with TYPE (RFC 4253 6.6: a length-prefixed string); it is written into cloud-init and
    VM metadata. 'ssh-ed25519 AAAA' was accepted and failed only on the VM."""
    import base64
    import binascii

    bad = ValueError("ssh_public_key must be one line of an OpenSSH public key: 'ssh-ed25519 AAAA... comment' "
                     "(the line of your ~/.ssh/id_ed25519.pub)")
    if len(v) > 16384 or not v.isprintable() or len(v.split()) not in (2, 3) \
            or not re.match(r"^(ssh-|ecdsa-|sk-)[A-Za-z0-9@.-]+ [A-Za-z0-9+/=]+( [ -~]*)?\Z", v):
        raise bad
    kind, body = v.split()[:2]
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise bad from None
    n = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if n <= 0 or blob[4:4 + n] != kind.encode("ascii") or len(blob) <= 4 + n:
        raise bad
    return v
