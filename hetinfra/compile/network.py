"""Address plan of the fleets: a distinct /16 per (cloud, region), so VPCs and VNets can be peered
or joined by VPN without overlap (text only; stacks and apply's preflight use it).

``deploy.network_cidrs`` pins a fleet's network (``{"aws/us-east-1": "10.50.0.0/16"}``); every
other fleet gets ``10.<64 + hash(cloud/region) mod 128>.0.0/16``: stable when regions come and go
(a re-plan that adds a region never moves an existing VPC, which would replace it). Two fleets
whose hashes collide take the next free octet, in (cloud, region) order; pinned networks are
never given to another fleet. Inside a fleet's network:

- ``subnet(i)``: the i-th /20 (AWS: one per availability zone; GCP and Azure: the fleet subnet is 0);
- ``gateway_subnet``: the /24 at x.x.240.0 (Azure's gateway subnet).

And who may reach what (:func:`firewall_rules`): one cloud-neutral list of inbound rules per fleet,
which each stack translates into its cloud's resources (AWS security groups, GCP firewalls, Azure
NSGs; docs/guides/pulumi.md, "Secrets and firewalls").
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetinfra.facts import CLOUDS, SSH_PORT
from hetinfra.price_feeds.offers import KNOWN_CLOUDS

if TYPE_CHECKING:
    from hetinfra.document import Plan

BASE_OCTET, SPAN = 64, 128


def fleet_keys(plan: Plan) -> list[tuple[str, str]]:
    return sorted({(a.cloud, a.region) for a in plan.allocations if a.cloud in KNOWN_CLOUDS and not a.custom_cloud})


def _octet(cloud: str, region: str) -> int:
    return BASE_OCTET + int(hashlib.sha256(f"{cloud}/{region}".encode()).hexdigest()[:8], 16) % SPAN


def network_cidrs(plan: Plan) -> dict[tuple[str, str], str]:
    """(cloud, region) -> the fleet's network CIDR, for every fleet of the plan."""
    pinned = {tuple(k.split("/", 1)): v for k, v in plan.deploy.network_cidrs.items()}
    nets = [ipaddress.ip_network(v) for v in pinned.values()]
    for i, a in enumerate(nets):
        for b in nets[i + 1:]:
            if a.overlaps(b):
                raise ValueError(f"deploy.network_cidrs: {a} and {b} overlap; give every cloud/region its own range")
    out: dict[tuple[str, str], str] = {}
    taken = list(nets)
    for key in fleet_keys(plan):
        if key in pinned:
            out[key] = pinned[key]
            continue
        octet = _octet(*key)
        for step in range(SPAN):
            cand = ipaddress.ip_network(f"10.{BASE_OCTET + (octet - BASE_OCTET + step) % SPAN}.0.0/16")
            if not any(cand.overlaps(t) for t in taken):
                break
        else:
            raise ValueError("no free 10.x.0.0/16 left for the plan's fleets; pin deploy.network_cidrs")
        taken.append(cand)
        out[key] = str(cand)
    return out


def subnet(network: str, i: int) -> str:
    net = ipaddress.ip_network(network)
    return str(list(net.subnets(new_prefix=max(net.prefixlen, 20)))[i])


def gateway_subnet(network: str) -> str:
    net = ipaddress.ip_network(network)
    subs = list(net.subnets(new_prefix=max(net.prefixlen, 24)))
    return str(subs[min(240, len(subs) - 1)])


# ---- firewall -------------------------------------------------------------------------------------
#: who a rule admits (each stack translates it to its cloud's terms):
#: ``cidrs``: the rule's CIDRs; ``fleet``: the fleet's own VMs; ``probers``: the cloud's load-balancer
#: health checkers; ``gateway``: the region's gateway VM
SOURCES = ("cidrs", "fleet", "probers", "gateway")


@dataclass(frozen=True)
class FirewallRule:
    """One inbound rule of a fleet: ``source`` may reach ``port`` (TCP; None: every protocol and
    port) on the ``target`` VMs (``fleet``: the GPU VMs; ``gateway``: the gateway VM)."""

    name: str  # the cloud's rule or resource name derives from it (GCP ``<fleet>-fw-<name>``, Azure ``allow-<name>``)
    target: str
    source: str
    port: int | None
    cidrs: tuple[str, ...] = ()  # source cidrs; for probers, the cloud's published ranges (none: the cloud's default)
    description: str = ""


def faces_internet(*, gateway: bool, ingress_cidrs: Sequence[str], management_cidrs: Sequence[str]) -> bool:
    """Whether the units' load balancers face the internet: clients (no gateway) or management hosts
    must reach them from outside; else they are internal (the gateway reaches them inside)."""
    return not gateway and bool(ingress_cidrs or management_cidrs)


def firewall_rules(cloud: str, *, port: int, ingress_cidrs: Sequence[str] = (), ssh_cidrs: Sequence[str] = (),
                   management_cidrs: Sequence[str] = (), gateway_port: int | None = None) -> tuple[FirewallRule, ...]:
    """The inbound rules of one fleet of ``cloud`` (``gateway_port``: the gateway's, None without one),
    in the order the stacks write them. Nothing else is open: clients reach the vLLM ``port`` only
    without a gateway (with one, only the gateway's port, and vLLM only from the gateway); SSH only
    from ``ssh_cidrs``; the fleet's own VMs reach each other on every port (Ray, pipeline stages);
    the load balancers' probers and ``management_cidrs`` (the cron host) reach the vLLM port."""
    gateway = gateway_port is not None
    probers = CLOUDS[cloud].health_check_ranges
    if faces_internet(gateway=gateway, ingress_cidrs=ingress_cidrs, management_cidrs=management_cidrs):
        probers += CLOUDS[cloud].external_lb_check_ranges
    rules = [FirewallRule("internal", "fleet", "fleet", None, description="fleet-internal: Ray and pipeline stages"),
             FirewallRule("health", "fleet", "probers", port, probers,
                          description="vLLM /health from the load balancers")]
    if gateway:
        rules.append(FirewallRule("vllm-from-gateway", "fleet", "gateway", port,
                                  description="vLLM API from the gateway only"))
    elif ingress_cidrs:
        rules.append(FirewallRule("vllm", "fleet", "cidrs", port, tuple(ingress_cidrs), "vLLM API"))
    if ssh_cidrs:
        rules.append(FirewallRule("ssh", "fleet", "cidrs", SSH_PORT, tuple(ssh_cidrs), "SSH"))
    if management_cidrs:
        rules.append(FirewallRule("mgmt", "fleet", "cidrs", port, tuple(management_cidrs),
                                  "vLLM /health from management hosts"))
    if gateway and ingress_cidrs:
        rules.append(FirewallRule("gateway", "gateway", "cidrs", gateway_port, tuple(ingress_cidrs),
                                  "gateway API (clients)"))
    if gateway and ssh_cidrs:
        rules.append(FirewallRule("gateway-ssh", "gateway", "cidrs", SSH_PORT, tuple(ssh_cidrs), "SSH"))
    return tuple(rules)
