"""Address plan of the fleets: a distinct /16 per (cloud, region), so VPCs and VNets can be peered
or joined by VPN without overlap (text only; stacks and apply's preflight use it).

``deploy.network_cidrs`` pins a fleet's network (``{"aws/us-east-1": "10.50.0.0/16"}``); every
other fleet gets ``10.<64 + hash(cloud/region) mod 128>.0.0/16``: stable when regions come and go
(a re-plan that adds a region never moves an existing VPC, which would replace it). Two fleets
whose hashes collide take the next free octet, in (cloud, region) order; pinned networks are
never given to another fleet. Inside a fleet's network:

- ``subnet(i)``: the i-th /20 (AWS: one per availability zone; GCP and Azure: the fleet subnet is 0);
- ``gateway_subnet``: the /24 at x.x.240.0 (Azure's gateway subnet).
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import TYPE_CHECKING

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
