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
  By stratum: a unit's requests fall into strata whose TTFTs sit at different levels for reasons
  that are not a backlog, their class (a 100-token prompt and a 4,000-token one) and their origin
  (the round trip the client sees: Sydney's 160 ms against Oregon's 5). Where two such strata share
  a unit about evenly and the levels leave a gap, one median over both sits in the gap and jumps
  to either side with a window's mix (a 0.8% shift of 3,600 requests): held-out h138 (50% Sydney,
  50% Oregon) read a drift of 6.05 on 11 of 30 seeds with every latency inside its objective. So
  each request is read against its stratum's level, the median of its stratum's TTFTs in the
  middle windows (strata with fewer than MIN_STRATUM there pooled into one level): the drift is
  the median of last-window TTFT / level over the middle's, the excess the median of TTFT - level
  in the last window over the middle's. A backlog raises every stratum's TTFT, so it still reads;
  a unit of one stratum reads exactly as before. The strata are read only where the one median
  drifts (then ``drift`` is the strata's): a backlog drifts both ways, and the sort the strata take
  was a tenth of a 32-model fleet's verification when run on every unit-run.

* KV thrashing, RECORDED, NOT JUDGED (stop 56): over ALL the unit's requests, the preemptions P
  and the requests preempted at least once R; ``repreemption`` = 1 - R / P, and
  ``repreemption_low`` (:func:`repreemption_low`), the lower bound on it at SIGMAS standard
  deviations were each victim's re-preemptions geometric (a branching process: each preemption
  begetting m more). Until stop 56 a run whose ``repreemption_low`` passed REPREEMPTION_MAX (0.75)
  was unstable. It is not, because the geometric reading does not hold for the scheduler we
  simulate: vLLM preempts the LAST admitted request and puts it at the FRONT of the queue, so
  while a cache stays short for a moment the same victim is re-admitted, recomputed and preempted
  again, its preemptions one episode, not independent events. Measured: whenever the rule fired it
  fired on such episodes and never on a cascade. The 32-model fleets' audits of stop 55 (11
  victims preempted 45 times, 3 x 23, 4 x 21, on units whose throughput and drift were steady and
  whose percentiles were a third to two thirds of their objectives); a 70B model at 0.05 req/s on
  two 8 x L4 replicas (a 37,773-token KV cache, 3,500-token requests) whose runs at 1.26x its
  demand preempted 3 victims 47-49 times (``repreemption_low`` 0.77-0.78) and which met its
  objective at 0.86 of it, steady (throughput 1.000, drift 1.000), at every load up to 2x (at 2x:
  500-630 victims, m = 0.78, ratio 0.91): the flag made the cliff probe read a collapse and buy a
  third replica, 17.5% of that plan. The cascades the plans do have (summarize.yaml's, the
  fleets', at 1.3-1.8x their load) preempt thousands of requests at m = 0.01-0.72 and are caught
  by the throughput and drift tests above, whatever m reads. The counts stay in the record (and a
  model under KV pressure is still judged on them pooled over its runs:
  hetinfra.plan.kv_pressure.thrashing).

Fewer than MIN_REQUESTS measured requests: no test (``stable`` true, ``tested`` false).
An unstable unit fails its objective whatever its percentiles: its ``objective.ratio`` becomes at
least max(offered / completed, drift, 1 + THROUGHPUT_TOL), and its model misses.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["THROUGHPUT_TOL", "SIGMAS", "WINDOWS", "DRIFT_MAX", "DRIFT_FLOOR", "MIN_REQUESTS", "MIN_STRATUM", "REPREEMPTION_MAX", "drifts", "repreemption_low", "stability",
           "failed"]

THROUGHPUT_TOL = 0.05
SIGMAS = 5.0
GRID = 1024  # points of the measured window at which the in-system count N is read for its spread
WINDOWS = 5
DRIFT_MAX = 1.5
DRIFT_FLOOR = 0.1
MIN_REQUESTS = 100
MIN_STRATUM = 30  # a stratum's own level from at least this many requests of the middle windows
REPREEMPTION_MAX = 0.75


def stability(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, warm: np.ndarray,
              ttft_objective_ms: float, preempted: np.ndarray | None = None,
              strata=None) -> dict:
    """The stability record of one unit's requests (all of them, in arrival order; ``warm``: which are
    measured, i.e. after the warm-up; ``preempted``: how often each was preempted, None: never;
    ``strata``: a function giving each request's stratum, its class and origin as one integer, called only
    where the one median drifts; None: one stratum)."""
    measured = np.flatnonzero(warm)
    n = len(measured)
    if n < MIN_REQUESTS:
        return {"stable": True, "tested": False, "offered_rps": None, "completed_rps": None,
                "throughput_ratio": None, "drift": None, "repreemption": None, "repreemption_low": None}
    kv = _preemptions(preempted)
    # the measured requests' columns, gathered once for both tests
    at, first_at, finish_at = arrival[measured], first[measured], finish[measured]
    short, record = _throughput(arrival, finish, at, first_at, finish_at)
    ttft = first_at - at
    cuts = np.array_split(ttft, WINDOWS)
    mid, end = slice(len(cuts[0]), len(ttft) - len(cuts[-1])), slice(len(ttft) - len(cuts[-1]), None)
    middle, last = float(np.median(ttft[mid])), float(np.median(ttft[end]))  # the middle windows, contiguous
    drift, excess = last / middle if middle > 0 else 1.0, last - middle
    drifting = drifts(drift, excess, ttft_objective_ms)
    if drifting and strata is not None:  # a mix of strata can read as drift: judged by stratum (docstring)
        by_stratum = _stratified(ttft, strata()[measured], mid, end)
        if by_stratum is not None:
            drift, excess = by_stratum
            drifting = drifts(drift, excess, ttft_objective_ms)
    return {"stable": not (short or drifting), "tested": True, **record, "drift": round(drift, 4),
            "ttft_ms": {"middle": round(middle * 1e3, 3), "last": round(last * 1e3, 3)}, **kv}


def drifts(drift: float, excess_s: float, ttft_objective_ms: float, limit: float = DRIFT_MAX) -> bool:
    """Whether a unit's TTFT drifted past ``limit`` (its last window's median over the middle's) by more
    than DRIFT_FLOOR of the objective (``excess_s``: the last median less the middle's, s)."""
    return drift > limit and excess_s * 1e3 > DRIFT_FLOOR * ttft_objective_ms


def _stratified(ttft: np.ndarray, strata: np.ndarray, mid: slice, end: slice) -> tuple[float, float] | None:
    """(drift, excess in s) of the measured ``ttft`` read against each request's stratum level (see the
    module docstring), None where all are of one stratum: the level is the median of the stratum's TTFTs
    in the middle windows ``mid``, the strata with fewer than MIN_STRATUM there sharing the median of
    theirs (or of the whole middle, where none has one). One sort gives every stratum's median: this
    runs on every unit of every replication."""
    labels, inverse = np.unique(strata, return_inverse=True)
    if len(labels) < 2:
        return None
    in_mid, t_mid = inverse[mid], ttft[mid]
    counts = np.bincount(in_mid, minlength=len(labels))
    ordered = t_mid[np.lexsort((t_mid, in_mid))]
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    lo, hi = first + np.maximum(counts - 1, 0) // 2, first + counts // 2
    big = counts >= MIN_STRATUM
    pooled = ~big[in_mid]
    fallback = float(np.median(t_mid[pooled] if pooled.any() else t_mid))
    level = np.where(big, 0.5 * (ordered[np.minimum(lo, len(ordered) - 1)] + ordered[np.minimum(hi, len(ordered) - 1)]),
                     fallback)[inverse]
    ratio = np.divide(ttft, level, out=np.ones_like(ttft), where=level > 0)
    base = float(np.median(ratio[mid]))
    drift = float(np.median(ratio[end])) / base if base > 0 else 1.0
    gap = ttft - level
    return drift, float(np.median(gap[end]) - np.median(gap[mid]))


def _preemptions(preempted: np.ndarray | None) -> dict:
    """The record's KV fields (recorded, not judged: see the module docstring)."""
    total = int(preempted.sum()) if preempted is not None else 0
    if total == 0:
        return {"preemptions": 0, "preempted_requests": 0, "repreemption": None, "repreemption_low": None}
    victims = int(np.count_nonzero(preempted))
    return {"preemptions": total, "preempted_requests": victims, "repreemption": round(1.0 - victims / total, 4),
            "repreemption_low": round(repreemption_low(victims, total), 4)}


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


def _throughput(arrival, finish, at, first_at, finish_at) -> tuple[bool, dict]:
    """(whether the unit completes too few, the record's throughput fields): see the module docstring.
    ``at``, ``first_at``, ``finish_at``: the measured requests' arrival, first token and finish."""
    t0, t1 = float(at[0]), float(at[-1])
    half = 0.5 * (t0 + t1)
    decode = finish_at - first_at
    span = t1 - half
    arrived = int(np.count_nonzero(at >= half))
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
    first = times - t0  # the same operations as one expression, in place (this runs on every unit-run)
    first /= step
    first -= 1e-9
    np.ceil(first, out=first)
    np.nan_to_num(first, copy=False, nan=GRID)
    np.clip(first, 0, GRID, out=first)
    return np.cumsum(np.bincount(first.astype(np.int64), minlength=GRID + 1))[:GRID]


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
