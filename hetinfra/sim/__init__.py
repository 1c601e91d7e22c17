"""Discrete-event simulation of a plan: vLLM's scheduler per replica, the gateway's routing, bursts.

Public API (what the CLI and the planner call)::

    from hetinfra.sim import WorkloadConfig, simulate_plan_file, simulate_plan, Objective
    doc = simulate_plan_file("out/chat", config=WorkloadConfig(requests=20000, load=1.0, burst_cv=1.0, seed=0))
    doc["met"], [u["objective"]["ratio"] for u in doc["units"]]

Modules: ``replica`` (one engine: its ``policy`` (scheduler), ``kv`` (KV allocator) and ``clock``
(windows of steps, the event loop)), ``pools`` (routes between pools: prefill -> KV transfer ->
decode), ``core`` (the compiled default), ``workload`` (arrivals, sizes), ``engines`` (step models of plan
units), ``plan_sim`` (the fleet; ``memo``: what verification keeps between its simulations), ``stats`` (percentiles, objectives), ``stability`` (steady state
per unit), ``replications`` (seeds, replications and their judgement with a confidence bound),
``bounds`` (Student-t and Clopper-Pearson without scipy), ``check`` (what ``hetinfra simulate``
runs), ``report`` (JSON, SVG, text).
"""

from __future__ import annotations

from hetinfra import lazy_names

# The public names load on first use, not with the package (hetinfra.lazy_names says why).
#: each public name and the submodule that defines it
_LAZY = {**dict.fromkeys(("PLAN_VERSION", "SIMULATOR_VERSION", "load_plan", "run_replicas", "simulate_plan",
                          "simulate_plan_file"), "hetinfra.sim.plan_sim"),
         **dict.fromkeys(("Replica", "ReplicaConfig", "Request", "ScaledEngine"), "hetinfra.sim.replica"),
         **dict.fromkeys(("Objective", "objective_from_slo"), "hetinfra.sim.stats"),
         "WorkloadConfig": "hetinfra.sim.workload"}

__getattr__ = lazy_names(__name__, _LAZY)
__all__ = sorted(_LAZY)
