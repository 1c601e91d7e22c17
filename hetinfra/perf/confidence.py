"""How much to trust one rate estimate: "measured" (a profile row), "calibrated" (the GPU, layout and
batch regime are covered by the data the estimator's constants were fitted on, for that engine
version), or "extrapolated" (anything else), with a short reason.

The coverage is not hand-written: ``calibration.COVERAGE`` is the table ``tools/fit_calibration.py
--write`` records from the rows it fits and checks (GPU, engine, TP degree, batch regime, rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetinfra.catalog.gpus import get_gpu
from hetinfra.perf.calibration import COVERAGE, DEFAULT_VLLM_VERSION, MEASURED_AS, RESIDUALS, engine_key

__all__ = ["REGIMES", "LEVELS", "Confidence", "RateInterval", "regime_of", "confidence", "confidence_detail",
           "rate_interval", "widen_for_disagreement"]

# Batch regimes of the calibration report (docs/calibration.md): concurrent sequences of one engine.
REGIMES: tuple[tuple[str, float, float], ...] = (("b<=32", 0.0, 32.0), ("32<b<=128", 32.0, 128.0),
                                                 ("b>128", 128.0, math.inf))
LEVELS = ("measured", "calibrated", "extrapolated")


def regime_of(batch: float) -> str:
    """The batch regime name of a concurrency (<= 32, 32-128, > 128 sequences)."""
    for name, lo, hi in REGIMES:
        if lo < batch <= hi:
            return name
    return REGIMES[0][0]


@dataclass(frozen=True)
class Confidence:
    level: str  # one of LEVELS
    reason: str
    #: (GPU, engine, batch regime) whose calibration rows cover the estimate (calibrated ones only)
    regime: tuple[str, str, str] | None = None


def confidence_detail(gpu_name: str, tp: int, pp: int, batch: float, mixed: bool = False,
                      from_profile: bool = False, vllm_version: str | None = None) -> Confidence:
    """The confidence of an estimate for ``tp`` x ``pp`` GPUs ``gpu_name`` at ``batch`` concurrent
    sequences (``mixed``: a pipeline over different GPU types; ``from_profile``: the rate came from a
    measured profile row); ``vllm_version`` as in ``estimate`` (None: the default engine)."""
    if from_profile:
        return Confidence("measured", "from a measured profile row")
    key = engine_key(vllm_version)
    engine = "vllm-" + MEASURED_AS.get(key, key)  # the engine whose measured rows speak for it
    if mixed:
        return Confidence("extrapolated", "mixed-GPU pipeline: no calibration data measures one")
    if pp > 1:
        return Confidence("extrapolated", f"pipeline of {pp} stages: no calibration data measures pipeline parallelism")
    spec = get_gpu(gpu_name)
    name = spec.name if spec is not None else gpu_name
    if spec is not None and not spec.nvlink and tp > 4:
        return Confidence("extrapolated", f"TP {tp} over PCIe ({name} has no NVLink): measured up to TP 4 only")
    rows = [c for c in COVERAGE if c[0] == name]
    if not rows:
        return Confidence("extrapolated", f"no calibration data measures {name}")
    same = [c for c in rows if c[1] == engine]
    if not same:
        others = ", ".join(sorted({c[1] for c in rows}))
        return Confidence("extrapolated", f"{name} is measured only on {others}, not on {engine}")
    tps = sorted({c[2] for c in same})
    if tp not in tps and tp > max(tps):
        return Confidence("extrapolated", f"TP {tp} on {name} beyond the measured TP {', '.join(map(str, tps))}")
    regime = regime_of(batch)
    hit = [c for c in same if c[3] == regime]
    if not hit:
        have = ", ".join(r for r, _, _ in REGIMES if any(c[3] == r for c in same))
        return Confidence("extrapolated", f"batch {batch:g} ({regime}) on {name} beyond the data ({engine}: {have})")
    n = sum(c[4] for c in hit)
    return Confidence("calibrated", f"{name} {regime} covered by {n} measured rows ({engine}, TP "
                                    f"{', '.join(map(str, sorted({c[2] for c in hit})))})", (name, engine, regime))


def confidence(gpu_name: str, tp: int, pp: int, batch: float, mixed: bool = False, from_profile: bool = False,
               vllm_version: str | None = None) -> str:
    """"measured", "calibrated" or "extrapolated"; ``confidence_detail`` has the reason."""
    return confidence_detail(gpu_name, tp, pp, batch, mixed, from_profile, vllm_version).level


DEFAULT_ENGINE = "vllm-" + DEFAULT_VLLM_VERSION


# Confidence intervals of a template's rate, as factors of the estimate: (low, middle, high). From the
# held-out calibration residuals (docs/calibration.md, "Held-out capacity error", estimator-v2): the
# signed error e = predicted / measured - 1 has median -13% and p90 +22% over all rows, so the true
# rate lies in estimate / (1 + e) for e between the p90 (+22%: low end 0.82) and the mirrored p10
# (2 x median - p90 = -48%: high end 1.92). Calibrated regimes are planned at the estimate itself
# (already on the safe side, median -13%); extrapolated regimes carry the same spread, and
# ``planning.confidence: safe`` plans them at its low end. A measured row: +-5% (run-to-run noise of
# `vllm bench serve`).
INTERVALS: dict[str, tuple[float, float, float]] = {
    "measured": (0.95, 1.0, 1.05),
    "calibrated": (0.82, 1.0, 1.92),
    "extrapolated": (0.82, 1.0, 1.92),
}
CONFIDENCE_SETTINGS = ("safe", "expected")


def interval(level: str) -> tuple[float, float, float]:
    """(low, middle, high) factors of a rate estimate of confidence ``level``."""
    return INTERVALS.get(level, INTERVALS["extrapolated"])


#: a regime needs this many calibration rows for an interval of its own; fewer: its trust level's
MIN_RESIDUAL_ROWS = 10
_RESIDUALS = {r[:3]: r[3:] for r in RESIDUALS}


@dataclass(frozen=True)
class RateInterval:
    """(low, middle, high) factors of a rate estimate and what they come from (plan.json
    templates[].confidence.interval and interval_basis)."""
    low: float
    middle: float
    high: float
    basis: str
    #: the other source whose figure the interval was widened to cover, and that figure as a factor
    #: of this estimate (None: the sources agree within the interval, or there is no other source)
    widened_by: str | None = None
    other_factor: float | None = None


def rate_interval(conf: Confidence, other: tuple[float, str] | None = None) -> RateInterval:
    """The interval of an estimate: from its regime's calibration residuals (calibration.RESIDUALS:
    the true rate is estimate / (1 + e), so the error's p90 gives the low end, its median the middle
    and its p10 the high end) where the estimate is calibrated and its regime has MIN_RESIDUAL_ROWS
    rows or more; else its trust level's (INTERVALS). ``other``: another source's rate for the same
    setting as a factor of this estimate, and its name; the interval widens to cover it
    (``widen_for_disagreement``)."""
    got = _interval(conf)
    return widen_for_disagreement(got, *other)[0] if other is not None else got


def _interval(conf: Confidence) -> RateInterval:
    found = _RESIDUALS.get(conf.regime) if conf.regime else None
    if found is not None and found[0] >= MIN_RESIDUAL_ROWS:
        n, p10, median, p90 = found
        return RateInterval(round(1 / (1 + p90), 3), round(1 / (1 + median), 3), round(1 / (1 + p10), 3),
                            f"regime {' '.join(conf.regime)}: {n} calibration rows")
    low, middle, high = interval(conf.level)
    why = (f"regime {' '.join(conf.regime)} has {found[0] if found else 0} calibration rows "
           f"(< {MIN_RESIDUAL_ROWS})" if conf.regime else f"no calibrated regime ({conf.level})")
    return RateInterval(low, middle, high, f"trust level {conf.level}: {why}")


def widen_for_disagreement(interval: RateInterval, ratio: float, source: str) -> tuple[RateInterval, bool]:
    """Disagreement is uncertainty: ``ratio`` is another source's rate for the same setting over this
    estimate (the measured-kernel backend's, the built-in estimator's, or published end-to-end runs of
    the layout). Where it falls outside the interval, the interval widens to cover it and the result
    is marked (True; ``widened_by``, ``other_factor``); under ``planning.confidence: safe`` the
    pessimistic of the two figures then applies (``planning_factor``)."""
    if not ratio > 0 or interval.low <= ratio <= interval.high:
        return interval, False
    # outward to the interval's 3 decimals, so the widened interval covers the figure itself
    milli = round(ratio * 1000, 6)
    low, high = min(interval.low, math.floor(milli) / 1000), max(interval.high, math.ceil(milli) / 1000)
    return RateInterval(low, interval.middle, high, f"{interval.basis}; widened to {source}'s {ratio:.2f}x",
                        source, round(ratio, 3)), True


def planning_factor(level: str, setting: str = "safe", rates: tuple[float, float, float] | None = None,
                    other_factor: float | None = None) -> float:
    """The factor an estimate of ``level`` with interval ``rates`` (None: the level's) is planned
    at: the low end for extrapolated ones under ``safe``, the middle under ``expected``, else 1 (the
    estimate: calibrated ones are on the safe side already). ``other_factor``: where the interval was
    widened to another source's figure, under ``safe`` the pessimistic of the two applies."""
    low, middle, _ = rates or interval(level)
    if setting == "expected":
        return middle
    base = low if level == "extrapolated" else 1.0
    return min(base, other_factor) if other_factor is not None else base


def credit_ceiling(level: str, rates: tuple[float, float, float] | None = None) -> float:
    """The largest factor verification may credit a template of ``level`` with: its interval's top
    (``rates``; None: the level's), never below 1."""
    return max((rates or interval(level))[2], 1.0)
