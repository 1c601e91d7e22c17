"""Batch means inside one replication: a one-sided bound on a model's statistic from ONE run, for
the search's early acceptance (``hetinfra.plan.replicated``, docs/verification.md).

The method (Law & Kelton's non-overlapping batch means for one steady-state run): the measured
requests of a unit or a model, in arrival order, are cut into k = min(BATCHES, n // MIN_BATCH)
batches of equal count (none with k < MIN_BATCHES); each batch's statistic (the objective's
percentile of TTFT and of TPOT, and the fraction meeting both bounds) is one observation. Batches
far longer than the queue's memory are nearly independent, so the one-sided Student-t bound on
their mean, with k - 1 degrees of freedom, bounds the statistic. Two things make it optimistic
where replications are not: neighbouring batches share a queue at their border (positive
correlation narrows the interval) and a batch's p99 of a few thousand requests sits a little below
the whole run's. The search therefore accepts on it only far inside the objective (ACCEPT_BELOW in
``hetinfra.plan.replicated``), and never where a KV cache filled; the final plan's confirmation on
fresh seeds never uses it (it judges on replications only).

:func:`batch_stats` runs inside the simulator (``hetinfra.sim.plan_sim``, verification's
``detail=False`` results: each entry's ``batches``), where the request columns are;
:func:`batch_bounds` reads them back.
"""

from __future__ import annotations

import numpy as np

from hetinfra.sim.bounds import t_bound
from hetinfra.sim.stats import PERCENTILES, percentile

__all__ = ["BATCHES", "MIN_BATCH", "MIN_BATCHES", "batch_stats", "batch_bounds", "run_share",
           "run_spread"]

#: batches per run (at most), requests per batch (at least), batches for a bound (at least)
BATCHES, MIN_BATCH, MIN_BATCHES = 10, 200, 5


