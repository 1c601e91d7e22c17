"""Forecast the PEAK request rate of the next few intervals from an observed rate series.

SageServe fits ARIMA; we use a simpler model that can be explained in one line and whose
error we measure and report. The series is ``y[0..n-1]``, requests per second per interval,
``P`` intervals per season (288 five-minute intervals in a day), ``H`` intervals ahead.

Method "seasonal-trend" (needs at least two full seasons, ``n >= 2P``). Take the last
``m = min(n // P, MAX_SEASONS)`` full seasons, ending at the last observation; season ``j``
is the row ``y[j, p]``, ``p = 0..P-1`` (phase), with mean ``mu_j``:

    b      = least-squares slope of mu_j over j, divided by P        (trend, rps per interval)
    s[p]   = median_j ( y[j, p] - mu_j - b * (p - (P-1)/2) )         (seasonal profile)
    s      = circular moving average of s over ``smooth`` intervals  (optional de-noising)
    yhat(n-1+h) = max(0, mu_{m-1} + b * (h + (P-1)/2) + s[(h-1) mod P]),   h = 1..H
    peak   = max_h yhat(n-1+h)

i.e. level (mean of the last season) plus trend from the centre of that season plus the
season's shape. The median over seasons keeps one odd day (an incident, a launch) from
reshaping the profile; ``MAX_SEASONS`` lets the profile follow drift.

Method "recent-peak" (fewer than two seasons: no trend or profile can be told from noise):
``yhat = max(y[-P:])`` for every h, the peak of the last season (or of the whole series).

Error, reported with every forecast: backtest by holding out the LAST ``H`` intervals,
fitting the same method on ``y[:n-H]`` and comparing the H point forecasts with what was
observed (none when ``H >= n``: nothing is left to fit on). MAPE = mean(|yhat - y| / y) over held-out intervals with ``y > 0`` (a zero actual
makes the percentage undefined), RMSE = sqrt(mean((yhat - y)^2)) in rps. The seasonal backtest
may fit on one season only (then ``b = 0``: seasonal naive); the note says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetinfra.errors import InvalidInputError

SEASONAL = "seasonal-trend"
RECENT_PEAK = "recent-peak"
MAX_SEASONS = 7  # a week of daily seasons: enough for a stable median, recent enough to follow drift


@dataclass(frozen=True)
class Forecast:
    """A peak forecast and its measured backtest error."""

    peak_rps: float  # max of point_forecasts
    point_forecasts: list[float]  # rps for each of the next `horizon` intervals
    method: str  # SEASONAL or RECENT_PEAK
    mape: float | None  # backtest mean absolute percentage error, a FRACTION (0.04 = 4%); None if not measurable
    rmse: float | None  # backtest root mean squared error, rps
    backtest_intervals: int  # held-out intervals compared (0 when no backtest)
    note: str  # how the forecast was made, in words
    peak_error: float | None = None  # backtest (forecast peak - observed peak) / observed peak; > 0 over-forecasts


def _whole(value, what: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InvalidInputError(f"forecast {what} must be a whole number of intervals >= {low}, got {value!r}",
                                hint="period = season length / interval (288 for a day of 5-minute intervals)")
    return int(value)


def _seasonal(y: np.ndarray, period: int, horizon: int, smooth: int) -> tuple[np.ndarray, int, float]:
    """Point forecasts of the seasonal-trend model (see module docstring): (yhat, seasons used, b)."""
    m = min(len(y) // period, MAX_SEASONS)
    block = y[len(y) - m * period:].reshape(m, period)
    mu = block.mean(axis=1)
    b = float(np.polyfit(np.arange(m), mu, 1)[0]) / period if m >= 2 else 0.0
    tilt = b * (np.arange(period) - (period - 1) / 2)  # the trend inside one season, removed from the shape
    s = np.median(block - mu[:, None] - tilt[None, :], axis=0)
    k = min(smooth // 2, (period - 1) // 2)
    if k > 0:  # circular: the end of a season runs into the start of the next
        padded = np.concatenate([s[-k:], s, s[:k]])
        s = np.convolve(padded, np.ones(2 * k + 1) / (2 * k + 1), mode="valid")
    h = np.arange(1, horizon + 1)
    yhat = mu[-1] + b * (h + (period - 1) / 2) + s[(h - 1) % period]
    return np.maximum(yhat, 0.0), m, b


def _recent_peak(y: np.ndarray, period: int, horizon: int) -> np.ndarray:
    return np.full(horizon, float(y[-period:].max()))


def _errors(pred: np.ndarray, actual: np.ndarray) -> tuple[float | None, float, float | None]:
    """(MAPE over non-zero actuals, RMSE, relative peak error)."""
    rmse = float(np.sqrt(np.mean((pred - actual) ** 2)))
    nz = actual > 0
    mape = float(np.mean(np.abs(pred[nz] - actual[nz]) / actual[nz])) if nz.any() else None
    top = float(actual.max())
    peak_err = (float(pred.max()) - top) / top if top > 0 else None
    return mape, rmse, peak_err


def _rates(series) -> np.ndarray:
    """``series`` as a 1-d float array: not empty, finite and >= 0 (InvalidInputError otherwise)."""
    y = np.asarray(series, dtype=float)
    if y.ndim != 1 or y.size == 0:
        raise InvalidInputError("forecast: the rate series is empty", hint="the log has no requests for this model")
    if not np.all(np.isfinite(y)) or (y < 0).any():
        raise InvalidInputError("forecast: rates must be finite and >= 0")
    return y


def _backtest(y: np.ndarray, method: str, period: int, horizon: int, smooth: int) -> tuple[tuple, int, str]:
    """``method`` fit on ``y`` less its last ``horizon`` intervals and judged on them: ((MAPE, RMSE,
    peak error), intervals tested (0: none), what the note says of it)."""
    n = len(y)
    cut = max(n - horizon, 0)  # a horizon longer than the series leaves nothing to fit on (not y[:-k])
    train, actual = y[:cut], y[cut:]
    if method == SEASONAL and len(train) >= period:
        pred, m_b, _ = _seasonal(train, period, horizon, smooth)
        note = f"; backtest on the last {horizon} intervals, fit on {m_b} season{'s' if m_b > 1 else ''} before them"
        note += " (seasonal naive, no trend)" if m_b < 2 else ""
    elif method == RECENT_PEAK and len(train) >= 1:
        pred = _recent_peak(train, period, horizon)
        note = f"; backtest on the last {horizon} intervals"
    else:
        return (None, None, None), 0, f"; no backtest: {n} intervals leave too few to fit after holding out {horizon}"
    errors = _errors(pred, actual)
    if errors[0] is None:
        note += " (MAPE undefined: every held-out interval had zero requests)"
    return errors, horizon, note


def forecast_peak(series, *, period: int, horizon: int, smooth: int = 1) -> Forecast:
    """Forecast the peak rps of the next ``horizon`` intervals of ``series`` (rps per interval).

    ``period``: intervals per season; ``smooth``: width (intervals, made odd) of the moving
    average applied to the seasonal profile, 1 = none. Raises InvalidInputError on bad arguments.
    """
    period, horizon = _whole(period, "period", 1), _whole(horizon, "horizon", 1)
    smooth = _whole(smooth, "smoothing width", 1)
    y = _rates(series)
    n = len(y)
    if n >= 2 * period:
        method = SEASONAL
        points, m, b = _seasonal(y, period, horizon, smooth)
        note = (f"level + trend ({round(b * period, 6):+.3g} rps per season) + seasonal profile, median over the last "
                f"{m} seasons of {period} intervals")
    else:
        method = RECENT_PEAK
        points = _recent_peak(y, period, horizon)
        note = (f"only {n} intervals, fewer than the two seasons ({2 * period}) a seasonal fit needs: "
                f"planning at the peak of the last {min(n, period)} intervals")
    (mape, rmse, peak_err), tested, said = _backtest(y, method, period, horizon, smooth)
    note += said
    return Forecast(peak_rps=float(points.max()), point_forecasts=[float(v) for v in points], method=method,
                    mape=mape, rmse=rmse, backtest_intervals=tested, note=note, peak_error=peak_err)


def forecast_by_origin(series: dict[str, list[float]], *, period: int, horizon: int, smooth: int = 1) -> dict[str, Forecast]:
    """:func:`forecast_peak` of each origin's own rate series (routing by origin, docs/regions.md):
    origins peak at different hours, and one that residency keeps local must be served at its own
    peak, not at its share of the joint one."""
    return {o: forecast_peak(y, period=period, horizon=horizon, smooth=smooth) for o, y in sorted(series.items())}
