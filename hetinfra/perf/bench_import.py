"""Turn ``vllm bench serve --save-result`` JSON files into profile CSV rows.

A *sweep* is several result files for one (model, input length, output length), one file per
``--request-rate``. For an SLO (TTFT and TPOT limits in ms, compared against one statistic of
the result: ``mean`` by default, or ``median`` / ``pNN`` where the run saved that percentile) a
sweep gives one :class:`~hetinfra.perf.profiles.ProfileRow` whose ``max_rps`` is the largest
request rate one engine sustains while meeting the SLO.

Result keys read (vLLM ``vllm/benchmarks/serve.py``; the same since ``benchmark_serving.py``):
``model_id``, ``request_rate`` (a number, or ``"inf"``), ``completed``, ``failed`` (0 if absent),
``request_throughput`` (completed / duration) and ``<stat>_ttft_ms`` / ``<stat>_tpot_ms``
(``mean_``, ``median_``, ``p<P>_``; the percentiles exist only for ``--metric-percentiles``).

Request sizes, first that applies: the caller's override; the ``random_input_len`` and
``random_output_len`` keys (``--metadata random_input_len=I random_output_len=O``, which the
harness passes); the largest of ``input_lens`` / ``output_lens`` (``--save-detailed``);
``total_input_tokens`` / ``total_output_tokens`` divided by ``completed``, rounded (the random
dataset with ``--random-range-ratio 0`` gives every request the same size).

The max_rps rule (:func:`evaluate_sweep`)
------------------------------------------
1. A point *passes* when no request failed, at least one completed, and the statistic of TTFT
   and of TPOT are both within the SLO. Points are taken in order of offered rate.
2. F is the first failing point, P the point before it (the last passing one). Points after F
   are not used, even if they pass again (noise); a note says so.
3. A passing point sustained its *offered* rate: it met the SLO and TTFT includes queueing, so
   it kept up. A failing point is placed at what the server *achieved*,
   ``min(request_rate, request_throughput)``: when the server could not keep up, its latency
   belongs to the load it really served, not the load offered; and max_rps can never exceed
   what the server was seen to serve. (When it kept up, request_throughput is slightly under
   the offered rate because the run's duration includes draining the last requests; the rule
   is therefore a little conservative. More ``--num-prompts`` shrinks that effect.)
4. For each latency metric F violates, ``t = (slo - lat(P)) / (lat(F) - lat(P))``; the metric
   that crosses first (smallest t) decides:
   ``max_rps = rate(P) + t * (achieved(F) - rate(P))``, and ``rate(P)`` when
   ``achieved(F) <= rate(P)`` or when F failed because requests failed (no latency curve).
5. Even the lowest rate fails: ``max_rps = 0`` with a note (the row is still written, so the
   planner treats this layout as unable to serve that size under that SLO; sweep lower rates
   to find a positive one). This holds for a one-point sweep too.
6. Every rate passes: ``max_rps`` is the highest rate swept, a lower bound, with a note.
   A single passing point is an error: it bounds nothing and was probably not meant as a sweep.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hetinfra.errors import InvalidInputError
from hetinfra.fileio import MAX_JSON_DEPTH, json_depth
from hetinfra.perf.bench_result import MAX_TOKENS, RESULT_HINT, BenchResult, number, parse_bench_result
# the CSV side (number format, rendering, merging, atomic writes) lives in hetinfra.perf.profile_csv
from hetinfra.perf.profile_csv import format_number, render_profile_csv, write_profile_csv  # noqa: F401
from hetinfra.perf.profiles import STATISTIC, STATISTIC_HINT, ProfileRow, check_vllm_version

_RESULT_HINT = RESULT_HINT


@dataclass(frozen=True)
class SLO:
    """Latency limits a point must meet, on one statistic of the run (``mean``, ``median``, ``pNN``)."""

    ttft_ms: float
    tpot_ms: float
    statistic: str = "mean"

    def __post_init__(self) -> None:
        # the profile reader's own pattern: a statistic it refuses (p100, p999) is refused before a sweep
        if not STATISTIC.match(self.statistic):
            raise InvalidInputError(f"unknown latency statistic {self.statistic!r}", hint=STATISTIC_HINT)
        for name, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidInputError(f"SLO {name} must be a positive number of ms, got {v!r}")

    def key(self, metric: str) -> str:
        """The result key holding this statistic of ``metric`` (``ttft`` or ``tpot``)."""
        return f"{self.statistic}_{metric}_ms"

    def describe(self) -> str:
        return f"{self.statistic} ttft<={format_number(self.ttft_ms)} ms, tpot<={format_number(self.tpot_ms)} ms"


@dataclass(frozen=True)
class BenchPoint:
    """One ``vllm bench serve`` run: one offered request rate of one sweep."""

    where: str  # file name, or "file#N" for the N-th object of an --append-result file
    model: str
    input_tokens: int
    output_tokens: int
    request_rate: float  # offered (--request-rate)
    request_throughput: float  # achieved: completed / duration
    completed: int
    failed: int
    sizes_from: str  # "override", "metadata", "lens" or "totals"
    data: Mapping = field(repr=False, compare=False, default_factory=dict)
    max_concurrency: int | None = None  # --max-concurrency of the run

    @property
    def achieved_rate(self) -> float:
        """The load the server really served: the offered rate, or less if it fell behind."""
        return min(self.request_rate, self.request_throughput)

    def latency(self, metric: str, statistic: str) -> float:
        """``<statistic>_<metric>_ms``; ``median`` and ``p50`` stand in for each other."""
        key = f"{statistic}_{metric}_ms"
        alt = {"median": "p50", "p50": "median"}.get(statistic)
        if key not in self.data and alt and f"{alt}_{metric}_ms" in self.data:
            key = f"{alt}_{metric}_ms"
        if key not in self.data:
            present = sorted(k for k in self.data if k.endswith(f"_{metric}_ms"))
            raise InvalidInputError(
                f"{self.where}: key '{key}' missing (has {', '.join(present) or 'no ' + metric + ' statistics'})",
                hint=f"rerun vllm bench serve with --percentile-metrics ttft,tpot,e2el"
                     f"{' --metric-percentiles ' + statistic[1:] if statistic.startswith('p') else ''}"
                     ", or choose another statistic")
        value = number(self.data[key], self.where, key, allow_nan=True)
        if value < 0:  # NaN passes: vLLM writes it when nothing completed
            raise InvalidInputError(f"{self.where}: key '{key}' is a latency, so >= 0; got {value:g}", hint=RESULT_HINT)
        return value


@dataclass(frozen=True)
class PointCheck:
    point: BenchPoint
    passed: bool
    ttft_ms: float
    tpot_ms: float
    reasons: tuple[str, ...]  # why it failed; empty when it passed


@dataclass(frozen=True)
class SweepResult:
    """max_rps for one (model, input, output) sweep under one SLO, and how it was found."""

    model: str
    input_tokens: int
    output_tokens: int
    max_rps: float
    checks: tuple[PointCheck, ...]  # every point, by offered rate
    last_pass: PointCheck | None
    first_fail: PointCheck | None
    notes: tuple[str, ...]

    @property
    def rates(self) -> tuple[float, ...]:
        return tuple(c.point.request_rate for c in self.checks)

    def explain(self) -> str:
        """One line: how max_rps came about."""
        if self.first_fail is None:
            return f"every rate up to {format_number(self.rates[-1])} req/s met the SLO (lower bound)"
        f = self.first_fail
        why = "; ".join(f.reasons)
        if self.last_pass is None:
            return f"lowest rate {format_number(f.point.request_rate)} req/s already fails ({why})"
        return (f"between {format_number(self.last_pass.point.request_rate)} req/s (passes) and "
                f"{format_number(f.point.request_rate)} req/s (fails: {why})")

    def row(self, gpu: str, tp: int, pp: int, slo: SLO, vllm_version: str | None = None) -> ProfileRow:
        anchor = self.first_fail or self.checks[-1]
        return ProfileRow(model=self.model, gpu=gpu, tp=tp, pp=pp, input_tokens=self.input_tokens,
                          output_tokens=self.output_tokens, ttft_slo_ms=float(slo.ttft_ms),
                          tpot_slo_ms=float(slo.tpot_ms), max_rps=self.max_rps, origin=anchor.point.where,
                          statistic=slo.statistic, vllm_version=vllm_version)


@dataclass(frozen=True)
class ImportResult:
    sweeps: tuple[SweepResult, ...]
    rows: tuple[ProfileRow, ...]
    skipped: tuple[str, ...]  # files or objects not used, with the reason


# ---------------------------------------------------------------- reading result files


def read_objects(path: Path) -> list[tuple[str, object]]:
    """The JSON objects of one file: one (``--save-result``) or one per line (``--append-result``).
    Read by the one reader (a FIFO or a device is refused, 64 MiB at most), nested at most
    MAX_JSON_DEPTH levels; NaN is kept (vLLM writes it for a run where nothing completed)."""
    from hetinfra.fileio import parse_json, read_text

    text = read_text(path, "result file", hint=_RESULT_HINT)
    if not text.strip():
        raise InvalidInputError(f"{path}: empty file", hint=_RESULT_HINT)
    if json_depth(text) > MAX_JSON_DEPTH:
        parse_json(text, str(path), hint=_RESULT_HINT)  # raises the depth error
    try:  # one object (the one reader: a key twice, a 5,000-digit number, each refused as the others are)
        return [(str(path), parse_json(text, str(path), hint=_RESULT_HINT, allow_nan=True))]
    except InvalidInputError as first:
        lines = [(i, ln) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
        if len(lines) < 2 or not _more_than_one(text):
            raise
        hint = _RESULT_HINT + " (or one such object per line with --append-result)"
        out = []
        for n, (lineno, ln) in enumerate(lines, start=1):
            try:
                out.append((f"{path}#{n}", parse_json(ln, f"{path}:{lineno}", hint=hint, allow_nan=True)))
            except InvalidInputError as exc:
                raise InvalidInputError(exc.message.replace(f"{path}:{lineno}:1:", f"{path}:{lineno}:", 1),
                                        hint=hint) from None
        return out


def _more_than_one(text: str) -> bool:
    """Whether ``text`` is JSON followed by more (``--append-result``: an object per line), as json tells it."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.msg == "Extra data" or "\n" in text.strip()
    except ValueError:
        return False
    return False


