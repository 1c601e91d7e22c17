"""Typed arguments of the per-cloud GPU fleet components, built from a plan.json (no Pulumi import).

A plan allocation (model x template x cloud x region x purchase option, ``count`` replicas of
``nodes_per_replica`` VMs) becomes one :class:`FleetUnit`; the units of one (cloud, region)
make one :class:`FleetArgs`, the typed input of ``AwsGpuFleet``, ``GcpGpuFleet`` or
``AzureGpuFleet``. Custom clouds (user offers without IaC) are skipped here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.disk import disk_gb
from hetinfra.compile.network import gateway_subnet, network_cidrs, subnet
from hetinfra.compile.skypilot import SkyUnit
from hetinfra.price_feeds.offers import KNOWN_CLOUDS as IAC_CLOUDS
from hetinfra.stacks.startup import RuntimeConfig

# GCE instance names are at most 63 characters and Pulumi's auto-naming appends 8.
MAX_VM_NAME = 54


@dataclass(frozen=True)
class FleetUnit:
    """One deployment unit: ``replicas`` x ``unit.num_nodes`` VMs of ``unit.instance_type``."""

    unit: SkyUnit
    disk_gb: int = 200  # boot disk of each VM (hetinfra.compile.disk: deploy.disk_gb or sized for the unit)

    @property
    def name(self) -> str:
        return self.unit.name

    @property
    def vm_names(self) -> list[tuple[int, int, str]]:
        """(replica, rank, name) of every VM, e.g. ``chat-8b-aws-...-r0-n1``."""
        return [(r, k, vm_name(self.unit.name, r, k)) for r in range(self.unit.replicas) for k in range(self.unit.num_nodes)]


def vm_name(unit: str, replica: int, rank: int) -> str:
    """``<unit>-r<replica>-n<rank>``, cut to MAX_VM_NAME with a hash of the unit name if longer."""
    suffix = f"-r{replica}-n{rank}"
    if len(unit) + len(suffix) <= MAX_VM_NAME:
        return unit + suffix
    digest = hashlib.sha1(unit.encode()).hexdigest()[:8]
    return unit[: MAX_VM_NAME - len(suffix) - 9].rstrip("-") + "-" + digest + suffix


@dataclass(frozen=True)
class FleetArgs:
    """Everything one cloud region's fleet needs; secrets are passed separately as Pulumi inputs."""

    cloud: str
    region: str
    units: tuple[FleetUnit, ...]
    service: str
    port: int = 8000
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
    def instances(self) -> int:
        return sum(u.unit.replicas * u.unit.num_nodes for u in self.units)


def fleets_for(plan: dict, cloud: str) -> list[FleetArgs]:
    """The plan's fleets on ``cloud``, one per region, in region order."""
    if cloud not in IAC_CLOUDS:
        raise ValueError(f"no Pulumi program for cloud {cloud!r}")
    deploy = plan.get("deploy") or {}
    runtime = RuntimeConfig(runtime=deploy.get("runtime", "container"), vllm_version=deploy.get("vllm_version"))
    by_region: dict[str, list[FleetUnit]] = {}
    allocs = {a["deployment_unit"]: a for a in plan["allocations"]}
    for u in sky_units(plan, include_mixed=True):
        if u.cloud == cloud:
            by_region.setdefault(u.region, []).append(FleetUnit(u, disk_gb=disk_gb(plan, allocs[u.name])))
    nets = network_cidrs(plan)
    return [FleetArgs(
        cloud=cloud, region=region, units=tuple(units), service=plan["service"],
        port=deploy.get("port", 8000), ingress_cidrs=tuple(deploy.get("ingress_cidrs") or ()),
        ssh_cidrs=tuple(deploy.get("ssh_cidrs") or ()), runtime=runtime,
        ssh_public_key=deploy.get("ssh_public_key"), plan=plan,
        network_cidr=nets[(cloud, region)], subnet_cidr=subnet(nets[(cloud, region)], 0),
        gateway_subnet_cidr=gateway_subnet(nets[(cloud, region)]),
        management_cidrs=tuple(deploy.get("management_cidrs") or ()),
    ) for region, units in sorted(by_region.items())]

