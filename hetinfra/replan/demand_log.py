"""Demand from observations: read a request log, measure rate, size mix and origins, forecast the peak.

The log is a CSV, one row per request, with the header (the names are a contract)::

    timestamp,model,input_tokens,output_tokens,region

``timestamp`` is ISO 8601 (``2024-05-01T12:00:00Z``, an offset, or naive = UTC) or Unix epoch
seconds; ``region`` may be empty, and the column may be left out; extra columns are ignored.

Sane times only: a row stamped before 2020-01-01 UTC (a clock reset to 1970, a date typed wrong)
or more than a day after now (a clock run ahead: 2076) is skipped, and the log's ``skipped`` lines
say how many and where the first was; a log with no row inside that window is an error. A stamp
outside the window is never taken as current: the forecast would plan for the wrong hour of the
day, and one row from 2076 would make every real row look 50 years old. "Now" comes from the
``clock`` argument (``time.time`` by default), so tests are deterministic.

Reading (hetinfra.replan.log_read): each row is a typed, checked DemandRecord; a gateway's log of
millions of rows is checked column by column in numpy with the same checks (2.2x faster than row by
row at 1M rows: benchmarks/bench_demand_log.py).

What the planner gets per model (:func:`observed_demand`):

    rate_rps = forecast peak of the next horizon x (1 + buffer)
    sizes    = classes, one per non-empty (input bucket, output bucket) of the observed sizes,
               planned at the bucket's upper edges, share = requests in bucket / requests
    origins  = requests per non-empty region / requests with a region
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from pydantic import ValidationError

from hetinfra.errors import InvalidInputError, did_you_mean
from hetinfra.replan.coverage import covered_range
from hetinfra.replan.forecast import Forecast, forecast_peak
from hetinfra.replan.origins import origin_forecasts, origins_for_spec
from hetinfra.replan.log_read import (AHEAD_S, COLUMNS, EARLIEST_S, MAX_LOG_BYTES, DemandLog, DemandRecord,
                                      read_demand_log)
from hetinfra.spec.demand import RequestClass, bucket_name
from hetinfra.spec.models import ClassSpec, HistogramSizes, ModelSpec, ServiceSpec, SizesSpec

QUANTILES = (0.5, 0.9, 0.99, 1.0)  # derived edges; see quantile_edges
SMOOTH_S = 1800
__all__ = ["AHEAD_S", "COLUMNS", "EARLIEST_S", "MAX_LOG_BYTES", "DemandLog", "DemandRecord", "read_demand_log",
           "rate_series", "size_mix", "quantile_edges", "mix_edges", "region_mix", "observed_demand", "observe_spec",
           "apply_to_spec"]


def rate_series(log: DemandLog, model: str, interval_s: int = 300) -> list[tuple[int, float]]:
    """Requests per second in each interval: ``[(start, count / interval_s), ...]``.

    Intervals are aligned to multiples of ``interval_s`` since the epoch (so a season's phase is
    wall-clock time) and run from the first request's interval to the last one's, empty ones
    as 0, less a first or last interval the log does not cover in full (hetinfra.replan.coverage).
    """
    return _rate_series(log, model, interval_s)[0]


def _rate_series(log: DemandLog, model: str, interval_s: int) -> tuple[list[tuple[int, float]], list[str]]:
    """:func:`rate_series` and the notes naming the intervals it left out."""
    if isinstance(interval_s, bool) or not isinstance(interval_s, int) or interval_s <= 0:
        raise InvalidInputError(f"interval must be a whole number of seconds > 0, got {interval_s!r}")
    t = log.timestamps[log.rows_of(model)]
    idx = np.floor(t / interval_s).astype(np.int64)
    counts = np.bincount(idx - idx[0])  # timestamps are sorted, so idx[0] is the first interval
    lo, hi, notes = covered_range(log, int(idx[0]), len(counts), interval_s)
    first = int(idx[0]) * interval_s
    return [(first + k * interval_s, float(counts[k]) / interval_s) for k in range(lo, hi)], notes


def _bucket(sizes: np.ndarray, edges: list[int]) -> np.ndarray:
    """Vectorized :func:`hetinfra.spec.demand.bucket_index`; -1 outside the edges (below the first, above the last)."""
    k = np.maximum(np.searchsorted(np.asarray(edges), sizes, side="left"), 1) - 1
    return np.where((k < len(edges) - 1) & (sizes >= edges[0]), k, -1)


def size_mix(log: DemandLog, model: str, input_edges: list[int], output_edges: list[int],
             outside: str = "clip", rate_rps: float = 1.0) -> list[RequestClass]:
    """Classes from the model's observed sizes: one per non-empty bucket, planned at its upper edges.

    share = requests in the bucket / requests counted; rate_rps of a class = ``rate_rps`` x share.
    Sizes outside the edges are clipped into the first or last bucket (``outside="clip"``) or dropped.
    """
    if outside not in ("clip", "drop"):
        raise InvalidInputError(f"outside must be 'clip' or 'drop', got {outside!r}")
    mask = log.rows_of(model)
    ins, outs = log.input_tokens[mask], log.output_tokens[mask]
    if outside == "clip":  # spec.demand.clipped, at both ends
        ins, outs = np.clip(ins, input_edges[0], input_edges[-1]), np.clip(outs, output_edges[0], output_edges[-1])
    bi, bo = _bucket(ins, input_edges), _bucket(outs, output_edges)
    keep = (bi >= 0) & (bo >= 0)
    if not keep.any():
        raise InvalidInputError(f"{log.path}: no request of model '{model}' falls inside the size edges",
                                hint="widen the edges or clip sizes outside them")
    counts = np.zeros((len(input_edges) - 1, len(output_edges) - 1), dtype=np.int64)
    np.add.at(counts, (bi[keep], bo[keep]), 1)
    total = int(counts.sum())
    out = []
    for i, j in zip(*np.nonzero(counts)):  # row-major, like the spec's histogram classes
        hi_in, hi_out, share = input_edges[i + 1], output_edges[j + 1], counts[i, j] / total
        out.append(RequestClass(bucket_name(hi_in, hi_out), hi_in, hi_out, float(share), rate_rps * float(share)))
    return out


def spec_class_mix(log: DemandLog, spec_model: ModelSpec, rate_rps: float) -> list[RequestClass] | None:
    """The spec's own explicit classes with the observed shares, where every logged request of the model
    fits one (its input and output at most the class's): each counts in the smallest class that holds
    it, so none is planned below its size. None where the spec has no explicit classes or a request
    fits none (then quantile classes: :func:`size_mix`). Keeping the spec's classes keeps their names,
    so the running plan's routing and the spec still describe the re-plan's classes: as quantile
    classes ("complete" became "in<=2000,out<=150"), ``hetinfra simulate`` of a proposal could not find
    its classes in the spec, and the running fleet could not be simulated at the new demand (replan
    audit B3)."""
    classes = spec_model.demand.sizes.classes
    if not classes:
        return None
    mask = log.rows_of(spec_model.name)
    ins, outs = log.input_tokens[mask], log.output_tokens[mask]
    order = sorted(range(len(classes)), key=lambda k: (classes[k].input_tokens + classes[k].output_tokens, k))
    which = np.full(len(ins), -1, dtype=np.int64)
    for k in reversed(order):  # the smallest class that holds a request is written last
        fits = (ins <= classes[k].input_tokens) & (outs <= classes[k].output_tokens)
        which[fits] = k
    if not len(which) or (which < 0).any():
        return None
    counts = np.bincount(which, minlength=len(classes))
    total = int(counts.sum())
    return [RequestClass(c.name, c.input_tokens, c.output_tokens, counts[k] / total, rate_rps * counts[k] / total)
            for k, c in enumerate(classes) if counts[k]]


def quantile_edges(sizes: np.ndarray) -> list[int]:
    """Edges ``[0, q50, q90, q99, max]`` of observed sizes (observed values, duplicates merged).

    Planning at upper edges means no request is planned below its size; the max is an edge so
    nothing is clipped, and only the top 1% of requests is planned at the extreme size.
    """
    qs = np.quantile(sizes, QUANTILES, method="higher") if len(sizes) else []
    edges = [0] + sorted({int(q) for q in qs if q > 0})
    return edges if len(edges) > 1 else [0, 1]  # all sizes 0: one bucket (0, 1]


def mix_edges(log: DemandLog, spec_model: ModelSpec) -> tuple[list[int], list[int], str, str]:
    """(input_edges, output_edges, outside, where they come from) for the model's size mix.

    The spec's own edges when it declares a histogram or dataset (the user chose that
    resolution, and plans stay comparable); otherwise :func:`quantile_edges` of the log.
    """
    sizes = spec_model.demand.sizes
    if sizes.histogram is not None:
        return list(sizes.histogram.input_edges), list(sizes.histogram.output_edges), "clip", "the spec's histogram edges"
    if sizes.dataset is not None:
        d = sizes.dataset
        return list(d.input_edges), list(d.output_edges), d.outside, "the spec's dataset edges"
    mask = log.rows_of(spec_model.name)
    return (quantile_edges(log.input_tokens[mask]), quantile_edges(log.output_tokens[mask]), "clip",
            "quantiles 50/90/99/100% of the log")


def region_mix(log: DemandLog, model: str) -> dict[str, float]:
    """Share of the model's requests per region, over requests that name one ({} when none do)."""
    regions = log.regions[log.rows_of(model)]
    regions = regions[regions != ""]
    if not len(regions):
        return {}
    names, counts = np.unique(regions, return_counts=True)
    return {str(n): float(c) / len(regions) for n, c in zip(names, counts)}