def _sizes(doc: BenchResult, where: str) -> tuple[int, int, str]:
    if doc.random_input_len is not None and doc.random_output_len is not None:
        return doc.random_input_len, doc.random_output_len, "metadata"
    if doc.input_lens and doc.output_lens:
        return max(doc.input_lens), max(doc.output_lens), "lens"
    if doc.total_input_tokens is not None and doc.total_output_tokens is not None and doc.completed > 0:
        i, o = round(doc.total_input_tokens / doc.completed), round(doc.total_output_tokens / doc.completed)
        if 1 <= i <= MAX_TOKENS and 1 <= o <= MAX_TOKENS:
            return i, o, "totals"
    raise InvalidInputError(
        f"{where}: cannot tell the request sizes (no 'random_input_len'/'random_output_len' metadata, "
        "'input_lens'/'output_lens' or 'total_input_tokens'/'total_output_tokens' with completed > 0)",
        hint="pass the sizes the sweep used (--input-tokens/--output-tokens)")


def parse_result(obj: object, where: str, *, model: str | None = None, input_tokens: int | None = None,
                 output_tokens: int | None = None) -> BenchPoint:
    """One result object -> a :class:`BenchPoint` (typed by hetinfra.perf.bench_result.BenchResult).
    Raises InvalidInputError naming ``where: key``."""
    doc = parse_bench_result(obj, where)
    if input_tokens is not None and output_tokens is not None:
        i, o, src = int(input_tokens), int(output_tokens), "override"
    else:
        i, o, src = _sizes(doc, where)
        i = int(input_tokens) if input_tokens is not None else i
        o = int(output_tokens) if output_tokens is not None else o
    return BenchPoint(where=where, model=model.strip() if model is not None else doc.model_id, input_tokens=i,
                      output_tokens=o, request_rate=doc.request_rate, request_throughput=doc.request_throughput,
                      completed=doc.completed, failed=doc.failed, sizes_from=src, data=obj,
                      max_concurrency=doc.max_concurrency)


