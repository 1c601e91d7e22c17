"""A prefill/decode bundle (plan.json ``allocations[].disaggregation``, issue 37) as the simulator runs
it: two pools joined by the KV transfer (``hetinfra.sim.pools.Disaggregated``).

Each replica of the unit brings ``engines`` prefill engines and ``engines`` decode engines of its
roles; all the unit's prefill engines form the prefill pool and its decode engines the decode pool
(the gateway's two-step hop sends a request to any prefill engine, then to any decode engine of the
unit). Each engine's step model is the estimator's (``hetinfra.sim.engines``) at its role's TP, on its
role's GPU (a heterogeneous bundle: the prefill pool on GPU A's step model, the decode pool on B's). The
transfer takes ``KV_TRANSFER_LATENCY_S`` + prompt x KV bytes per token / the bundle's link
bandwidth, the figures the planner priced (plan.json ``link_gbytes_s``)."""

from __future__ import annotations

from hetinfra.catalog.interconnect import KV_TRANSFER_LATENCY_S
from hetinfra.sim.pools import Disaggregated, KVTransfer
from hetinfra.sim.replica import Replica, ReplicaConfig

__all__ = ["role_unit", "split_pools"]


def role_unit(alloc, role):
    """``alloc`` as one engine of ``role`` sees it: the role's TP, and (a heterogeneous bundle's role
    on another instance type) its GPU, so its step model is that GPU's calibrated one."""
    update = {"tp": role.tp, "pp": 1, "nodes_per_replica": None, "engines_per_instance": role.engines,
              "disaggregation": None}
    if role.gpu is not None:  # bundles are built on catalog GPUs only, so the GPU's name gives its facts
        update["gpu"] = role.gpu
    return alloc.model_copy(update=update)


def split_pools(alloc, build) -> tuple[list[list[Replica]], Disaggregated]:
    """([prefill replicas, decode replicas], the route) of ``alloc``; ``build(role_alloc)`` gives the
    step model of one engine of ``role_unit(alloc, role)``: the prefill pool on the prefill role's GPU,
    the decode pool on the decode role's (which differ in a heterogeneous bundle)."""
    d = alloc.disaggregation
    pools = []
    for role in d.roles:  # prefill first, then decode (hetinfra.document.allocation.Disaggregation)
        engine = build(role_unit(alloc, role))
        pools.append([Replica(engine, ReplicaConfig()) for _ in range(alloc.count * role.engines)])
    transfer = KVTransfer(KV_TRANSFER_LATENCY_S, float(d.kv_bytes_per_token), float(d.link_gbytes_s) * 1e9)
    return pools, Disaggregated(transfer)
