"""What every prefill/decode bundle in plan.json (``allocations[].disaggregation``) must satisfy, checked
where plan.json is parsed, so every reader (simulate, apply, status, replan, the gateway's hop) refuses a
hand-edited or truncated bundle with the field that is wrong instead of reading it its own way.

The readers rely on these: the simulator takes ``roles[0]`` as the prefill pool and ``roles[1]`` as
the decode pool (hetinfra.sim.split); the node scripts give each node ``engines // nodes`` engines of
its role on that node's GPUs (hetinfra.compile.bundle_nodes); deploy counts a heterogeneous bundle's
instances and prices role by role (``Allocation.instance_groups``). A bundle that breaks one of them
was simulated with its pools swapped, or deployed with engines dropped, or priced wrong, silently.

Each function returns the problem as one message (None: consistent); the validators in
hetinfra.document.allocation raise it on the field it names.
"""

from __future__ import annotations

from typing import Any, Optional

#: hetinfra.document.allocation.Disaggregation (which imports this module: named, not imported)
Disaggregation = Any

__all__ = ["role_problem", "nodes_problem", "price_problem"]

#: plan.json prices are rounded to 4 decimals: the mean over a replica's nodes is exact to this ($/h)
PRICE_TOLERANCE = 1e-3


def role_problem(d: Disaggregation, gpus_per_instance: Optional[int]) -> Optional[str]:
    """The roles' order, the xPyD name, a heterogeneous role's completeness, and each role's engines on
    its GPUs (one node: all engines of both roles on the instance's GPUs; across nodes: a role's
    engines split evenly over its nodes, each node's share within that node's GPUs)."""
    names = [r.role for r in d.roles]
    if names != ["prefill", "decode"]:
        return f"has roles {names}; a bundle lists its prefill role, then its decode role"
    pre, dec = d.roles
    if d.xpyd != f"{pre.engines}P{dec.engines}D":
        return f"xpyd is {d.xpyd!r}, but its roles have {pre.engines} prefill and {dec.engines} decode engines"
    for i, r in enumerate(d.roles):
        if r.instance_type is None and (r.gpu is not None or r.gpus_per_node is not None):
            return f"roles[{i}] names a gpu or gpus_per_node but no instance_type (a role on another node type names all three)"
        if r.instance_type is not None and (r.gpu is None or r.gpus_per_node is None):
            return f"roles[{i}] names instance_type {r.instance_type!r} without its gpu and gpus_per_node"
    if any(r.instance_type for r in d.roles) and any(r.price_per_node_usd_per_hour is None for r in d.roles):
        return "is a heterogeneous bundle, and each of its roles needs price_per_node_usd_per_hour"
    if gpus_per_instance is None:
        return None
    if all(r.nodes == 0 for r in d.roles):
        used = sum(r.engines * r.tp for r in d.roles)
        if used > gpus_per_instance:
            return f"runs {used} GPUs of engines (engines x tp of both roles) on one node of {gpus_per_instance} GPUs"
        return None
    for i, r in enumerate(d.roles):
        gpus = r.gpus_per_node or gpus_per_instance
        if r.nodes < 1:
            return f"roles[{i}] has nodes {r.nodes}; in a bundle across nodes every role has nodes of its own"
        if r.engines % r.nodes:
            return f"roles[{i}] has {r.engines} engines on {r.nodes} nodes; each node runs the same number"
        if r.engines // r.nodes * r.tp > gpus:
            return (f"roles[{i}] runs {r.engines // r.nodes} engine(s) of TP {r.tp} per node, more than the "
                    f"node's {gpus} GPUs")
    return None


def nodes_problem(d: Optional[Disaggregation], nodes_per_replica: int) -> Optional[str]:
    """A bundle's replica spans its roles' nodes: one node when they share it, else their sum."""
    if d is None:
        return None
    per_role = [r.nodes for r in d.roles]
    want = 1 if not any(per_role) else sum(per_role)
    if nodes_per_replica != want:
        return f"is {nodes_per_replica}, but its bundle's roles run on {'+'.join(map(str, per_role))} node(s)"
    return None


def price_problem(d: Optional[Disaggregation], nodes_per_replica: Optional[int], price: float) -> Optional[str]:
    """A heterogeneous bundle's price per instance is the mean of its roles' node prices over the
    replica's nodes (what deploy, status and replan count role by role)."""
    if d is None or not nodes_per_replica or not any(r.instance_type for r in d.roles):
        return None
    total = sum(r.nodes * (r.price_per_node_usd_per_hour or 0.0) for r in d.roles)
    if abs(price * nodes_per_replica - total) > PRICE_TOLERANCE * max(1, nodes_per_replica):
        return (f"is {price}, but its bundle's roles' nodes cost {total:g} $/h over {nodes_per_replica} nodes "
                f"(mean {total / nodes_per_replica:g})")
    return None
