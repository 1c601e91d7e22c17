"""Reading a demand log (the format is in hetinfra.replan.demand_log): each row becomes a typed
:class:`DemandRecord`, checked at the boundary, and the log a :class:`DemandLog` of aligned arrays.

Two paths, one set of checks. :meth:`DemandRecord.parse` checks one row and names its file:line in
every error. A gateway's log holds millions of rows of one plain shape (epoch seconds, whole token
counts), so :func:`read_demand_log` first checks the rows column by column in numpy
(:func:`_batch`): the same conversions (Python's float grammar, which numpy's string-to-float
conversion follows), the same bounds, all at once. A column the batch cannot take whole (an ISO
timestamp, a bad cell anywhere) sends the file down the per-row path, which either reads it the
same way or stops at the first bad row with its line. tests/replan/test_log_read.py checks the two
paths agree on any rows.
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from hetinfra.errors import InvalidInputError, did_you_mean
from hetinfra.facts import CLOCK_AHEAD_S
from hetinfra.fileio import read_text
from hetinfra.csvtext import check_width, csv_header, csv_lines, is_plain_number, torn_last_row
from hetinfra.spec.demand import DEMAND_LOG_COLUMNS, MAX_LOG_BYTES

COLUMNS = DEMAND_LOG_COLUMNS
REQUIRED = COLUMNS[:4]  # region is optional: a log without it simply has no origins
MAX_LOG_TOKENS = 10_000_000  # a row beyond it is a broken client or writer, never a request to plan for
MAX_EPOCH_S = 4_102_444_800  # 2100-01-01: beyond it a number is not a time at all
#: the sane window of a demand log's timestamps: from 2020-01-01 UTC to a day after now
EARLIEST_S = 1_577_836_800
AHEAD_S = CLOCK_AHEAD_S


@dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous; a log is compared by identity
class DemandLog:
    """The requests of a log, sorted by time. Arrays are aligned: index i is one request."""

    path: str
    timestamps: np.ndarray  # float64, Unix epoch seconds (UTC)
    models: np.ndarray  # str
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    regions: np.ndarray  # str, "" when unknown
    skipped: tuple[str, ...] = ()  # rows left out (timestamps outside the sane window), in words

    def model_names(self) -> list[str]:
        return sorted(set(self.models.tolist()))

    def rows_of(self, model: str) -> np.ndarray:
        """Boolean mask of the model's requests; an unknown model is an error with a did-you-mean."""
        mask = self.models == model
        if not mask.any():
            raise InvalidInputError(f"{self.path}: no request for model '{model}' in the log",
                                    hint=did_you_mean(model, self.model_names()))
        return mask


def _timestamp(text: str, where: str) -> float:
    """Epoch seconds as a CSV writes a number (csvtext.is_plain_number: float() also read '1_733_500_000'
    and Unicode digits), else ISO 8601 in ASCII."""
    if is_plain_number(text):  # epoch seconds first: a bare number is never a valid ISO date we would want
        value = float(text)
        if math.isfinite(value):
            if not 0 <= value <= MAX_EPOCH_S:
                raise InvalidInputError(f"{where}: timestamp {text[:40]!r} is not a time between 1970 and 2100")
            return value
    try:
        if not text.isascii():
            raise ValueError(text)
        t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise InvalidInputError(f"{where}: timestamp {text!r} is neither ISO 8601 nor Unix epoch seconds",
                                hint="e.g. 2024-05-01T12:00:00Z, 2024-05-01T14:00:00+02:00 or 1714564800") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)  # naive times are UTC by contract
    return t.timestamp()


def _tokens(text: str, column: str, where: str) -> int:
    """A whole token count as a CSV writes a number (``2_00`` and ``٢٠٠`` read as 200 through float())."""
    value = float(text) if is_plain_number(text) else math.nan
    if not (math.isfinite(value) and value == int(value)):
        raise InvalidInputError(f"{where}: {column} {text[:40]!r} is not a whole number",
                                hint="write it with ASCII digits (1500)")
    if value < 0:
        raise InvalidInputError(f"{where}: {column} {text!r} is negative")
    if value > MAX_LOG_TOKENS:
        raise InvalidInputError(f"{where}: {column} {text[:40]!r} is more than {MAX_LOG_TOKENS} tokens",
                                hint="a request that large is a client error; remove the row")
    return int(value)


