"""Measured profiles: max request rate per (model, GPU, TP, PP, size bucket, SLO).

CSV columns (fixed; a contract)::

    model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps[,statistic,vllm_version]

The last two columns are optional (older files load without them): ``statistic`` is the latency
statistic the SLO columns were checked on (mean, median, p90, p99; empty: unknown, taken as mean)
and ``vllm_version`` the engine measured. A row measured on a weaker statistic than a model's
objective (mean for a p99 objective) is still used, with a warning (``weaker_statistic``), and the
plan's simulation checks it.

A row says: one engine of ``tp x pp`` GPUs sustains ``max_rps`` requests/s of requests of up to
``input_tokens`` in and ``output_tokens`` out while meeting those SLOs. A row is usable for a
request class (i, o) under a spec SLO when ``i <= input_tokens``, ``o <= output_tokens`` and its
SLOs are equal to or stricter than the spec's. Among usable rows take the smallest bucket (least
``input_tokens + output_tokens``, then least ``input_tokens``), then the highest ``max_rps``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hetinfra.errors import InvalidInputError
from hetinfra.csvtext import number_cell
from hetinfra.fileio import read_text
from hetinfra.csvtext import csv_records
from hetinfra.spec.base import is_resource_word
from hetinfra.spec.deploy import VLLM_VERSION
from hetinfra.spec.models import MIN_RATE_RPS

COLUMNS = ("model", "gpu", "tp", "pp", "input_tokens", "output_tokens", "ttft_slo_ms", "tpot_slo_ms", "max_rps")
#: each numeric column's range (lo, hi, whole), read by csvtext.number_cell (the one parser of a user's CSV
#: numbers: a 5,000-digit integer was a ValueError whose text told the user to call sys.set_int_max_str_digits)
RANGES = {"tp": (1, 1024, True), "pp": (1, 1024, True), "input_tokens": (1, 10_000_000, True),
          "output_tokens": (1, 10_000_000, True), "ttft_slo_ms": (1e-9, 1e9, False),
          "tpot_slo_ms": (1e-9, 1e9, False), "max_rps": (0, 1e9, False)}
OPTIONAL_COLUMNS = ("statistic", "vllm_version")


@dataclass(frozen=True)
class ProfileRow:
    model: str
    gpu: str
    tp: int
    pp: int
    input_tokens: int
    output_tokens: int
    ttft_slo_ms: float
    tpot_slo_ms: float
    max_rps: float
    origin: str  # "file:line", recorded in plan.json as the number's source
    statistic: str | None = None  # latency statistic the SLO columns were checked on (None: unknown)
    vllm_version: str | None = None  # the engine measured (None: unknown)


def parse_profiles_csv(text: str, name: str) -> list[ProfileRow]:
    header, records = csv_records(text, name, known=COLUMNS + OPTIONAL_COLUMNS)
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(f"{name}: profile CSV lacks column(s) {', '.join(missing)}",
                                hint="header must be: " + ",".join(COLUMNS))
    rows = []
    for lineno, raw in records:
        raw = {k: (v or "").strip() for k, v in raw.items() if k is not None}
        where = f"{name}:{lineno}"
        n = {c: _number(raw, c, where) for c in RANGES}
        row = ProfileRow(model=raw["model"].lower(), gpu=raw["gpu"], tp=int(n["tp"]), pp=int(n["pp"]),
                         input_tokens=int(n["input_tokens"]), output_tokens=int(n["output_tokens"]),
                         ttft_slo_ms=n["ttft_slo_ms"], tpot_slo_ms=n["tpot_slo_ms"], max_rps=n["max_rps"], origin=where,
                         statistic=raw.get("statistic") or None, vllm_version=raw.get("vllm_version") or None)
        if not row.model or not row.gpu:
            raise InvalidInputError(f"{where}: model and gpu must not be empty")
        _check_labels(row, where)
        rows.append(row)
    return rows


#: a latency statistic a profile row may name: mean, median, or a percentile pNN (0 < NN < 100, p99.9)
#: (the profile harness and ``profile-import`` check their --statistic with it, so they never write a
#: row this module refuses to read)
STATISTIC = re.compile(r"^(mean|median|p(?!0+(\.0*)?\Z)[0-9]{1,2}(\.[0-9]+)?)\Z")
STATISTIC_HINT = "use mean, median or a percentile such as p50, p90, p99 or p99.9"


def _number(raw: dict, column: str, where: str) -> float:
    """Column ``column`` of one row as a number in its RANGES (an empty cell is refused as missing)."""
    lo, hi, whole = RANGES[column]
    value = number_cell(raw.get(column), where=where, column=column, lo=lo, hi=hi, whole=whole)
    if value is None:
        raise InvalidInputError(f"{where}: column '{column}' is empty", hint="every row gives " + ", ".join(COLUMNS))
    if column == "max_rps" and 0 < value < MIN_RATE_RPS:  # 1e-320: its reciprocal overflowed in the solver
        raise InvalidInputError(f"{where}: column 'max_rps' is {raw[column][:40]!r}: a rate is 0 (no rate meets the "
                                f"SLO) or from {MIN_RATE_RPS:g} req/s, the least a spec may plan",
                                hint="write the measured rate in requests per second, or 0")
    return value


#: the longest model cell: a row names a model by its name, catalog name or source (at most 256)
MAX_MODEL_CELL = 256


def _check_labels(row: ProfileRow, where: str) -> None:
    """The row's names, statistic and engine version. A model that is not one line of printable text
    or a GPU not spelled as the offers spell GPUs can match nothing: `profile-import` wrote such rows
    from a result file's model_id or its --gpu (an escape sequence reached the terminal as is, and a
    model_id holding a carriage return made a row its own reader split). A statistic that is none
    (``p999``, ``bogus``) was ranked as if it were one (p999 above p99, so never warned about); a
    version that is none reaches the plan's engine records."""
    check_names(row.model, row.gpu, f"{where}: column 'model'", f"{where}: column 'gpu'")
    if row.statistic is not None and not STATISTIC.match(row.statistic.lower()):
        raise InvalidInputError(f"{where}: statistic {row.statistic[:40]!r} is not a latency statistic",
                                hint=STATISTIC_HINT)
    check_vllm_version(row.vllm_version, f"{where}: vllm_version")


