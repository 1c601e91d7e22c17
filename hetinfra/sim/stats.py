"""Latency statistics and objectives (percentile SLOs, Mélange-style attainment).

An objective is met iff the chosen statistic of TTFT is <= its bound, the same statistic of TPOT is
<= its bound, and (when ``attainment`` is given) the fraction of requests meeting BOTH bounds is >=
``attainment``. TPOT of a request is vLLM bench's per-request mean inter-token time,
(finish - first token) / (output tokens - 1); a 1-token request has none and meets any TPOT bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hetinfra.errors import InvalidInputError

__all__ = ["PERCENTILES", "Objective", "percentile", "order_ranks", "summarize", "objective_from_slo", "evaluate"]

PERCENTILES = {"mean": None, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
#: an attainment of 0 is read as this in a miss ratio, which stays finite (simulation.json is strict
#: JSON: no Infinity) and still far above any ratio a planner acts on
MIN_ATTAINED = 1e-6


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); nan for no values. A sorted
    list or numpy array: its two order statistics are read as Python floats (the same doubles)."""
    n = len(sorted_values)
    if not n:
        return math.nan
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    a, b = float(sorted_values[lo]), float(sorted_values[min(lo + 1, n - 1)])
    return a + (b - a) * (pos - lo)


def order_ranks(n: int) -> list[int]:
    """The ranks (0-based positions in sorted order) of ``n`` values that :func:`summarize` reads:
    each percentile's two closest ranks (:func:`percentile`'s rule) and the maximum. A column
    partitioned on these ranks (``np.partition(x, order_ranks(len(x)))``) holds at each of them
    exactly the value a full sort puts there, so it summarizes as the sorted column does (the mean is
    an exact sum: order does not matter), in linear time instead of a sort's n log n."""
    if not n:
        return []
    ranks = {n - 1}
    for q in PERCENTILES.values():
        if q is not None:
            lo = int((n - 1) * q / 100.0)
            ranks.update((lo, min(lo + 1, n - 1)))
    return sorted(ranks)


def summarize(values: Sequence[float], *, presorted: bool = False,
              total: Callable[[Sequence[float]], float] = math.fsum) -> dict:
    """count, mean, p50, p90, p95, p99, max of values in seconds, reported in ms. ``presorted``:
    ``values`` is sorted already, or holds its sorted values at :func:`order_ranks` (a numpy column
    partitioned on them: hetinfra.sim.columns); ``total``: its exact sum
    (math.fsum, or hetinfra.sim.core.fsum for a numpy column: the same double)."""
    v = values if presorted else sorted(values)
    if not len(v):
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    out = {"count": len(v), "mean": round(1e3 * total(v) / len(v), 3)}
    for name, q in PERCENTILES.items():
        if q is not None:
            out[name] = round(1e3 * percentile(v, q), 3)
    out["max"] = round(1e3 * float(v[-1]), 3)
    return out


@dataclass(frozen=True)
class Objective:
    """Latency objective of one model: ``percentile`` of TTFT <= ttft_ms and of TPOT <= tpot_ms,
    and the fraction of requests meeting both >= ``attainment`` when given."""

    ttft_ms: float
    tpot_ms: float
    percentile: str = "p99"
    attainment: float | None = None

    def __post_init__(self):
        if self.percentile not in PERCENTILES:
            raise InvalidInputError(f"unknown SLO percentile {self.percentile!r}", hint="use one of " + ", ".join(PERCENTILES))
        if not (self.ttft_ms > 0 and self.tpot_ms > 0):
            raise InvalidInputError(f"SLO bounds must be > 0 (got ttft_ms={self.ttft_ms}, tpot_ms={self.tpot_ms})")
        if self.attainment is not None and not 0 < self.attainment <= 1:
            raise InvalidInputError(f"SLO attainment must be in (0, 1] (got {self.attainment})")


def objective_from_slo(slo: dict) -> Objective:
    """plan.json ``models[].slo``: ttft_ms, tpot_ms, and (newer specs) percentile (default p99) and
    attainment (default null)."""
    try:
        return Objective(float(slo["ttft_ms"]), float(slo["tpot_ms"]), slo.get("percentile") or "p99",
                         None if slo.get("attainment") is None else float(slo["attainment"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"plan.json: bad models[].slo {slo!r} ({exc})") from None


def evaluate(obj: Objective, ttft: dict, tpot: dict, attained: float | None) -> dict:
    """Whether ``obj`` is met by these summaries (from :func:`summarize`) and the fraction meeting
    both bounds; ``ratio`` = how far the worst part misses (> 1 misses; the planner derates by it)."""
    key = obj.percentile
    parts = {}
    if ttft.get(key) is not None:
        parts["ttft"] = ttft[key] / obj.ttft_ms
    if tpot.get(key) is not None:
        parts["tpot"] = tpot[key] / obj.tpot_ms
    if obj.attainment is not None and attained is not None:
        parts["attainment"] = obj.attainment / max(attained, MIN_ATTAINED)
    ratio = max(parts.values()) if parts else None
    return {"met": ratio is not None and ratio <= 1.0, "ratio": None if ratio is None else round(ratio, 4),
            "ratios": {k: round(v, 4) for k, v in parts.items()},
            "attainment": None if attained is None else round(attained, 5)}
