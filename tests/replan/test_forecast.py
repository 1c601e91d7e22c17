"""Seasonal peak forecast: accuracy on synthetic diurnal traffic, fallback, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.replan.forecast import RECENT_PEAK, SEASONAL, forecast_peak

PERIOD = 288  # 5-minute intervals in a day
HORIZON = 72  # 6 hours


def diurnal(n: int, noise: float = 0.0, seed: int = 7, trend: float = 0.0) -> np.ndarray:
    """rate(t) = 10 + 6 sin(2 pi t / PERIOD) (+ trend t) (+ seeded Gaussian noise), rps per interval."""
    t = np.arange(n)
    y = 10 + 6 * np.sin(2 * np.pi * t / PERIOD) + trend * t
    return y + np.random.default_rng(seed).normal(0, noise, n) if noise else y


def true_peak(start: int, trend: float = 0.0) -> float:
    t = np.arange(start, start + HORIZON)
    return float((10 + 6 * np.sin(2 * np.pi * t / PERIOD) + trend * t).max())


@pytest.mark.parametrize("smooth", [1, 7])
def test_noisy_diurnal_peak_within_5_percent(smooth):
    y = diurnal(3 * PERIOD, noise=0.3)
    fc = forecast_peak(y.tolist(), period=PERIOD, horizon=HORIZON, smooth=smooth)
    assert fc.method == SEASONAL
    assert len(fc.point_forecasts) == HORIZON and fc.peak_rps == max(fc.point_forecasts)
    assert abs(fc.peak_rps / true_peak(3 * PERIOD) - 1) < 0.05
    assert fc.mape is not None and fc.mape < 0.10
    assert fc.rmse is not None and fc.rmse < 0.5  # noise sd is 0.3: the error is mostly irreducible
    assert fc.backtest_intervals == HORIZON
    assert "fit on 2 seasons" in fc.note


def test_noiseless_series_has_near_zero_error():
    fc = forecast_peak(diurnal(3 * PERIOD), period=PERIOD, horizon=HORIZON)
    assert fc.peak_rps == pytest.approx(true_peak(3 * PERIOD), rel=1e-9)
    assert fc.mape < 1e-9 and fc.rmse < 1e-9 and abs(fc.peak_error) < 1e-9


def test_trend_is_extrapolated():
    trend = 0.002  # rps per interval: +0.58 rps a day
    y = diurnal(4 * PERIOD, trend=trend)
    fc = forecast_peak(y, period=PERIOD, horizon=HORIZON)
    assert fc.peak_rps == pytest.approx(true_peak(4 * PERIOD, trend), rel=1e-6)
    assert fc.mape < 1e-6


def test_one_odd_day_does_not_reshape_the_profile():
    y = diurnal(3 * PERIOD)
    y[PERIOD: PERIOD + 100] += 30  # an incident in the middle day (retry storm)
    fc = forecast_peak(y, period=PERIOD, horizon=HORIZON)
    # The median over the three days ignores the bump; only the season means (level/trend) move a little.
    assert abs(fc.peak_rps / true_peak(3 * PERIOD) - 1) < 0.05


def test_shorter_than_two_seasons_falls_back_to_recent_peak():
    y = diurnal(PERIOD + 100)
    fc = forecast_peak(y, period=PERIOD, horizon=HORIZON)
    assert fc.method == RECENT_PEAK
    assert "fewer than the two seasons" in fc.note
    assert fc.peak_rps == pytest.approx(y[-PERIOD:].max())
    assert fc.point_forecasts == [fc.peak_rps] * HORIZON
    assert fc.backtest_intervals == HORIZON and fc.mape is not None  # measured on what there is


def test_too_short_for_any_backtest():
    fc = forecast_peak([1.0, 2.0, 3.0], period=PERIOD, horizon=HORIZON)
    assert fc.method == RECENT_PEAK and fc.peak_rps == 3.0
    assert fc.mape is None and fc.rmse is None and fc.backtest_intervals == 0
    assert "no backtest" in fc.note


@pytest.mark.parametrize("n, horizon", [(20, 25), (20, 39), (7, 9)])
def test_a_horizon_longer_than_the_series_is_forecast_without_a_backtest(n, horizon):
    # y[:n - H] with H > n sliced from the end: a seasonal fit on part of the series was compared with
    # fewer actuals than forecasts (a ValueError traceback from `replan --demand-log`)
    fc = forecast_peak(np.arange(float(n)) % 5, period=5 if n >= 10 else 9, horizon=horizon)
    assert len(fc.point_forecasts) == horizon and fc.backtest_intervals == 0 and fc.mape is None
    assert f"no backtest: {n} intervals leave too few to fit after holding out {horizon}" in fc.note


def test_two_seasons_backtests_with_seasonal_naive():
    fc = forecast_peak(diurnal(2 * PERIOD), period=PERIOD, horizon=HORIZON)
    assert fc.method == SEASONAL and "seasonal naive" in fc.note and fc.mape < 1e-9


def test_mape_ignores_zero_actuals():
    y = np.tile(np.r_[np.zeros(PERIOD // 2), np.full(PERIOD // 2, 4.0)], 3)  # off half a day, then 4 rps
    fc = forecast_peak(y[:-PERIOD // 2], period=PERIOD, horizon=PERIOD // 2)  # held-out window: all zeros
    assert fc.mape is None and fc.rmse == pytest.approx(0.0, abs=1e-12)
    assert "MAPE undefined" in fc.note
    assert fc.peak_rps == pytest.approx(4.0)  # next comes the busy half
    fc = forecast_peak(y, period=PERIOD, horizon=PERIOD // 2)  # held-out window: all 4.0
    assert fc.mape == pytest.approx(0.0, abs=1e-12) and fc.peak_rps == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("kw,match", [
    (dict(period=0, horizon=1), "period"),
    (dict(period=2.5, horizon=1), "period"),
    (dict(period=True, horizon=1), "period"),
    (dict(period=24, horizon=0), "horizon"),
    (dict(period=24, horizon=-3), "horizon"),
    (dict(period=24, horizon=1, smooth=0), "smoothing"),
])
def test_argument_validation(kw, match):
    with pytest.raises(InvalidInputError, match=match):
        forecast_peak([1.0] * 50, **kw)


@pytest.mark.parametrize("series", [[], [1.0, -1.0], [1.0, math.nan]])
def test_series_validation(series):
    with pytest.raises(InvalidInputError):
        forecast_peak(series, period=2, horizon=1)
