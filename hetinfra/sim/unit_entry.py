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

from dataclasses import dataclass

import numpy as np

from hetinfra.sim.batches import batch_stats
from hetinfra.sim.columns import UnitRequests, block, respanned
from hetinfra.sim.stability import failed, stability
from hetinfra.sim.stats import objective_from_slo

__all__ = ["Measured", "kept", "measured_columns", "unit_entry"]


def measured_columns(reqs: UnitRequests, warm_from: int) -> tuple[np.ndarray, ...]:
    """The unit's measured requests (request id >= ``warm_from``: after its model's warm-up) as the
    columns arrival, first, finish, output, preempted, class (in arrival order). A unit's request
    ids ascend (:class:`UnitRequests`), so the measured ones are its last: views of its columns, not
    the copies a mask takes (copying them for every unit and model was 2.6% of verification's time).
    ``reqs`` may be the memo's :class:`Measured` (only measured rows: all of them)."""
    s = slice(int(np.searchsorted(reqs.rid, warm_from)), None)
    return reqs.arrival[s], reqs.first[s], reqs.finish[s], reqs.output[s], reqs.preempted[s], reqs.cls[s]


def _strata(reqs: UnitRequests, origin_ix: np.ndarray | None) -> np.ndarray:
    """Each request's stratum for the drift test (hetinfra.sim.stability): its class and, where the
    model's requests come from several origins, its origin, as one integer."""
    cls = reqs.cls.astype(np.int64)
    if origin_ix is None:
        return cls
    origin = np.asarray(origin_ix)[reqs.rid].astype(np.int64)
    return cls * (int(origin.max(initial=0)) + 1) + origin


@dataclass(frozen=True)
class Measured:
    """A unit-run's measured requests as the simulation memo keeps them (:func:`kept`): the columns its
    model's entry (``plan_sim._model_entry``) and origin report (``network.origin_report``) read, named
    as :class:`UnitRequests` names them, so :func:`measured_columns` and the report read either."""

    rid: np.ndarray
    arrival: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    output: np.ndarray
    preempted: np.ndarray
    cls: np.ndarray

    def __len__(self) -> int:
        return len(self.rid)


def kept(reqs: UnitRequests, warm_from: int) -> Measured:
    """What of a simulated unit's requests a later simulation can read (:class:`Measured`), copied so
    that the rest is freed: its measured rows only (a model's statistics and origin report leave the
    warm-up out), without the columns no statistic reads (prompt, replica), and each integer column in
    the smallest type that holds its values (:func:`_narrow`): about 32 bytes a request instead of 72.
    Floats keep float64: the statistics' arithmetic reads them as they are."""
    s = slice(int(np.searchsorted(reqs.rid, warm_from)), None)
    return Measured(_narrow(reqs.rid[s]), reqs.arrival[s].copy(), reqs.first[s].copy(), reqs.finish[s].copy(),
                    _narrow(reqs.output[s]), _narrow(reqs.preempted[s]), _narrow(reqs.cls[s]))


def _narrow(a: np.ndarray) -> np.ndarray:
    """The integers ``a`` copied into the smallest signed type whose range holds every value and the
    value one below the smallest. Exact wherever the statistics read them: they compare them (output
    > 1, preempted > 0, class == k), index with them (request ids), subtract one from an output,
    divide a float64 by them (numpy converts the integer to float64 first, exactly) or concatenate
    them with int64 columns (promoted, values unchanged)."""
    lo, hi = (int(a.min()), int(a.max())) if len(a) else (0, 0)
    for t in (np.int8, np.int16, np.int32):
        bounds = np.iinfo(t)
        if bounds.min < lo and hi <= bounds.max:
            return a.astype(t)
    return a.copy()


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
    steady = stability(reqs.arrival, reqs.first, reqs.finish, reqs.rid >= info["warm"], obj.ttft_ms, reqs.preempted,
                       lambda: _strata(reqs, info.get("origin_ix")))
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
