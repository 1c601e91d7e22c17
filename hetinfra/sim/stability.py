"""Is a unit in steady state at the offered load? (issue 33 point 2; docs/internals/simulator.md)

A finite run can pass a unit whose queue grows without end: its percentiles are taken before the
backlog reaches them. Two tests over the MEASURED window (from the first post-warm-up arrival to the
last arrival of the unit), both on what the run already holds:

* throughput: the requests the unit completes inside the window per second, against the rate at
  which requests arrive in it. In steady state the two differ only by the change in the number in
  the system between the window's ends (a fraction of a percent of the window's requests); an
  overloaded unit completes at its capacity. Unstable when completed < (1 - tol) x offered, tol =
  max(THROUGHPUT_TOL, 3 / sqrt(n)) for n measured requests (three standard deviations of a
  Poisson count: a small unit's window holds few completions, and the in-flight requests at its
  ends weigh more).
* drift: the measured requests in arrival order are cut into WINDOWS windows of equal count; the
  mean TTFT of the last window against the mean TTFT of the middle ones (2 .. WINDOWS - 1). A
  growing queue raises TTFT linearly in time; a stable one only fluctuates. Unstable when the
  last window's mean exceeds DRIFT_MAX x the middle's AND by more than DRIFT_FLOOR x the TTFT
  objective (fluctuations of a mean far below the objective are not a backlog).

Fewer than MIN_REQUESTS measured requests: no test (``stable`` true, ``tested`` false).
An unstable unit fails its objective whatever its percentiles: its ``objective.ratio`` becomes at
least max(offered / completed, drift, 1 + THROUGHPUT_TOL), and its model misses.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["THROUGHPUT_TOL", "WINDOWS", "DRIFT_MAX", "DRIFT_FLOOR", "MIN_REQUESTS", "stability", "failed"]

THROUGHPUT_TOL = 0.05
WINDOWS = 5
DRIFT_MAX = 1.5
DRIFT_FLOOR = 0.1
MIN_REQUESTS = 100


def stability(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, warm: np.ndarray,
              ttft_objective_ms: float) -> dict:
    """The stability record of one unit's requests (all of them, in arrival order; ``warm``: which are
    measured, i.e. after the warm-up)."""
    measured = np.flatnonzero(warm)
    n = len(measured)
    if n < MIN_REQUESTS:
        return {"stable": True, "tested": False, "offered_rps": None, "completed_rps": None,
                "throughput_ratio": None, "drift": None}
    t0, t1 = float(arrival[measured[0]]), float(arrival[measured[-1]])
    span = max(t1 - t0, 1e-12)
    completed = int(np.count_nonzero((finish >= t0) & (finish <= t1)))
    offered_rps, completed_rps = n / span, completed / span
    ratio = completed_rps / offered_rps
    ttft = first[measured] - arrival[measured]
    cuts = np.array_split(ttft, WINDOWS)
    middle = float(np.concatenate(cuts[1:-1]).mean())
    last = float(cuts[-1].mean())
    drift = last / middle if middle > 0 else 1.0
    drifting = drift > DRIFT_MAX and (last - middle) * 1e3 > DRIFT_FLOOR * ttft_objective_ms
    tol = max(THROUGHPUT_TOL, 3.0 / math.sqrt(n))
    return {"stable": bool(ratio >= 1.0 - tol and not drifting), "tested": True,
            "offered_rps": round(offered_rps, 5), "completed_rps": round(completed_rps, 5),
            "throughput_ratio": round(ratio, 5), "drift": round(drift, 4),
            "ttft_ms": {"middle": round(middle * 1e3, 3), "last": round(last * 1e3, 3)}}


def failed(objective: dict, record: dict) -> dict:
    """``objective`` (stats.evaluate's) of a unit whose ``record`` says unstable: not met, and its ratio
    at least the instability's (see the module docstring); unchanged when stable."""
    if record["stable"]:
        return objective
    worst = max(1.0 / max(record["throughput_ratio"], 1e-9), record["drift"], 1.0 + THROUGHPUT_TOL)
    ratio = max(objective.get("ratio") or 0.0, worst)
    return {**objective, "met": False, "ratio": round(ratio, 4),
            "ratios": {**objective.get("ratios", {}), "stability": round(worst, 4)}}
