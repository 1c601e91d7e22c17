"""Is a unit in steady state at the offered load? (issue 33 point 2; docs/internals/simulator.md)

A finite run can pass a unit whose queue grows without end: its percentiles are taken before the
backlog reaches them. Two tests over the MEASURED window (from the first post-warm-up arrival to the
last arrival of the unit), both on what the run already holds:

* throughput: over the SECOND half of the measured window, the requests the unit completes per
  second against the requests that arrive per second. In steady state the two differ only by the
  change in the number of requests in the system between the half's ends; an overloaded unit
  completes at its capacity. The second half, because a short run's system is still filling up
  in the first (a request that decodes for a minute has not finished in a window of two);
  tested only when the half starts at least the 95th percentile of the requests' decode time
  (first token to finish) after the run's first arrival. Unstable when completed < (1 - tol) x
  arrived, tol = max(THROUGHPUT_TOL, SIGMAS x sqrt(2 x V) / m), m the arrivals in the half: the
  two differ by the change in N, the requests in the system, between the half's ends, so the
  comparison's noise is the spread of N at each end, V = max(L, the variance of N about its
  least-squares line over the measured window). L = arrival rate x mean decode time (Little's law)
  is N's variance were N Poisson (an infinite-server queue); a batching engine's N is not: a burst
  slows every decode in the batch and the count swells with it, 1.5-7x L's variance on the
  examples' plans (median over 150-600 runs each), which made the Poisson rule's z-score spread
  1.2-2.7 standard deviations instead of 1 (services/committed.yaml's small unit failed 1 run in
  100). About the line, because a growing queue's N rises through the run: its spread about a
  constant would be the growth itself and hide it. SIGMAS = 5 because the test runs on every unit
  of every replication of every verification and audit (thousands of unit-runs per plan) and the
  count's tails are heavier than a normal's (the largest of 3,100 examples' unit-runs: 4.7).
* drift: the measured requests in arrival order are cut into WINDOWS windows of equal count; the
  median TTFT of the last window against the median TTFT of the middle ones (2 .. WINDOWS - 1). A
  growing queue raises every request's TTFT, linearly in time; a stable one only fluctuates. The
  median, not the mean: one preemption or burst in a small unit's last window (a 12 s TTFT among
  700 of 0.3 s) moves a mean by half and a median not at all. Unstable when the last window's
  median exceeds DRIFT_MAX x the middle's AND by more than DRIFT_FLOOR x the TTFT objective
  (fluctuations far below the objective are not a backlog).

* KV thrashing (a preemption cascade's precursor): over ALL the unit's requests (a burst while the
  fleet fills up is a burst all the same: the warm-up is left out of the latencies because an empty
  fleet flatters them, which it does not do to thrashing), the preemptions P and the requests
  preempted at least once R. A preemption (vLLM's recompute mode) frees the
  victim's KV blocks and puts it back in the queue; where the cache was only momentarily full, it
  is re-admitted and finishes (one preemption per preempted request); where the cache stays
  oversubscribed, it is preempted again after its recompute, and every recompute is prefill work
  the unit does twice: the lost capacity fills the cache further. Read as a branching process,
  each preemption begets m more on average, so a victim's re-preemptions are geometric with mean
  m / (1 - m) and variance m / (1 - m)^2, and m -> 1 is the cascade; ``repreemption`` = 1 - R / P
  estimates m. Unstable when the run shows m past REPREEMPTION_MAX (0.75: more than 4 preemptions
  per victim on average) beyond its noise: ``repreemption_low``, the smallest m at which the
  re-preemptions X = P - R lie within SIGMAS standard deviations of their mean R m / (1 - m), is past
  REPREEMPTION_MAX (:func:`repreemption_low`). The estimate alone flagged a handful of victims: of
  the 32-model fleets' audits (bench_scale.py --mix other, linked, seeds 1, 3, 5; 10 runs at the
  promised load and one at 5x the requests each), 3 runs of 33 flagged one unit each: 11 victims
  preempted 45 times (m = 0.76), 3 x 23 (0.87) and 4 x 21 (0.81, a 5x run), on units whose
  throughput (0.998-1.000) and TTFT drift (0.98-1.02) were steady and whose percentiles were a
  third to two thirds of their objectives. The cascades those plans do have, at 1.3-1.8x their load
  (summarize.yaml's plan, the fleets'), preempt thousands of requests at m = 0.01-0.72, which the
  throughput and drift tests flag. A steady state that preempts now and then (each victim once:
  services/batch.yaml's plan preempts 8-15 requests per run, m = 0, and keeps its objective at 5x
  the requests) passes; one request preempted 22 times or more in a run is flagged on its own.

Fewer than MIN_REQUESTS measured requests: no test (``stable`` true, ``tested`` false).
An unstable unit fails its objective whatever its percentiles: its ``objective.ratio`` becomes at
least max(offered / completed, drift, 1 + THROUGHPUT_TOL), and its model misses.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["THROUGHPUT_TOL", "SIGMAS", "WINDOWS", "DRIFT_MAX", "DRIFT_FLOOR", "MIN_REQUESTS", "REPREEMPTION_MAX", "repreemption_low", "stability",
           "failed"]

THROUGHPUT_TOL = 0.05
SIGMAS = 5.0
GRID = 1024  # points of the measured window at which the in-system count N is read for its spread
WINDOWS = 5
DRIFT_MAX = 1.5
DRIFT_FLOOR = 0.1
MIN_REQUESTS = 100
REPREEMPTION_MAX = 0.75


def stability(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, warm: np.ndarray,
              ttft_objective_ms: float, preempted: np.ndarray | None = None) -> dict:
    """The stability record of one unit's requests (all of them, in arrival order; ``warm``: which are
    measured, i.e. after the warm-up; ``preempted``: how often each was preempted, None: never)."""
    measured = np.flatnonzero(warm)
    n = len(measured)
    if n < MIN_REQUESTS:
        return {"stable": True, "tested": False, "offered_rps": None, "completed_rps": None,
                "throughput_ratio": None, "drift": None, "repreemption": None, "repreemption_low": None}
    thrashing, kv = _thrashing(preempted)
    short, record = _throughput(arrival, first, finish, measured)
    ttft = first[measured] - arrival[measured]
    cuts = np.array_split(ttft, WINDOWS)
    middle = float(np.median(np.concatenate(cuts[1:-1])))
    last = float(np.median(cuts[-1]))
    drift = last / middle if middle > 0 else 1.0
    drifting = drift > DRIFT_MAX and (last - middle) * 1e3 > DRIFT_FLOOR * ttft_objective_ms
    return {"stable": not (short or drifting or thrashing), "tested": True, **record, "drift": round(drift, 4),
            "ttft_ms": {"middle": round(middle * 1e3, 3), "last": round(last * 1e3, 3)}, **kv}


def _thrashing(preempted: np.ndarray | None) -> tuple[bool, dict]:
    """(whether the requests' preemptions re-preempt past REPREEMPTION_MAX beyond their noise, the
    record's KV fields): see the module docstring."""
    total = int(preempted.sum()) if preempted is not None else 0
    if total == 0:
        return False, {"preemptions": 0, "preempted_requests": 0, "repreemption": None, "repreemption_low": None}
    victims = int(np.count_nonzero(preempted))
    low = repreemption_low(victims, total)
    return low > REPREEMPTION_MAX, {"preemptions": total, "preempted_requests": victims,
                                    "repreemption": round(1.0 - victims / total, 4), "repreemption_low": round(low, 4)}


def repreemption_low(victims: int, preemptions: int, sigmas: float = SIGMAS) -> float:
    """The lower confidence bound on the re-preemption m of ``victims`` requests preempted
    ``preemptions`` times in all: the smallest m at which their re-preemptions X = P - R are within
    ``sigmas`` standard deviations of their mean under m, z(m) = (X - R m/(1-m)) / (sqrt(R m)/(1-m))
    = (X (1-m) - R m) / sqrt(R m), which falls from +inf at m = 0 through ``sigmas`` once (bisected
    on (0, 1), whose ends it never evaluates); 0 where no victim was preempted again. Past
    REPREEMPTION_MAX exactly where z(REPREEMPTION_MAX) > sigmas: the run's re-preemptions are that
    many standard deviations past what the limit allows."""
    from hetinfra.sim.bounds import bisect_root

    x = preemptions - victims
    if victims <= 0 or x <= 0:
        return 0.0
    return bisect_root(lambda m: sigmas - (x * (1.0 - m) - victims * m) / math.sqrt(victims * m), 0.0, 1.0)


def _throughput(arrival, first, finish, measured) -> tuple[bool, dict]:
    """(whether the unit completes too few, the record's throughput fields): see the module docstring."""
    t0, t1 = float(arrival[measured[0]]), float(arrival[measured[-1]])
    half = 0.5 * (t0 + t1)
    decode = finish[measured] - first[measured]
    span = t1 - half
    arrived = int(np.count_nonzero(arrival[measured] >= half))
    tested = span > 0 and arrived > 0 and half - float(arrival[0]) >= float(np.percentile(decode, 95))
    if not tested:
        return False, {"throughput_tested": False, "offered_rps": None, "completed_rps": None,
                       "throughput_ratio": None}
    completed = int(np.count_nonzero((finish >= half) & (finish <= t1)))
    in_service = arrived / span * float(decode.mean())
    spread = max(in_service, _in_system_variance(arrival, finish, t0, t1))
    tol = max(THROUGHPUT_TOL, SIGMAS * math.sqrt(2.0 * spread) / arrived)
    ratio = completed / arrived
    return ratio < 1.0 - tol, {"throughput_tested": True, "offered_rps": round(arrived / span, 5),
                               "completed_rps": round(completed / span, 5), "throughput_ratio": round(ratio, 5),
                               "throughput_tolerance": round(tol, 4)}


def _in_system_variance(arrival: np.ndarray, finish: np.ndarray, t0: float, t1: float) -> float:
    """The variance of N(t), the unit's requests arrived by t and not finished, about its least-squares
    line over [t0, t1] (read at GRID points): see the module docstring. Each time is binned to the
    grid by arithmetic (O(n), no sort of n: this runs on every unit of every replication); the
    arrivals are in order already, so the grid is searched in them instead."""
    step = (t1 - t0) / (GRID - 1)
    arrived = np.searchsorted(arrival, t0 + step * (np.arange(GRID) + 1e-9), side="right")  # as _by_grid counts
    count = (arrived - _by_grid(finish, t0, step)).astype(float)
    x = np.arange(GRID) - 0.5 * (GRID - 1)
    slope = float(x @ (count - count.mean())) / float(x @ x)
    return float(np.var(count - slope * x))


def _by_grid(times: np.ndarray, t0: float, step: float) -> np.ndarray:
    """How many of ``times`` are <= each point t0 + j x step of the grid (j < GRID; NaN: never)."""
    # the first grid point at or after each time; 1e-9 of a step: a time ON a grid point (the window's
    # ends are arrivals) counts there whatever the division's last bit
    first = np.nan_to_num(np.ceil((times - t0) / step - 1e-9), nan=GRID)
    return np.cumsum(np.bincount(np.clip(first, 0, GRID).astype(np.int64), minlength=GRID + 1))[:GRID]


def failed(objective: dict, record: dict) -> dict:
    """``objective`` (stats.evaluate's) of a unit whose ``record`` says unstable: not met, and its ratio
    at least the instability's (see the module docstring); unchanged when stable."""
    if record["stable"]:
        return objective
    short = 1.0 / max(record["throughput_ratio"], 1e-9) if record.get("throughput_ratio") is not None else 0.0
    worst = max(short, record["drift"], 1.0 + THROUGHPUT_TOL)
    ratio = max(objective.get("ratio") or 0.0, worst)
    return {**objective, "met": False, "ratio": round(ratio, 4),
            "ratios": {**objective.get("ratios", {}), "stability": round(worst, 4)}}
