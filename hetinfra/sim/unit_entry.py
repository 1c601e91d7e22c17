"""One simulated unit's simulation.json entry, computed on the thread that served the unit
(``hetinfra.sim.plan_sim._simulate_units``).

Why there: a unit's statistics (its latency block's order statistics, its batch means, its stability
record) read only its own request columns, its replicas and its model's objective, so they are a
pure function of what its replay produced. Computed on the unit's thread, their numpy work (the
partitions, sums and medians release the GIL) overlaps the other units' replays and statistics
instead of running one unit after another on the main thread once every replay is done: on the
32-model fleets they were about a fifth of verification's CPU time, all of it serial. Each entry is
exactly what the serial code computed (the same functions on the same arrays), whatever the threads'
timing; the main thread still assembles the entries in allocation order.
"""

from __future__ import annotations

import numpy as np

from hetinfra.sim.batches import batch_stats
from hetinfra.sim.columns import UnitRequests, block, respanned
from hetinfra.sim.stability import failed, stability
from hetinfra.sim.stats import objective_from_slo

__all__ = ["measured_columns", "unit_entry"]


def measured_columns(reqs: UnitRequests, warm_from: int) -> tuple[np.ndarray, ...]:
    """The unit's measured requests (request id >= ``warm_from``: after its model's warm-up) as the
    columns arrival, first, finish, output, preempted, class (in arrival order). A unit's request
    ids ascend (:class:`UnitRequests`), so the measured ones are its last: views of its columns, not
    the copies a mask takes (copying them for every unit and model was 2.6% of verification's time)."""
    s = slice(int(np.searchsorted(reqs.rid, warm_from)), None)
    return reqs.arrival[s], reqs.first[s], reqs.finish[s], reqs.output[s], reqs.preempted[s], reqs.cls[s]


def unit_entry(a, ue, replicas: list, reqs: UnitRequests, info: dict, batches: bool) -> tuple[tuple, dict, dict]:
    """(its measured columns, its latency block over its span for its model's entry, its
    simulation.json entry) of allocation ``a`` served by ``replicas`` (engine ``ue``); ``info``: its
    model's (plan_sim's model_info entry: the plan model and the warm-up); ``batches``: with the run's
    batch means (verification's, at a seed that reads them: WorkloadConfig.batch_means)."""
    cols = measured_columns(reqs, info["warm"])
    obj = objective_from_slo(info["plan"].slo.model_dump())
    t0 = float(cols[0].min()) if len(cols[0]) else 0.0
    end = float(reqs.finish.max()) if len(reqs) else 0.0
    span = max(end - t0, 1e-12)
    horizon = max(end, 1e-12)  # replicas exist from time 0
    nrep = len(replicas) or 1
    blocks = replicas[0].blocks if replicas else 1
    latency = block(*cols[:5], obj, span)
    fresh = respanned(latency, len(cols[0]), span)
    if batches:  # one run's batch means (hetinfra.sim.batches)
        latency["batches"] = batch_stats(*cols[:4], obj)
    steady = stability(reqs.arrival, reqs.first, reqs.finish, reqs.rid >= info["warm"], obj.ttft_ms, reqs.preempted)
    latency["objective"] = failed(latency["objective"], steady)  # an unstable unit misses, whatever its tails
    out = {"unit": a.unit, "model": a.model, "gpu": a.gpu, "tp": a.tp, "pp": a.pp,
           # replicas as plan.json counts them (allocations[].count); engines: what was simulated
           # (count x engines per instance; a prefill/decode bundle's prefill and decode engines)
           "replicas": a.count, "engines": len(replicas), "step_model": ue.step_model, "profile_factor": ue.profile_factor,
           "kv_blocks_per_replica": blocks, **latency, "stability": steady,
           # busy fraction: near 1 whenever a request is in flight (continuous batching), so the
           # mean batch and the KV occupancy say more about how full a replica is
           "utilization": round(sum(r.busy_s for r in replicas) / (nrep * horizon), 5),
           "batch": {"mean": round(sum(r.seq_area for r in replicas) / (nrep * horizon), 3),
                     "max": max((r.seq_max for r in replicas), default=0),
                     "max_num_seqs": replicas[0].max_seqs if replicas else None},
           "waiting": {"mean": round(sum(r.q_area for r in replicas) / (nrep * horizon), 4),
                       "max": max((r.q_max for r in replicas), default=0)},
           "kv_occupancy": {"mean": round(sum(r.kv_area for r in replicas) / (nrep * horizon * blocks), 5),
                            "max": round(max((r.kv_max for r in replicas), default=0) / blocks, 5)},
           "preemptions": sum(r.preemptions for r in replicas), "steps": sum(r.steps for r in replicas)}
    return cols, fresh, out