@dataclass(frozen=True)
class ObservedDemand:
    """What a log says one model needs: the planned rate and how it was derived."""

    model: str
    planned_rps: float  # forecast.peak_rps x (1 + buffer)
    forecast: Forecast
    buffer: float
    classes: list[RequestClass]  # rate_rps of each = planned_rps x share
    origins: dict[str, float]  # {} when the log names no region
    requests: int
    span_s: float  # last - first request time
    interval_s: int
    edges_from: str
    notes: list[str] = field(default_factory=list)
    #: each origin's own forecast (hetinfra.replan.origins); {} when the log names no region
    origin_forecasts: dict[str, Forecast] = field(default_factory=dict)

    def summary(self) -> str:
        err = f"backtest MAPE {self.forecast.mape:.1%}" if self.forecast.mape is not None else "no backtest error"
        return (f"{self.model}: plan {self.planned_rps:.3g} req/s = forecast peak {self.forecast.peak_rps:.3g} x "
                f"{1 + self.buffer:.2f} ({self.forecast.method}, {err}; {self.requests} requests over "
                f"{self.span_s / 3600:.1f} h; {len(self.classes)} size classes from {self.edges_from})")


def observed_demand(log: DemandLog, spec_model: ModelSpec, *, interval_s: int = 300, season_s: int = 86400,
                    horizon_s: int = 3600, buffer: float = 0.1) -> ObservedDemand:
    """Forecast peak of the next ``horizon_s`` x (1 + buffer), with the observed size and region mix."""
    name = spec_model.name
    series, covered = _rate_series(log, name, interval_s)  # validates interval_s and that the log has the model
    if isinstance(season_s, bool) or not isinstance(season_s, int) or season_s <= 0 or season_s % interval_s:
        raise InvalidInputError(f"season ({season_s!r} s) must be a whole number of intervals ({interval_s} s)")
    if not isinstance(horizon_s, (int, float)) or horizon_s <= 0:
        raise InvalidInputError(f"horizon must be > 0 seconds, got {horizon_s!r}")
    if not isinstance(buffer, (int, float)) or buffer < 0:
        raise InvalidInputError(f"buffer must be >= 0 (a fraction: 0.1 = 10%), got {buffer!r}")
    fc = forecast_peak([r for _, r in series], period=season_s // interval_s,
                       horizon=max(1, math.ceil(horizon_s / interval_s)),
                       smooth=max(1, round(SMOOTH_S / interval_s)) | 1)
    planned = fc.peak_rps * (1 + buffer)
    classes, edges_from = spec_class_mix(log, spec_model, planned), "the spec's classes"
    if classes is None:
        in_edges, out_edges, outside, edges_from = mix_edges(log, spec_model)
        classes = size_mix(log, name, in_edges, out_edges, outside, planned)
    mask = log.rows_of(name)
    t = log.timestamps[mask]
    notes = [fc.note] + covered
    if planned <= 0:
        notes.append(f"{name}: forecast peak is 0 req/s for the next {horizon_s} s; the spec's rate_rps is kept "
                     "(a spec cannot express zero demand)")
    by_origin = origin_forecasts(log, name, interval_s=interval_s, period=season_s // interval_s,
                                 horizon=max(1, math.ceil(horizon_s / interval_s)),
                                 smooth=max(1, round(SMOOTH_S / interval_s)) | 1)
    notes += [f"origin {o}: forecast peak {f.peak_rps:.3g} req/s ({f.method})" for o, f in by_origin.items()]
    return ObservedDemand(model=name, planned_rps=planned, forecast=fc, buffer=float(buffer),
                          classes=classes,
                          origins=region_mix(log, name), requests=int(mask.sum()), span_s=float(t[-1] - t[0]),
                          interval_s=interval_s, edges_from=edges_from, notes=notes, origin_forecasts=by_origin)


