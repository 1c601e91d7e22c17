"""A prefill/decode bundle (plan.json ``allocations[].disaggregation``, issue 37) as the simulator runs
it: two pools joined by the KV transfer (``hetinfra.sim.pools.Disaggregated``).

Each replica of the unit brings ``engines`` prefill engines and ``engines`` decode engines of its
roles; all the unit's prefill engines form the prefill pool and its decode engines the decode pool
(the gateway's two-step hop sends a request to any prefill engine, then to any decode engine of the
unit). Each engine's step model is the estimator's (``hetinfra.sim.engines``) at its role's TP. The
transfer takes ``KV_TRANSFER_LATENCY_S`` + prompt x KV bytes per token / the bundle's link
bandwidth, the figures the planner priced (plan.json ``link_gbytes_s``)."""

from __future__ import annotations

from hetinfra.catalog.interconnect import KV_TRANSFER_LATENCY_S
from hetinfra.sim.pools import Disaggregated, KVTransfer
from hetinfra.sim.replica import Replica, ReplicaConfig

__all__ = ["split_pools"]


def split_pools(alloc, build) -> tuple[list[list[Replica]], Disaggregated]:
    """([prefill replicas, decode replicas], the route) of ``alloc``; ``build(alloc_at_tp)`` gives the
    step model of one engine of a copy of ``alloc`` with the role's TP."""
    d = alloc.disaggregation
    pools = []
    for role in d.roles:  # prefill first, then decode (hetinfra.document.allocation.Disaggregation)
        engine = build(alloc.model_copy(update={"tp": role.tp, "pp": 1, "nodes_per_replica": None,
                                                "engines_per_instance": role.engines, "disaggregation": None}))
        pools.append([Replica(engine, ReplicaConfig()) for _ in range(alloc.count * role.engines)])
    transfer = KVTransfer(KV_TRANSFER_LATENCY_S, float(d.kv_bytes_per_token), float(d.link_gbytes_s) * 1e9)
    return pools, Disaggregated(transfer)
