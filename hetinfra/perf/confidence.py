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
from hetinfra.perf.calibration import COVERAGE, DEFAULT_VLLM_VERSION, calibration_for

__all__ = ["REGIMES", "LEVELS", "Confidence", "regime_of", "confidence", "confidence_detail"]

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


def confidence_detail(gpu_name: str, tp: int, pp: int, batch: float, mixed: bool = False,
                      from_profile: bool = False, vllm_version: str | None = None) -> Confidence:
    """The confidence of an estimate for ``tp`` x ``pp`` GPUs ``gpu_name`` at ``batch`` concurrent
    sequences (``mixed``: a pipeline over different GPU types; ``from_profile``: the rate came from a
    measured profile row); ``vllm_version`` as in ``estimate`` (None: the default engine)."""
    if from_profile:
        return Confidence("measured", "from a measured profile row")
    engine = "vllm-" + calibration_for(vllm_version).vllm_version
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
                                    f"{', '.join(map(str, sorted({c[2] for c in hit})))})")


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


def planning_factor(level: str, setting: str = "safe") -> float:
    """The factor an estimate of ``level`` is planned at: the low end for extrapolated ones under
    ``safe``, else the middle (1)."""
    return interval(level)[0] if setting == "safe" and level == "extrapolated" else 1.0


def credit_ceiling(level: str) -> float:
    """The largest factor verification may credit a template of ``level`` with: its interval's top."""
    return interval(level)[2]