def observe_spec(log: DemandLog, service_spec: ServiceSpec, **kwargs) -> tuple[dict[str, ObservedDemand], list[str]]:
    """:func:`observed_demand` for every spec model the log has; notes name log models the spec lacks."""
    in_log = set(log.model_names())
    observed = {m.name: observed_demand(log, m, **kwargs) for m in service_spec.models if m.name in in_log}
    extra = sorted(in_log - {m.name for m in service_spec.models})
    names = [m.name for m in service_spec.models]
    # repr: a name with an invisible character (a zero-width space) must not read as a spec's name
    notes = [f"log model {n!r} is not in the spec; ignored ({did_you_mean(n, names)})" for n in extra]
    return observed, notes


def observed_sizes(m: ModelSpec, obs: ObservedDemand) -> SizesSpec:
    """The observed size mix in the spec's own form where the spec gives a histogram: the same edges,
    the observed weights, so requests are drawn inside their buckets as the spec's are (uniformly).
    Else explicit classes at the buckets' upper edges (planned and simulated at that size: a dataset's
    rows or a class's exact sizes are not in the log's buckets). Before, a histogram spec became
    classes too, its every request simulated at its bucket's largest size: a demand log of exactly the
    declared traffic forced services/multi-region.yaml from $19.39 to $23.62/h (replan audit B2)."""
    h = m.demand.sizes.histogram
    if h is None:
        return SizesSpec(classes=[ClassSpec(name=c.name, input_tokens=c.input_tokens, output_tokens=c.output_tokens,
                                            share=c.share) for c in obs.classes])
    weights = [[0.0] * (len(h.output_edges) - 1) for _ in range(len(h.input_edges) - 1)]
    for c in obs.classes:  # size_mix's classes sit at the histogram's upper edges (mix_edges)
        weights[h.input_edges.index(c.input_tokens) - 1][h.output_edges.index(c.output_tokens) - 1] += c.share
    return SizesSpec(histogram=HistogramSizes(input_edges=list(h.input_edges), output_edges=list(h.output_edges),
                                              weights=weights))