def load_bench_results(paths: Iterable[Path | str], *, model: str | None = None, input_tokens: int | None = None,
                       output_tokens: int | None = None) -> tuple[list[BenchPoint], list[str]]:
    """Read result files. Returns (points, skipped): skipped are ``where: why`` for runs not usable
    on a rate axis (``--request-rate inf`` bursts, ramp-up runs, ``*.pytorch.json`` companions)."""
    points: list[BenchPoint] = []
    skipped: list[str] = []
    paths = [Path(p) for p in paths]
    if not paths:
        raise InvalidInputError("no result files given", hint="pass the JSON files of one rate sweep")
    for path in paths:
        if path.name.endswith(".pytorch.json"):
            skipped.append(f"{path}: PyTorch-benchmark companion file, not a --save-result file")
            continue
        for where, obj in read_objects(path):
            if isinstance(obj, dict) and obj.get("ramp_up_strategy"):
                skipped.append(f"{where}: ramp-up run (no single request rate)")
                continue
            p = parse_result(obj, where, model=model, input_tokens=input_tokens, output_tokens=output_tokens)
            if math.isinf(p.request_rate):
                skipped.append(f"{where}: --request-rate inf (all requests at once) has no place on a rate axis")
                continue
            points.append(p)
    return points, skipped


# ---------------------------------------------------------------- the max_rps rule


