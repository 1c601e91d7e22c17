"""Rate intervals per regime (hetinfra.perf.confidence.rate_interval): from the regime's calibration
residuals (calibration.RESIDUALS, recorded by tools/fit_calibration.py), else the trust level's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.perf.calibration import RESIDUALS
from hetinfra.perf.confidence import (INTERVALS, MIN_RESIDUAL_ROWS, Confidence, confidence_detail, credit_ceiling,
                                      planning_factor, rate_interval)
from tests.perf.fit_tool import SHARED, load_fit_tool

fc = load_fit_tool()


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs the shared data sets")
def test_the_recorded_residuals_are_what_the_fit_tool_computes():
    rows = fc.load_rows(SHARED)
    assert fc.rate_residuals(rows) == RESIDUALS


def test_a_calibrated_regime_gets_its_own_interval_and_a_thin_one_its_levels():
    conf = confidence_detail("L4", 1, 1, 8.0)
    assert conf.level == "calibrated" and conf.regime == ("L4", "vllm-0.11", "b<=32")
    ri = rate_interval(conf)
    n, p10, median, p90 = next(r[3:] for r in RESIDUALS if r[:3] == conf.regime)
    assert (ri.low, ri.middle, ri.high) == (round(1 / (1 + p90), 3), round(1 / (1 + median), 3), round(1 / (1 + p10), 3))
    assert str(n) in ri.basis
    thin = next(r for r in RESIDUALS if r[3] < MIN_RESIDUAL_ROWS)
    fallback = rate_interval(Confidence("calibrated", "x", thin[:3]))
    assert (fallback.low, fallback.middle, fallback.high) == INTERVALS["calibrated"] and "trust level" in fallback.basis
    extrapolated = rate_interval(confidence_detail("L40S", 1, 1, 8.0))
    assert (extrapolated.low, extrapolated.middle, extrapolated.high) == INTERVALS["extrapolated"]


@given(st.sampled_from(RESIDUALS))
def test_every_regime_interval_is_ordered_and_brackets_its_middle(row):
    ri = rate_interval(Confidence("calibrated", "x", row[:3]))
    assert 0 < ri.low <= ri.middle <= ri.high
    # safe plans calibrated templates at the estimate, expected at the middle; credit never below 1
    rates = (ri.low, ri.middle, ri.high)
    assert planning_factor("calibrated", "safe", rates) == 1.0
    assert planning_factor("calibrated", "expected", rates) == ri.middle
    assert planning_factor("extrapolated", "safe", rates) == ri.low
    assert credit_ceiling("calibrated", rates) == max(ri.high, 1.0)


def test_disagreement_beyond_the_interval_widens_it_and_marks_it():
    from hetinfra.perf.confidence import RateInterval, widen_for_disagreement

    base = RateInterval(0.9, 1.0, 1.2, "regime x")
    assert widen_for_disagreement(base, 1.1, "k") == (base, False)  # inside: unchanged
    low, marked = widen_for_disagreement(base, 0.5, "k")
    assert marked and (low.low, low.high) == (0.5, 1.2) and "k's 0.50x" in low.basis
    high, marked = widen_for_disagreement(base, 1.6, "k")
    assert marked and (high.low, high.high) == (0.9, 1.6)
    assert widen_for_disagreement(base, 0.0, "k") == (base, False)  # no second figure
