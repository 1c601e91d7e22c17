"""What every prefill/decode bundle in plan.json (``allocations[].disaggregation``) must satisfy, checked
where plan.json is parsed, so every reader (simulate, apply, status, replan, the gateway's hop) refuses a
hand-edited or truncated bundle with the field that is wrong instead of reading it its own way.

The readers rely on these: the simulator takes ``roles[0]`` as the prefill pool and ``roles[1]`` as
the decode pool (hetinfra.sim.split); the node scripts give each node ``engines // nodes`` engines of
its role on that node's GPUs (hetinfra.compile.bundle_nodes); deploy counts a heterogeneous bundle's
instances and prices role by role (``Allocation.instance_groups``). A bundle that breaks one of them
was simulated with its pools swapped, or deployed with engines dropped, or priced wrong, silently.

Each function returns the problem as one message (None: consistent); the validators in
hetinfra.document.allocation raise it on the field it names. The checks on plain values
(:func:`order_problem`, :func:`spread_problem`, :func:`node_count_problem`) are also what a deployed
unit (hetinfra.compile.unit.DeployedUnit) checks, so a bundle is judged by one rule wherever it is
read (its RDMA link, a catalog fact this layer does not import: hetinfra.compile.unit.link_problem);
:func:`role_node` is the one reading of a role's node type.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

#: hetinfra.document.allocation.Disaggregation, Role and Allocation (which import this module: named, not imported)
Disaggregation = Any
Role = Any
Allocation = Any

__all__ = ["RoleNode", "node_count_problem", "nodes_problem", "order_problem", "price_problem",
           "role_node", "role_problem", "spread_problem"]

#: plan.json prices are rounded to 4 decimals: the mean over a replica's nodes is exact to this ($/h)
PRICE_TOLERANCE = 1e-3
#: a bundle's roles, in the order every reader takes them (the simulator's pools, the node ranks)
ROLE_ORDER = ["prefill", "decode"]


class RoleNode(NamedTuple):
    """The node one role of a bundle runs on."""

    instance_type: str
    gpu: str
    gpus: int


def role_node(r: Role, alloc: Allocation) -> RoleNode:
    """Role ``r``'s node: its own instance type, GPU and GPUs where plan.json names them (a
    heterogeneous bundle), else the allocation's."""
    return RoleNode(r.instance_type or alloc.instance_type, r.gpu or alloc.gpu, r.gpus_per_node or alloc.gpus_per_instance)


def order_problem(names: Sequence) -> Optional[str]:
    """The roles' order: prefill, then decode."""
    if list(names) != ROLE_ORDER:
        return f"has roles {list(names)}; a bundle lists its prefill role, then its decode role"
    return None


def spread_problem(shapes: Sequence[tuple[int, int, int, int]], label: str = "roles") -> Optional[str]:
    """A bundle across nodes, per role (engines, tp, nodes, GPUs per node): every role on nodes of
    its own, its engines split evenly over them, each node's share within that node's GPUs."""
    for i, (engines, tp, nodes, gpus) in enumerate(shapes):
        if nodes < 1:
            return f"{label}[{i}] has nodes {nodes}; in a bundle across nodes every role has nodes of its own"
        if engines % nodes:
            return f"{label}[{i}] has {engines} engines on {nodes} nodes; each node runs the same number"
        if engines // nodes * tp > gpus:
            return (f"{label}[{i}] runs {engines // nodes} engine(s) of TP {tp} per node, more than the "
                    f"node's {gpus} GPUs")
    return None


def node_count_problem(per_role: Sequence[int], nodes: int) -> Optional[str]:
    """A bundle's replica spans its roles' nodes (``per_role``): one node when they share it, else their sum."""
    want = 1 if not any(per_role) else sum(per_role)
    if nodes != want:
        return f"is {nodes}, but its bundle's roles run on {'+'.join(map(str, per_role))} node(s)"
    return None


def role_problem(d: Disaggregation, gpus_per_instance: Optional[int]) -> Optional[str]:
    """The roles' order, the xPyD name, a heterogeneous role's completeness, and each role's engines on
    its GPUs (one node: all engines of both roles on the instance's GPUs; across nodes: a role's
    engines split evenly over its nodes, each node's share within that node's GPUs)."""
    why = order_problem([r.role for r in d.roles])
    if why:
        return why
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
    return spread_problem([(r.engines, r.tp, r.nodes, r.gpus_per_node or gpus_per_instance) for r in d.roles])


def nodes_problem(d: Optional[Disaggregation], nodes_per_replica: int) -> Optional[str]:
    """A bundle's replica spans its roles' nodes: one node when they share it, else their sum."""
    return None if d is None else node_count_problem([r.nodes for r in d.roles], nodes_per_replica)


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
