"""Re-planning per origin (docs/regions.md): each region in the demand log's ``region`` column (the
client's origin, as the gateway records it) gets its own rate series and forecast peak, and the
observed origins keep the spec's residency rules.

How the forecasts become demand: a model whose spec keeps some origin's requests in an area
(``residency`` region or continent) is planned at the SUM of its origins' forecast peaks, split by
those peaks: a resident origin cannot borrow another area's idle capacity at its peak hour. Without
residency the joint peak and the whole log's region mix stay what they were (capacity anywhere may
serve any origin whose round trip fits, so the joint peak is what must be served at once).

Origins nobody declared are **pooled**, never planned as origins: the gateway logs a header region
the plan does not declare as ``other`` (hetinfra.gateway.origins), and an older or hand-made log may
hold any region name. An observed origin is kept only if the spec declares it for the model or it is
a region the running plan declares (``known``: its origins and its units' regions); the others'
requests still count in the model's rate (their peaks join the total), they are spread over the kept
origins by share, and a note names them. So ``replan`` never fails on a demand log's origin.
"""

from __future__ import annotations

import numpy as np

from hetinfra.replan.coverage import covered_range
from hetinfra.replan.forecast import Forecast, forecast_by_origin
from hetinfra.spec.origins import OriginSpec, origin_residency

__all__ = ["POOLED", "origin_forecasts", "origins_for_spec", "per_origin_series"]

#: the gateway's demand-log origin of requests whose header named an undeclared region
POOLED = "other"


def per_origin_series(log, model: str, interval_s: int) -> dict[str, list[float]]:
    """req/s per interval of each non-empty region, on the model's intervals (``rate_series``'s: the
    same partly covered first or last interval left out, hetinfra.replan.coverage)."""
    mask = log.rows_of(model)
    t, regions = log.timestamps[mask], log.regions[mask]
    idx = np.floor(t / interval_s).astype(np.int64)
    lo, hi, _ = covered_range(log, int(idx[0]), int(idx[-1] - idx[0]) + 1, interval_s)
    idx -= idx[0]
    out = {}
    for origin in sorted(set(regions.tolist()) - {""}):
        counts = np.bincount(idx[regions == origin], minlength=int(idx[-1]) + 1)
        out[str(origin)] = [float(c) / interval_s for c in counts[lo:hi]]
    return out


def origin_forecasts(log, model: str, *, interval_s: int, period: int, horizon: int, smooth: int) -> dict[str, Forecast]:
    series = per_origin_series(log, model, interval_s)
    return forecast_by_origin(series, period=period, horizon=horizon, smooth=smooth) if series else {}


def _pooled(spec_model, obs, known: frozenset[str] | None) -> list[str]:
    """The observed origins of ``obs`` that are pooled (see the module docstring)."""
    keep = set(spec_model.demand.origins or {}) | set(known if known is not None else obs.origins)
    return sorted(o for o in obs.origins if o not in keep or o == POOLED)


def origins_for_spec(spec_model, obs, known: frozenset[str] | None = None) -> tuple[dict | None, float, list[str]]:
    """(demand.origins, planned req/s, notes) for a model re-planned from ``obs`` (an ObservedDemand);
    ``known``: the regions the running plan declares (None: every observed region but ``other``)."""
    declared = spec_model.demand.origins
    rules = {o: r for o, r in origin_residency(declared).items() if r != "none"}
    pooled = _pooled(spec_model, obs, known)
    notes = [f"{spec_model.name}: origin(s) {', '.join(pooled)} ({sum(obs.origins[o] for o in pooled):.1%} of requests) "
             "declared by neither the spec nor the plan: pooled into the model's rate, not planned as origins"] if pooled else []
    observed = {o: s for o, s in obs.origins.items() if o not in pooled}
    forecasts = {o: f for o, f in obs.origin_forecasts.items() if o not in pooled}
    if not observed:
        return declared, obs.planned_rps, notes
    if not rules or not forecasts:
        kept = sum(observed.values())
        shares = {o: s / kept for o, s in observed.items()}
        planned = obs.planned_rps
    else:
        peaks = {o: f.peak_rps for o, f in forecasts.items()}
        total = sum(peaks.values())
        every = total + sum(f.peak_rps for o, f in obs.origin_forecasts.items() if o in pooled)
        shares = {o: p / total for o, p in peaks.items()} if total > 0 else dict(observed)
        planned = every * (1 + obs.buffer) if total > 0 else obs.planned_rps
    # a resident origin the log did not see keeps its rule (at share 0), so the next plan still honours it
    merged = {o: (OriginSpec(share=s, residency=rules[o]) if o in rules else s) for o, s in shares.items()}
    merged.update({o: OriginSpec(share=0.0, residency=r) for o, r in rules.items() if o not in merged})
    return merged, planned, notes
