"""Re-planning per origin (docs/regions.md): each region in the demand log's ``region`` column (the
client's origin, as the gateway records it) gets its own rate series and forecast peak, and the
observed origins keep the spec's residency rules.

How the forecasts become demand: a model whose spec keeps some origin's requests in an area
(``residency`` region or continent) is planned at the SUM of its origins' forecast peaks, split by
those peaks: a resident origin cannot borrow another area's idle capacity at its peak hour. Without
residency the joint peak and the whole log's region mix stay what they were (capacity anywhere may
serve any origin whose round trip fits, so the joint peak is what must be served at once).
"""

from __future__ import annotations

import numpy as np

from hetinfra.replan.forecast import Forecast, forecast_by_origin
from hetinfra.spec.origins import OriginSpec, origin_residency

__all__ = ["origin_forecasts", "origins_for_spec", "per_origin_series"]


def per_origin_series(log, model: str, interval_s: int) -> dict[str, list[float]]:
    """req/s per interval of each non-empty region, on the model's intervals (``rate_series``'s)."""
    mask = log.rows_of(model)
    t, regions = log.timestamps[mask], log.regions[mask]
    idx = np.floor(t / interval_s).astype(np.int64)
    idx -= idx[0]
    out = {}
    for origin in sorted(set(regions.tolist()) - {""}):
        counts = np.bincount(idx[regions == origin], minlength=int(idx[-1]) + 1)
        out[str(origin)] = [float(c) / interval_s for c in counts]
    return out


def origin_forecasts(log, model: str, *, interval_s: int, period: int, horizon: int, smooth: int) -> dict[str, Forecast]:
    series = per_origin_series(log, model, interval_s)
    return forecast_by_origin(series, period=period, horizon=horizon, smooth=smooth) if series else {}


def origins_for_spec(spec_model, obs) -> tuple[dict | None, float]:
    """(demand.origins, planned req/s) for a model re-planned from ``obs`` (an ObservedDemand)."""
    declared = spec_model.demand.origins
    rules = {o: r for o, r in origin_residency(declared).items() if r != "none"}
    if not obs.origins:
        return declared, obs.planned_rps
    if not rules or not obs.origin_forecasts:
        shares = dict(obs.origins)
        planned = obs.planned_rps
    else:
        peaks = {o: f.peak_rps for o, f in obs.origin_forecasts.items()}
        total = sum(peaks.values())
        shares = {o: p / total for o, p in peaks.items()} if total > 0 else dict(obs.origins)
        planned = total * (1 + obs.buffer) if total > 0 else obs.planned_rps
    # a resident origin the log did not see keeps its rule (at share 0), so the next plan still honours it
    merged = {o: (OriginSpec(share=s, residency=rules[o]) if o in rules else s) for o, s in shares.items()}
    merged.update({o: OriginSpec(share=0.0, residency=r) for o, r in rules.items() if o not in merged})
    return merged, planned