def check_names(model: str, gpu: str, model_what: str = "--model", gpu_what: str = "--gpu") -> None:
    """A profile row's model (one line of printable text, at most MAX_MODEL_CELL) and GPU (as the
    offers spell GPUs); the profile harness checks its --model and --gpu with it before the sweep,
    which writes its rows only at the end."""
    if not model.isprintable() or len(model) > MAX_MODEL_CELL:
        raise InvalidInputError(f"{model_what} is {model[:40]!r}: one line of printable text (at most "
                                f"{MAX_MODEL_CELL} characters)", hint="name the model as the spec does")
    if not is_resource_word(gpu):
        raise InvalidInputError(f"{gpu_what} is {gpu[:40]!r}: use letters, digits, '.', '_' and '-' (at most 128), "
                                "as the offers spell GPUs", hint="e.g. L4, A10G, H100")


def check_vllm_version(version: str | None, what: str) -> None:
    """``version`` (None: unknown) must look like a vLLM version (the spec's one pattern); the profile
    harness and ``profile-import`` check their ``--vllm-version`` with it before writing rows."""
    if version and not VLLM_VERSION.match(version.strip()):
        raise InvalidInputError(f"{what} {version[:40]!r} is not a version",
                                hint="write the vLLM version measured, such as 0.12.0 (or leave it empty)")


def load_profiles(path: Path) -> list[ProfileRow]:
    text = read_text(path, "profile file", hint="paths in the spec are relative to the spec file")
    return parse_profiles_csv(text, str(path))


