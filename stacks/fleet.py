"""Typed arguments of the per-cloud GPU fleet components, built from a plan.json (no Pulumi import).

A plan allocation (model x template x cloud x region x purchase option, ``count`` replicas of
``nodes_per_replica`` VMs) becomes one :class:`VMGroup`; the units of one (cloud, region)
make one :class:`FleetArgs`, the typed input of ``AwsGpuFleet``, ``GcpGpuFleet`` or
``AzureGpuFleet``. Custom clouds (user offers without IaC) are skipped here.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle_nodes import across_nodes_refusal
from hetinfra.compile.disk import alloc_weights_gb, disk_gb
from hetinfra.compile.network import FirewallRule, faces_internet, firewall_rules, gateway_subnet, network_cidrs, subnet
from hetinfra.compile.unit import DeployedUnit
from hetinfra.document import Allocation, Plan
from hetinfra.price_feeds.offers import KNOWN_CLOUDS as IAC_CLOUDS
from hetinfra.stacks.startup import RuntimeConfig
from hetinfra.facts import CLOUDS, GATEWAY_PORT, VLLM_PORT

# GCE instance names are at most 63 characters and Pulumi's auto-naming appends 8.
MAX_VM_NAME = 54
# Time a new VM gets before failed health checks replace it: the VM's start, the driver (up to 10 min
# on GCE's Deep Learning image), the engine image, loading and CUDA graphs, plus the weights'
# download at a conservative 0.2 GB/s; never under 30 min. Each cloud caps it at its own maximum.
BOOT_S = 1200
DOWNLOAD_GB_PER_S = 0.2
MIN_HEALTH_GRACE_S = 1800


@dataclass(frozen=True)
class VMGroup:
    """The VMs of one deployed unit in a stack: ``replicas`` x ``unit.num_nodes`` VMs of
    ``unit.instance_type``, with the boot disk and health grace the stack gives them."""

    unit: DeployedUnit
    disk_gb: int = 200  # boot disk of each VM (hetinfra.compile.disk: deploy.disk_gb or sized for the unit)
    health_grace_s: int = MIN_HEALTH_GRACE_S  # seconds before failed health checks may replace a new VM

    @property
    def name(self) -> str:
        return self.unit.name

    @property
    def groups(self) -> list[tuple[int | None, int, str, int]]:
        """``(replica, rank, name, size)`` of the unit's self-healing groups: one group of all
        replicas for a single-node unit (named as the unit); for a multi-node pipeline one one-VM
        group per node of each replica, ``<unit>-r<replica>-n<rank>``, so a lost node is replaced
        in place and keeps its rank."""
        u = self.unit
        if u.num_nodes == 1:
            return [(None, 0, self.name, u.replicas)]
        return [(r, k, vm_name(self.name, r, k), 1) for r in range(u.replicas) for k in range(u.num_nodes)]


def short_name(name: str, limit: int) -> str:
    """``name``, or if longer than ``limit`` its head and 8 hex digits of its SHA-1."""
    if len(name) <= limit:
        return name
    return name[: limit - 9].rstrip("-") + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]


#: what Pulumi appends to a logical name to name a resource given no name ("-" and 7 characters)
AUTONAME_SUFFIX = 8


def fitted(logical: str, limit: int, arg: str = "name") -> dict[str, str]:
    """The name argument (``arg``: the provider's, e.g. azure-native's ``virtual_network_name``) of a
    resource whose logical name is ``logical`` and whose cloud allows ``limit`` characters: none where
    Pulumi's own name (``logical`` and AUTONAME_SUFFIX) fits, so a deployed stack keeps its names and is
    replaced create-before-delete; else ``logical`` cut to the limit with a hash (:func:`short_name`).
    The logical names carry ``<service>-<cloud>-<region>``: a 40-character service in us-central1 made
    a 71-character GCE subnet name that `pulumi up` refuses."""
    return {} if len(logical) + AUTONAME_SUFFIX <= limit else {arg: short_name(logical, limit)}


def vm_name(unit: str, replica: int, rank: int) -> str:
    """``<unit>-r<replica>-n<rank>``, cut to MAX_VM_NAME with a hash of the unit name if longer."""
    suffix = f"-r{replica}-n{rank}"
    return short_name(unit, MAX_VM_NAME - len(suffix)) + suffix


def health_grace_s(plan: Plan, alloc: Allocation) -> int:
    """Seconds a new VM of ``alloc`` gets to answer /health: BOOT_S plus the checkpoint's download,
    rounded up to a minute, at least MIN_HEALTH_GRACE_S (unknown model size: the minimum)."""
    need = BOOT_S + (alloc_weights_gb(plan, alloc) or 0.0) / DOWNLOAD_GB_PER_S
    return max(MIN_HEALTH_GRACE_S, int(math.ceil(need / 60.0)) * 60)


@dataclass(frozen=True)
class FleetArgs:
    """Everything one cloud region's fleet needs; secrets are passed separately as Pulumi inputs."""

    cloud: str
    region: str
    units: tuple[VMGroup, ...]
    service: str
    port: int = VLLM_PORT
    ingress_cidrs: tuple[str, ...] = ()
    ssh_cidrs: tuple[str, ...] = ()
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    ssh_public_key: str | None = None
    network_cidr: str = "10.42.0.0/16"  # distinct per cloud/region: hetinfra.compile.network
    subnet_cidr: str = "10.42.0.0/20"
    gateway_subnet_cidr: str = "10.42.240.0/24"  # Azure: the gateway's own subnet (and NSG) in the VNet
    management_cidrs: tuple[str, ...] = ()  # hosts that check the units' /health (cron host)
    images: dict = field(default_factory=dict, compare=False)  # role -> image id pinned (hetinfra.compile.images)
    plan: dict | None = field(default=None, compare=False)  # the whole plan, for the gateway VM

    @property
    def gateway(self) -> dict | None:
        """``deploy.gateway`` when a gateway is to be created with this fleet, else None."""
        g = ((self.plan or {}).get("deploy") or {}).get("gateway") or {}
        return g if g.get("enabled") else None

    @property
    def gateway_port(self) -> int:
        return int((self.gateway or {}).get("port", GATEWAY_PORT))

    @property
    def gateway_vm_type(self) -> str:
        """The gateway VM's type: ``deploy.gateway.<the cloud's key>``, else the cloud's default (hetinfra.facts)."""
        facts = CLOUDS[self.cloud]
        return (self.gateway or {}).get(facts.gateway_vm_key) or facts.gateway_vm_type

    @property
    def public_lb(self) -> bool:
        """The units' load balancers face the internet (hetinfra.compile.network.faces_internet)."""
        return faces_internet(gateway=bool(self.gateway), ingress_cidrs=self.ingress_cidrs,
                              management_cidrs=self.management_cidrs)

    @property
    def firewall(self) -> tuple[FirewallRule, ...]:
        """The fleet's inbound rules (hetinfra.compile.network.firewall_rules), for the stack to translate."""
        return firewall_rules(self.cloud, port=self.port, ingress_cidrs=self.ingress_cidrs, ssh_cidrs=self.ssh_cidrs,
                              management_cidrs=self.management_cidrs,
                              gateway_port=self.gateway_port if self.gateway else None)

    @property
    def instances(self) -> int:
        return sum(u.unit.replicas * u.unit.num_nodes for u in self.units)