@dataclass(frozen=True, slots=True)
class DemandRecord:
    """One request of a demand log, checked: a time between 1970 and 2100 (epoch seconds, UTC), a
    model name, whole token counts in [0, MAX_LOG_TOKENS], the client's region ("" when unknown)."""

    timestamp: float
    model: str
    input_tokens: int
    output_tokens: int
    region: str

    @classmethod
    def parse(cls, row: list[str], col: dict[str, int], where: str) -> "DemandRecord":
        """The record of one CSV row (``col``: column name -> index); an InvalidInputError at ``where``."""
        model = row[col["model"]].strip()
        if not model:
            raise InvalidInputError(f"{where}: model is empty")
        return cls(_timestamp(row[col["timestamp"]].strip(), where), model,
                   _tokens(row[col["input_tokens"]].strip(), "input_tokens", where),
                   _tokens(row[col["output_tokens"]].strip(), "output_tokens", where),
                   row[col["region"]].strip() if "region" in col else "")


class _Window:
    """Counts the rows whose time is outside [EARLIEST_S, now + AHEAD_S] (see the module docstring)."""

    def __init__(self, now: float):
        self.low, self.high = EARLIEST_S, now + AHEAD_S
        self.outside = 0
        self.first: str | None = None

    def holds(self, t: float, where: str) -> bool:
        if self.low <= t <= self.high:
            return True
        self.outside += 1
        if self.first is None:
            stamp = datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.first = f"{where} ({stamp})"
        return False

    def lines(self) -> tuple[str, ...]:
        if not self.outside:
            return ()
        return (f"{self.outside} row(s) stamped before 2020-01-01 or more than a day after now were skipped, the first "
                f"at {self.first}: a clock was wrong where they were written",)


def _numbers(cells: list[str]) -> np.ndarray | None:
    """float64 of every cell as DemandRecord.parse reads it (Python's float(), which ignores the
    whitespace strip() removes), or None when one is not a finite number or is written otherwise than
    a CSV writes one (an underscore, a digit that is not ASCII: float() reads them, the row's parser
    refuses them at their line)."""
    joined = "".join(cells)
    if not joined.isascii() or "_" in joined:
        return None
    try:
        values = np.fromiter(map(float, cells), dtype=np.float64, count=len(cells))
    except (ValueError, OverflowError):
        return None
    return values if np.isfinite(values).all() else None


def _batch(columns: dict[str, list[str]]) -> tuple | None:
    """(timestamps, models, input tokens, output tokens, regions) of all rows (``columns``: name ->
    cells, one per row), each column checked as :meth:`DemandRecord.parse` checks it, or None when a
    cell needs the per-row path (it may be an ISO time, or wrong: that path reads it or names its line)."""
    ts = _numbers(columns["timestamp"])
    if ts is None or ts.min() < 0 or ts.max() > MAX_EPOCH_S:
        return None
    counts = []
    for name in ("input_tokens", "output_tokens"):
        n = _numbers(columns[name])
        if n is None or n.min() < 0 or n.max() > MAX_LOG_TOKENS or (n != np.floor(n)).any():
            return None
        counts.append(n.astype(np.int64))
    models = list(map(str.strip, columns["model"]))
    if not all(models):
        return None
    regions = list(map(str.strip, columns["region"])) if "region" in columns else [""] * len(models)
    return ts, models, counts[0], counts[1], regions


def _uniform_columns(text: str, p: Path) -> tuple[dict[str, list[str]], list[int]] | None:
    """The columns of a log the gateway wrote (no quote, no carriage return, every row exactly as
    wide as the header, no field past csv.reader's bound), split in C: line breaks and commas are
    counted in numpy, the cells split at once and sliced per column. None for any other log."""
    if not text or '"' in text or "\r" in text:
        return None
    body = text if text.endswith("\n") else text + "\n"
    codes = np.frombuffer(body.encode("utf-8"), dtype=np.uint8)
    ends = np.flatnonzero(codes == 10)
    per_line = np.diff(np.searchsorted(np.flatnonzero(codes == 44), ends), prepend=0)  # commas before each end
    longest = int(np.diff(ends, prepend=-1).max())
    if (per_line != per_line[0]).any() or longest > csv.field_size_limit():
        return None
    width = int(per_line[0]) + 1
    cells = body[:-1].replace("\n", ",").split(",")
    col, _ = _header(cells[:width], p)
    return {name: cells[width + k::width] for name, k in col.items()}, list(range(2, len(ends) + 1))


def _header(header: list[str] | None, p: Path) -> tuple[dict[str, int], int]:
    """Column name -> index from the header row, and its width; an error naming what is missing."""
    expected = ",".join(COLUMNS)
    if header is None:
        raise InvalidInputError(f"{p}: the demand log is empty", hint=f"expected the header {expected}")
    names = csv_header(header, str(p), known=COLUMNS)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise InvalidInputError(f"{p}:1: header lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
                                hint=f"expected the header {expected} (region may be empty; extra columns are ignored)")
    return {c: names.index(c) for c in COLUMNS if c in names}, len(names)