def statistic_rank(statistic: str | None) -> float:
    """How strict a latency statistic is: pNN -> NN; mean, median or unknown -> 50."""
    s = (statistic or "mean").lower()
    if s.startswith("p"):
        try:
            return float(s[1:])
        except ValueError:
            return 50.0
    return 50.0


def weaker_statistic(row: ProfileRow, objective: str) -> bool:
    """The row was measured on a weaker statistic than the objective's (``p99``, ``mean``, ...)."""
    return statistic_rank(row.statistic) < statistic_rank(objective)


def cell_key(r: ProfileRow) -> tuple:
    """The cell a row measures: model, GPU, TP, PP, sizes and SLOs (`profile --merge` replaces a row
    of the same cell)."""
    return (r.model.lower(), r.gpu.lower(), r.tp, r.pp, r.input_tokens, r.output_tokens,
            float(r.ttft_slo_ms), float(r.tpot_slo_ms))


def _measured(r: ProfileRow) -> tuple:
    return (r.max_rps, (r.statistic or "").lower(), r.vllm_version or "")


def check_one_row_per_cell(rows: list[ProfileRow]) -> None:
    """Two rows of one cell (in one file or in two of a spec's files) that say different things are
    refused with both places: the lookup took the highest rate, silently (a p99 row of 4 req/s beside
    a mean row or an older one of 40 planned at 40). A row repeated as it stands passes."""
    first: dict[tuple, ProfileRow] = {}
    for r in rows:
        seen = first.setdefault(cell_key(r), r)
        if _measured(seen) != _measured(r):
            def said(x: ProfileRow) -> str:
                return f"{x.max_rps:g} req/s ({x.statistic or 'statistic unknown'}, vLLM {x.vllm_version or 'unknown'})"
            raise InvalidInputError(
                f"{r.origin}: {r.model} on {r.gpu} (tp {r.tp}, pp {r.pp}, in<={r.input_tokens}, out<={r.output_tokens}, "
                f"TTFT {r.ttft_slo_ms:g} ms, TPOT {r.tpot_slo_ms:g} ms) is measured again: {said(r)}, where "
                f"{seen.origin} says {said(seen)}",
                hint="keep one row per model, GPU, layout, sizes and SLOs (`hetinfra profile --merge` replaces a "
                     "cell's row); the planner would take the highest rate")


class ProfileTable:
    """Lookup of the usable profile row for (model names, gpu, tp, pp, class, SLO); the rows of all
    the files it is made of hold one measurement per cell (:func:`check_one_row_per_cell`)."""

    def __init__(self, rows: list[ProfileRow]):
        check_one_row_per_cell(rows)
        self.rows = tuple(rows)
        self._by_key: dict[tuple[str, str, int, int], list[ProfileRow]] = {}
        for r in rows:
            self._by_key.setdefault((r.model, r.gpu.lower(), r.tp, r.pp), []).append(r)
        for lst in self._by_key.values():
            lst.sort(key=lambda r: (r.input_tokens + r.output_tokens, r.input_tokens, -r.max_rps))

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def has(self, model_names: tuple[str, ...], gpu: str, tp: int, pp: int) -> bool:
        return any((m.lower(), gpu.lower(), tp, pp) in self._by_key for m in model_names)

    def lookup(self, model_names: tuple[str, ...], gpu: str, tp: int, pp: int,
               input_tokens: int, output_tokens: int, ttft_ms: float, tpot_ms: float) -> ProfileRow | None:
        for m in model_names:
            for r in self._by_key.get((m.lower(), gpu.lower(), tp, pp), ()):
                if (input_tokens <= r.input_tokens and output_tokens <= r.output_tokens
                        and r.ttft_slo_ms <= ttft_ms and r.tpot_slo_ms <= tpot_ms):
                    return r  # sorted: smallest bucket first, then highest max_rps
        return None