def fleets_for(plan: Plan, cloud: str) -> list[FleetArgs]:
    """The plan's fleets on ``cloud``, one per region, in region order."""
    if cloud not in IAC_CLOUDS:
        raise ValueError(f"no Pulumi program for cloud {cloud!r}")
    deploy = plan.deploy
    allocs = {a.deployment_unit: a for a in plan.allocations}
    runtime = RuntimeConfig(runtime=deploy.runtime, vllm_version=deploy.vllm_version)
    by_region: dict[str, list[VMGroup]] = {}
    for u in sky_units(plan, include_mixed=True):
        if u.cloud != cloud:
            continue
        if u.role_nodes and (refusal := across_nodes_refusal(u.name, u.num_nodes, u.link, cloud, "pulumi")):
            raise refusal
        by_region.setdefault(u.region, []).append(VMGroup(
            u, disk_gb=disk_gb(plan, allocs[u.name]), health_grace_s=health_grace_s(plan, allocs[u.name])))
    doc = plan.to_dict()  # the gateway VM's copy of plan.json
    nets = network_cidrs(plan)
    return [FleetArgs(
        cloud=cloud, region=region, units=tuple(units), service=plan.service,
        port=deploy.port, ingress_cidrs=tuple(deploy.ingress_cidrs), ssh_cidrs=tuple(deploy.ssh_cidrs),
        runtime=runtime, ssh_public_key=deploy.ssh_public_key, plan=doc,
        network_cidr=nets[(cloud, region)], subnet_cidr=subnet(nets[(cloud, region)], 0),
        gateway_subnet_cidr=gateway_subnet(nets[(cloud, region)]),
        management_cidrs=tuple(deploy.management_cidrs),
    ) for region, units in sorted(by_region.items())]
