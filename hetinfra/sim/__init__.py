"""Discrete-event simulation of a plan: vLLM's scheduler per replica, the gateway's routing, bursts.

Public API (what the CLI and the planner call)::

    from hetinfra.sim import WorkloadConfig, simulate_plan_file, simulate_plan, Objective
    doc = simulate_plan_file("out/chat", config=WorkloadConfig(requests=20000, load=1.0, burst_cv=1.0, seed=0))
    doc["met"], [u["objective"]["ratio"] for u in doc["units"]]

Modules: ``replica`` (one engine), ``workload`` (arrivals, sizes), ``engines`` (step models of plan
units), ``plan_sim`` (the fleet), ``stats`` (percentiles, objectives), ``stability`` (steady state
per unit), ``replications`` (seeds, replications and their judgement with a confidence bound),
``bounds`` (Student-t and Clopper-Pearson without scipy), ``check`` (what ``hetinfra simulate``
runs), ``report`` (JSON, SVG, text).
"""

from hetinfra.sim.plan_sim import PLAN_VERSION, SIMULATOR_VERSION, load_plan, run_replicas, simulate_plan, simulate_plan_file
from hetinfra.sim.replica import Replica, ReplicaConfig, Request, ScaledEngine
from hetinfra.sim.stats import Objective, objective_from_slo
from hetinfra.sim.workload import WorkloadConfig

__all__ = ["PLAN_VERSION", "SIMULATOR_VERSION", "Objective", "Replica", "ReplicaConfig", "Request", "ScaledEngine",
           "WorkloadConfig", "load_plan", "objective_from_slo", "run_replicas", "simulate_plan", "simulate_plan_file"]