def check_point(point: BenchPoint, slo: SLO) -> PointCheck:
    """Does this run meet the SLO? (rule 1 of the module docstring)"""
    ttft = point.latency("ttft", slo.statistic)
    tpot = point.latency("tpot", slo.statistic)
    reasons = []
    if point.completed == 0:
        reasons.append("no request completed")
    if point.failed:
        reasons.append(f"{point.failed} of {point.completed + point.failed} requests failed")
    if point.completed:
        for name, v, limit in (("ttft", ttft, slo.ttft_ms), ("tpot", tpot, slo.tpot_ms)):
            if not (v <= limit):  # NaN fails too
                reasons.append(f"{slo.statistic} {name} {format_number(v)} ms > {format_number(limit)} ms")
    return PointCheck(point, not reasons, ttft, tpot, tuple(reasons))


def evaluate_sweep(points: Sequence[BenchPoint], slo: SLO) -> SweepResult:
    """max_rps of one sweep (all points share model, input and output sizes) by the module's rule."""
    if not points:
        raise InvalidInputError("empty sweep")
    pts = sorted(points, key=lambda p: p.request_rate)
    head = pts[0]
    label = f"{head.model} in={head.input_tokens} out={head.output_tokens}"
    _check_distinct_rates(pts, label)
    checks = tuple(check_point(p, slo) for p in pts)
    k = next((i for i, c in enumerate(checks) if not c.passed), None)
    notes: list[str] = []
    last_pass = checks[k - 1] if k else None
    first_fail = checks[k] if k is not None else None
    if k is None:
        if len(checks) == 1:
            raise InvalidInputError(
                f"{label}: single-point sweep ({head.where}, {format_number(head.request_rate)} req/s meets the SLO); "
                "max_rps needs rates that cross the SLO",
                hint="run vllm bench serve at several --request-rate values, up to one that misses the SLO")
        max_rps = pts[-1].request_rate
        notes.append(f"{label}: every rate met the SLO ({slo.describe()}); max_rps {format_number(max_rps)} is the highest "
                     "rate swept, a lower bound: extend the sweep to higher rates")
    elif k == 0:
        max_rps = 0.0
        notes.append(f"{label}: even the lowest rate {format_number(pts[0].request_rate)} req/s misses the SLO "
                     f"({'; '.join(checks[0].reasons)}); max_rps 0: sweep lower rates to find a positive one")
    else:
        f = first_fail
        max_rps = _crossing_rate(last_pass, f, slo)
        if f.point.request_throughput < f.point.request_rate:
            notes.append(f"{label}: at {format_number(f.point.request_rate)} req/s offered the server achieved "
                         f"{format_number(f.point.request_throughput)} req/s; interpolated toward the achieved rate")
        later = [c.point.request_rate for c in checks[k + 1:] if c.passed]
        if later:
            notes.append(f"{label}: rate(s) {', '.join(format_number(r) for r in later)} pass again after "
                         f"{format_number(f.point.request_rate)} failed (noisy sweep?); the first crossing is used")
    mc = {p.max_concurrency for p in pts} - {None}
    if mc:
        notes.append(f"{label}: runs used --max-concurrency {', '.join(map(str, sorted(mc)))}; "
                     "queueing in the client is not in TTFT, so max_rps may be optimistic")
    return SweepResult(model=head.model, input_tokens=head.input_tokens, output_tokens=head.output_tokens,
                       max_rps=max_rps, checks=checks, last_pass=last_pass, first_fail=first_fail, notes=tuple(notes))