def _numbered_rows(text: str, p: Path):
    """(line number, cells) of each CSV row. A log without quotes or carriage returns (what the
    gateway writes) is split at newlines and commas in C, as csv.reader would split it, while no line
    exceeds csv.reader's own bound on a field; any other log goes through hetinfra.csvtext.csv_lines."""
    if '"' not in text and "\r" not in text:
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the newline ending the last row (csv.reader gives no row for it; "" has none)
        if max(map(len, lines), default=0) <= csv.field_size_limit():
            yield from zip(range(1, len(lines) + 1), [line.split(",") for line in lines])
            return
    yield from csv_lines(text, str(p))


def _rows(text: str, p: Path) -> tuple[dict[str, int], list[list[str]], list[int]]:
    """The header's columns, the rows and their line numbers; a short row is an error unless blank."""
    numbered = _numbered_rows(text, p)
    first = next(numbered, (0, None))[1]
    col, named = _header(first, p)
    names = [c.strip() for c in first]
    width = max(col.values()) + 1
    lines, rows = [], []
    for line, row in numbered:
        if len(row) < width:
            if not "".join(row).strip():
                continue  # blank line
            raise InvalidInputError(f"{p}:{line}: {len(row)} fields, the header has {named}",
                                    hint="expected " + ",".join(COLUMNS))
        check_width(row, names, str(p), line)  # a model name holding a comma, unquoted
        lines.append(line)
        rows.append(row)
    return col, rows, lines


def _per_row(rows, lines, col, p: Path) -> tuple:
    """The rows' records, one by one (the first bad one an error naming its line)."""
    records = [DemandRecord.parse(row, col, f"{p}:{line}") for row, line in zip(rows, lines)]
    return (np.asarray([r.timestamp for r in records], dtype=float), [r.model for r in records],
            np.asarray([r.input_tokens for r in records], dtype=np.int64),
            np.asarray([r.output_tokens for r in records], dtype=np.int64), [r.region for r in records])


def _torn_note(p: Path, text: str, torn: str) -> str:
    shown_row = torn if len(torn) <= 40 else torn[:37] + "..."
    return (f"{p}:{text.count(chr(10)) + 1}: the last row {shown_row!r} is cut short (no newline, fewer cells than "
            f"the header): a writer stopped or was writing it; it was left out")


def _checked(p: Path) -> tuple[tuple, list[int], tuple[str, ...]]:
    """The log's columns, checked, each row's line number (rows of blank cells left out) and the note
    of a last row cut short, left out (:func:`torn_last_row`)."""
    text, torn = torn_last_row(read_text(p, "demand log", max_bytes=MAX_LOG_BYTES))
    notes = (_torn_note(p, text, torn),) if torn is not None else ()
    uniform = _uniform_columns(text, p)
    if uniform is not None and uniform[1]:
        columns = _batch(uniform[0])
        if columns is not None:
            return columns, uniform[1], notes
    col, rows, lines = _rows(text, p)
    columns = _batch({name: [row[k] for row in rows] for name, k in col.items()}) if rows else None
    if columns is None:  # the per-row path: a row of blank cells is a blank line there
        kept = [k for k, row in enumerate(rows) if "".join(row).strip()]
        rows, lines = [rows[k] for k in kept], [lines[k] for k in kept]
        columns = _per_row(rows, lines, col, p)
    if not lines:
        raise InvalidInputError(f"{p}: the demand log has a header but no requests",
                                hint="one row per request: " + ",".join(COLUMNS))
    return columns, lines, notes


def read_demand_log(path: str | Path, *, clock: Callable[[], float] = time.time) -> DemandLog:
    """Read and check a request log; every bad row is an InvalidInputError naming file:line. Rows
    stamped outside the sane window of ``clock()`` are skipped and counted in ``skipped``."""
    p = Path(path)
    (ts, models, ins, outs, regions), lines, torn = _checked(p)
    window = _Window(clock())
    inside = (ts >= window.low) & (ts <= window.high)
    if not inside.all():
        first = int(np.argmin(inside))
        window.holds(float(ts[first]), f"{p}:{lines[first]}")  # records the first, in file order
        window.outside = int((~inside).sum())
    if not inside.any():
        raise InvalidInputError(f"{p}: no request is stamped between 2020-01-01 and a day after now ("
                                f"{window.outside} row(s), the first at {window.first})",
                                hint="fix the clock of the machine that wrote the log (timestamps are UTC)")
    ts = ts[inside]
    order = np.argsort(ts, kind="stable")
    return DemandLog(str(p), ts[order], np.asarray(models, dtype=str)[inside][order], ins[inside][order],
                     outs[inside][order], np.asarray(regions, dtype=str)[inside][order], torn + window.lines())