def batch_stats(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, output: np.ndarray, obj,
                ordered: bool = True) -> list[list] | None:
    """Per batch of these measured requests (``ordered``: already in arrival order), [TTFT ms, TPOT
    ms, attainment, TTFT share, TPOT share] at ``obj``'s percentile (:func:`hetinfra.sim.stats.percentile`'s
    rule; TPOT None where a batch has no multi-token request, attainment None where ``obj`` states
    none); the shares, where ``obj`` names a percentile (None for a mean), are the fractions of the
    batch's requests within the objective's TTFT, and of its multi-token ones within its TPOT: what
    the percentile implies (a run meets a p99 TTFT exactly when 99% of its requests are within it),
    a proportion whose batches' spread is a fair estimate of its runs' (:func:`run_spread`) where a
    percentile's tail is too thin for one. None where there are fewer than MIN_BATCHES batches. The
    batches are k runs of m = n // k consecutive requests, the last k x m (the first n mod k, the
    earliest after the warm-up, are left out)."""
    n = len(arrival)
    k = min(BATCHES, n // MIN_BATCH)
    if k < MIN_BATCHES:
        return None
    if not ordered:
        order = np.argsort(arrival, kind="stable")
        arrival, first, finish, output = arrival[order], first[order], finish[order], output[order]
    m = n // k
    cut = slice(n - k * m, n)
    ttft = (first[cut] - arrival[cut]).reshape(k, m)
    outs = output[cut].reshape(k, m)
    multi = outs > 1
    tpot = np.where(multi, (finish[cut] - first[cut]).reshape(k, m) / np.maximum(outs - 1, 1), -np.inf)
    q = PERCENTILES[obj.percentile]
    ttft_q = _row_stat(ttft, np.full(k, m), q)
    valid = multi.sum(axis=1)
    tpot_q = _row_stat(tpot, valid, q)
    att = [None] * k
    if obj.attainment is not None:
        ok = (ttft * 1e3 <= obj.ttft_ms) & (~multi | (tpot * 1e3 <= obj.tpot_ms))
        att = [round(float(a), 6) for a in ok.mean(axis=1)]
    shares = [(None, None)] * k
    if q is not None:
        within_ttft = (ttft * 1e3 <= obj.ttft_ms).mean(axis=1)
        within_tpot = (multi & (tpot * 1e3 <= obj.tpot_ms)).sum(axis=1) / np.maximum(valid, 1)
        shares = [(round(float(a), 6), round(float(b), 6) if v else None)
                  for a, b, v in zip(within_ttft, within_tpot, valid)]
    return [[round(1e3 * float(t), 4), round(1e3 * float(p), 4) if v else None, a, *sh]
            for t, p, v, a, sh in zip(ttft_q, tpot_q, valid, att, shares)]


def _row_stat(mat: np.ndarray, valid: np.ndarray, q: float | None) -> np.ndarray:
    """Per row of ``mat`` (k x m; a row's ``valid`` values are finite, the rest -inf), the mean
    (``q`` None) or the q-th percentile of its valid values, by linear interpolation between the
    closest ranks (:func:`hetinfra.sim.stats.percentile`): read from the row's top values only,
    partitioned there (linear time), as the rank counted from the top does not depend on how many
    invalid values a row has. 0 for a row with none."""
    k, m = mat.shape
    v = np.maximum(valid, 1)
    if q is None:
        return np.where(np.isfinite(mat), mat, 0.0).sum(axis=1) / v
    pos = (v - 1) * q / 100.0
    lo = pos.astype(np.int64)
    hi = np.minimum(lo + 1, v - 1)
    frac = pos - lo
    from_top_lo, from_top_hi = (v - 1) - lo, (v - 1) - hi  # ranks counted from the largest (0)
    top = int(from_top_lo.max()) + 1
    tail = np.sort(np.partition(mat, m - top, axis=1)[:, m - top:], axis=1)
    rows = np.arange(k)
    # a row with no valid value reads -inf at both ranks: zeroed before the arithmetic (-inf - -inf is
    # NaN, and numpy warns on stderr of `plan` for a spec whose requests all have one output token)
    a, b = (np.where(valid > 0, tail[rows, top - 1 - r], 0.0) for r in (from_top_lo, from_top_hi))
    return a + (b - a) * frac


def _stat(values: np.ndarray, q: float | None) -> float:
    """The reference of :func:`_row_stat` for one batch (tests/sim/test_batches.py)."""
    if q is None:
        return float(values.mean())
    return percentile(np.sort(values), q)


def batch_bounds(batches: list[list], confidence: float) -> dict | None:
    """{ttft_ms, tpot_ms, attainment}: (estimate, pessimistic bound) of each statistic over
    ``batches`` (:func:`batch_stats`; upper for latencies, lower for attainment; None where it has no
    value); None without batches."""
    if not batches:
        return None
    out = {}
    for j, stat in enumerate(("ttft_ms", "tpot_ms", "attainment")):
        vals = [b[j] for b in batches if b[j] is not None]
        got = t_bound(vals, confidence, stat != "attainment") if len(vals) >= MIN_BATCHES else None
        out[stat] = None if got is None else (round(got[0], 5), round(got[1], 5))
    return out


def run_share(run: list[list] | None, index: int) -> float | None:
    """A run's share of requests within a latency objective (``index`` 3 TTFT, 4 TPOT of
    :func:`batch_stats`) as the mean of its batches' (its last k x m requests'); None without them."""
    vals = [b[index] for b in run or () if len(b) > index and b[index] is not None]
    return sum(vals) / len(vals) if vals else None


def run_spread(runs: list[list[list] | None], index: int) -> float | None:
    """The spread (sd) between whole runs of proportion ``index`` of :func:`batch_stats` (2 attainment, 3
    and 4 the TTFT and TPOT shares) that the runs' batches imply: the pooled sd of each run's batches
    about that run's own mean, over sqrt(k), k the batches per run. None unless every run has batches
    with that value.

    Why: a run's proportion is the mean of its k batches' (nearly: its last k x m requests'), so k
    nearly independent batches carry its spread as var(run) = var(batch) / k, read from n x k batches
    where the replications give n runs. A few runs can miss a regime that a fifth of runs fall into:
    h141a (heldout65b, a 4.9% class of 60k-token prompts under p90 TTFT 1 s) had six confirmation runs
    whose shares within 1 s spread 0.009 about 0.922 (their p90s 41 ms about 846 ms, a 97.5% prediction
    bound of 961 ms, met), and missed on 3 of 10 audit seeds; their batches imply 0.013 (ten audit runs:
    0.016). Not for a percentile itself: where it sits at a gap of its distribution (h136's p90 TTFT,
    below a 7% class whose stalls reach seconds) a batch's p90 jumps across the gap while a run's does
    not (batches imply 175 ms, runs show 0.8), where the share within the objective moves smoothly
    (0.0064 both ways; benchmarks/results/spread_stop66.txt). The runs' own sd is never taken below this
    floor (hetinfra.sim.bounds.prediction_bound's ``least_sd``); it never narrows a bound (neighbouring
    batches share a queue, so the batches' spread can understate)."""
    if not runs or any(r is None for r in runs):
        return None
    squares, df, k = 0.0, 0, None
    for run in runs:
        vals = [b[index] for b in run if len(b) > index and b[index] is not None]
        if len(vals) < MIN_BATCHES:
            return None
        mean = sum(vals) / len(vals)
        squares += sum((v - mean) ** 2 for v in vals)
        df += len(vals) - 1
        k = len(vals) if k is None else min(k, len(vals))
    return float(np.sqrt(squares / df / k))