def _check_distinct_rates(pts: Sequence[BenchPoint], label: str) -> None:
    """A sweep has one run per offered rate (``pts`` sorted by rate)."""
    for a, b in zip(pts, pts[1:]):
        if a.request_rate == b.request_rate:
            raise InvalidInputError(f"{label}: two runs at request rate {format_number(a.request_rate)}: {a.where} and {b.where}",
                                    hint="pass one file per rate of a single sweep")


def _crossing_rate(p: PointCheck, f: PointCheck, slo: SLO) -> float:
    """max_rps between the last passing point ``p`` and the first failing one ``f`` (rules 3 and 4 of the
    module docstring)."""
    r0, r1 = p.point.request_rate, f.point.achieved_rate
    if f.point.failed or f.point.completed == 0 or r1 <= r0:
        t = 0.0
    else:
        ts = [(limit - lp) / (lf - lp)
              for lp, lf, limit in ((p.ttft_ms, f.ttft_ms, slo.ttft_ms), (p.tpot_ms, f.tpot_ms, slo.tpot_ms))
              if not (lf <= limit)]
        ts = [0.0 if math.isnan(x) else x for x in ts]
        t = min(ts) if ts else 0.0
    return r0 + max(0.0, min(1.0, t)) * max(0.0, r1 - r0)


def group_sweeps(points: Iterable[BenchPoint]) -> list[list[BenchPoint]]:
    """Points grouped by (model, input tokens, output tokens), groups in sorted key order."""
    groups: dict[tuple[str, int, int], list[BenchPoint]] = {}
    for p in points:
        groups.setdefault((p.model.lower(), p.input_tokens, p.output_tokens), []).append(p)
    return [groups[k] for k in sorted(groups)]


def import_bench_results(paths: Iterable[Path | str], *, gpu: str, tp: int, pp: int, slo: SLO,
                         model: str | None = None, input_tokens: int | None = None,
                         output_tokens: int | None = None, vllm_version: str | None = None) -> ImportResult:
    """Result files (any number of sweeps) -> one profile row per (model, input, output)."""
    if not gpu or not gpu.strip():
        raise InvalidInputError("gpu must not be empty", hint="use SkyPilot accelerator names (L4, A10G, H100, ...)")
    if tp < 1 or pp < 1:
        raise InvalidInputError(f"tp and pp must be >= 1, got tp={tp} pp={pp}")
    check_vllm_version(vllm_version, "--vllm-version")  # else the profile written could not be read
    points, skipped = load_bench_results(paths, model=model, input_tokens=input_tokens, output_tokens=output_tokens)
    if not points:
        raise InvalidInputError("no usable result in the files given (" + "; ".join(skipped) + ")",
                                hint="profile sweeps need runs at finite --request-rate values")
    sweeps = tuple(evaluate_sweep(g, slo) for g in group_sweeps(points))
    rows = tuple(s.row(gpu.strip(), tp, pp, slo, vllm_version) for s in sweeps)
    return ImportResult(sweeps=sweeps, rows=rows, skipped=tuple(skipped))