def apply_to_spec(service_spec: ServiceSpec, observed: dict[str, ObservedDemand],
                  known_origins: frozenset[str] | None = None) -> tuple[ServiceSpec, list[str]]:
    """A validated copy of the spec whose observed models plan for the observed demand, and notes.

    For each observed model: ``demand.rate_rps`` = planned peak, ``demand.sizes`` = the mix
    (:func:`observed_sizes`: a histogram spec keeps its edges), ``demand.origins`` = the region mix (kept from the spec when the
    log names no region; origins neither the spec nor ``known_origins`` (the running plan's regions)
    declare are pooled: hetinfra.replan.origins). Models absent from ``observed`` keep their demand;
    the notes say so.
    """
    notes: list[str] = []
    models = []
    for m in service_spec.models:
        obs = observed.get(m.name)
        if obs is None:
            notes.append(f"{m.name}: not in the demand log; keeps the spec's demand ({m.demand.rate_rps:g} req/s)")
            models.append(m)
            continue
        notes.append(obs.summary())
        notes.extend(f"  {n}" for n in obs.notes)  # how the forecast was made, under its summary
        if obs.planned_rps <= 0:
            models.append(m)
            continue
        sizes = observed_sizes(m, obs)
        origins, rate, pooled = origins_for_spec(m, obs, known_origins)  # per origin, keeping residency
        notes.extend(f"  {n}" for n in pooled)
        demand = m.demand.model_copy(update={"rate_rps": rate, "sizes": sizes, "origins": origins})
        models.append(m.model_copy(update={"demand": demand}))
    unknown = sorted(set(observed) - {m.name for m in service_spec.models})
    notes.extend(f"observed model {n!r} is not in the spec; ignored" for n in unknown)
    updated = service_spec.model_copy(update={"models": models})
    try:  # model_copy skips validation; re-validate so a bad mix fails here, not in the planner
        return ServiceSpec.model_validate(updated.model_dump()), notes
    except ValidationError as exc:
        raise InvalidInputError(f"the spec with observed demand is invalid: {exc.errors(include_url=False)[0]['msg']}") from None
