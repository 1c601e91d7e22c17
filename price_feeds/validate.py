"""Validation of feed rows: bad rows are DROPPED with a counted reason, never fatal.

User offers CSVs named in a spec stay strict (:func:`hetinfra.price_feeds.offers.parse_offers_csv`,
exit 2); this module is for feeds, where one odd row of thousands must not stop a plan::

    v = Validator()
    for offer in rows: v.add(offer)
    v.summary()   # "dropped 3 rows: 2 spot above on-demand, 1 unknown GPU"
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from hetinfra.errors import InvalidInputError
from hetinfra.csvtext import csv_records, plain_float
from hetinfra.price_feeds.families import GPU_MEMORY_GB, expected_gpu, gpu_memory_gb
from hetinfra.price_feeds.offers import NAME_CELL, OPTIONAL_COLUMNS, RANGES, REQUIRED_COLUMNS, Offer, is_source_text

# Reasons (the words users see in "dropped N rows: ...").
MISSING_FIELD = "missing field"
NOT_A_NUMBER = "not a number"
PRICE_NOT_POSITIVE = "price <= 0"
SPOT_NOT_POSITIVE = "spot <= 0"
SPOT_ABOVE_ON_DEMAND = "spot above on-demand"
COMMITTED_NOT_BELOW = "committed price <= 0 or above on-demand"
BAD_GPU_COUNT = "bad GPU count"
GPU_COUNT_MISMATCH = "GPU count not matching the family"
UNKNOWN_GPU = "unknown GPU"
GPU_MEMORY_NOT_POSITIVE = "GPU memory <= 0"
DUPLICATE = "duplicate"
ZONE_PRICES_DIFFER = "on-demand differs across zones"
NAME_NOT_A_WORD = "name not letters, digits, '.', '_', '-'"
OUT_OF_RANGE = "number out of range"
SOURCE_NOT_TEXT = "source not one line of printable text"
CELLS_PAST_HEADER = "a cell past the header's columns (a comma inside a value)"


def known_gpus() -> set[str]:
    """GPU names a feed row may carry: hetinfra's GPU catalog plus the family tables."""
    from hetinfra.catalog.gpus import GPUS

    return set(GPUS) | set(GPU_MEMORY_GB)


@dataclass
class Reject:
    """A row an adapter could not turn into an Offer; counted like a validation drop."""

    reason: str
    detail: str = ""


class Validator:
    """Collects valid offers; counts dropped rows by reason (with a few examples each)."""

    def __init__(self, *, gpus: set[str] | None = None, check_families: bool = True, max_examples: int = 3):
        self.gpus = known_gpus() if gpus is None else gpus
        self.check_families = check_families
        self.max_examples = max_examples
        self.offers: list[Offer] = []
        self.drops: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}
        self._kept: dict[tuple[str, str, str], tuple[str, Offer]] = {}  # key -> (where, offer) of the row kept

    def drop(self, reason: str, detail: str = "") -> None:
        self.drops[reason] += 1
        ex = self.examples.setdefault(reason, [])
        if detail and len(ex) < self.max_examples:
            ex.append(detail)

    def check(self, o: Offer) -> str | None:
        """The reason to drop ``o``, or None when it is a valid offer."""
        if not (o.cloud and o.region and o.instance_type and o.gpu):
            return MISSING_FIELD
        # the offers CSV reader's own rules (parse_offers_csv, here and in the ranges below), so that no
        # row is kept, stored in a snapshot or planned that the reader refuses: a catalog's instance type
        # 'g5$(id)' or 1e300 vCPUs was kept, then its snapshot refused whole (exit 2 naming 'skypilot-catalog:3')
        if not all(isinstance(v, str) and NAME_CELL.match(v) for v in (o.cloud, o.region, o.instance_type, o.gpu)):
            return NAME_NOT_A_WORD
        if o.source and not is_source_text(o.source):
            return SOURCE_NOT_TEXT
        if not isinstance(o.gpu_count, int) or o.gpu_count < 1:
            return BAD_GPU_COUNT
        if o.price_per_hour is None or not o.price_per_hour > 0:
            return PRICE_NOT_POSITIVE
        if o.spot_price_per_hour is not None:
            if not o.spot_price_per_hour > 0:
                return SPOT_NOT_POSITIVE
            if o.spot_price_per_hour > o.price_per_hour:
                return SPOT_ABOVE_ON_DEMAND
        for c in (o.committed_1y_price_per_hour, o.committed_3y_price_per_hour):
            if c is not None and not 0 < c <= o.price_per_hour:
                return COMMITTED_NOT_BELOW
        if self.gpus and o.gpu not in self.gpus:
            return UNKNOWN_GPU
        if self.check_families:
            exp = expected_gpu(o.cloud, o.instance_type)
            if exp is not None and (exp[0] != o.gpu or exp[1] != o.gpu_count):
                return GPU_COUNT_MISMATCH
        if not o.gpu_memory_gb or not o.gpu_memory_gb > 0:
            return GPU_MEMORY_NOT_POSITIVE
        for column, (least, most) in RANGES.items():
            value = getattr(o, column)
            if not isinstance(value, (int, float)) or not (math.isfinite(value) and least <= value <= most):
                return OUT_OF_RANGE
        if any(v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)) for v in (
                o.spot_price_per_hour, o.committed_1y_price_per_hour, o.committed_3y_price_per_hour)):
            return OUT_OF_RANGE
        if (o.cloud, o.region, o.instance_type) in self._kept:
            return DUPLICATE
        return None

    def add(self, row: "Offer | Reject", where: str = "") -> bool:
        """Keep ``row`` or count why not; ``where`` (``file:line``) names it in the examples, else
        its cloud/region/instance type do."""
        if isinstance(row, Reject):
            self.drop(row.reason, row.detail)
            return False
        key = (row.cloud, row.region, row.instance_type)
        reason = self.check(row)
        if reason is not None:
            self.drop(reason, _duplicate(where, row, *self._kept[key]) if reason == DUPLICATE
                      else where or "/".join(key))
            return False
        self._kept[key] = (where or "an earlier row", row)
        self.offers.append(row)
        return True

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def summary(self) -> str | None:
        """``"dropped 3 rows: 2 spot above on-demand, 1 unknown GPU"``, or None when none."""
        return drops_summary(self.drops)


def _duplicate(where: str, row: Offer, kept_where: str, kept: Offer) -> str:
    """A duplicate's example: where it is, which row was kept, and what they disagree on."""
    here = where or "/".join((row.cloud, row.region, row.instance_type))
    if row == kept:
        return f"{here} repeats {kept_where}"
    differ = [f"{name} {getattr(kept, name)} there, {getattr(row, name)} here" for name in _COMPARED
              if getattr(kept, name) != getattr(row, name)]
    return f"{here} conflicts with {kept_where}, the row kept: {' and '.join(differ[:2])}"


#: what a conflicting duplicate's example names where it differs from the row kept
_COMPARED = ("price_per_hour", "spot_price_per_hour", "gpu", "gpu_count", "gpu_memory_gb",
             "committed_1y_price_per_hour", "committed_3y_price_per_hour", "vcpus", "memory_gb", "as_of")


def drops_summary(drops: dict[str, int], examples: dict[str, list[str]] | None = None) -> str | None:
    """``"dropped 3 rows: 2 spot above on-demand, 1 unknown GPU"``; with ``examples`` (reason ->
    the first few rows' ``file:line``) each reason names them: ``1 unknown GPU (offers.csv:7)``."""
    total = sum(drops.values())
    if not total:
        return None

    def part(reason: str, n: int) -> str:
        shown = (examples or {}).get(reason) or []
        more = "; ..." if n > len(shown) else ""
        return f"{n} {reason}" + (f" ({'; '.join(shown)}{more})" if shown else "")

    parts = ", ".join(part(reason, n) for reason, n in sorted(drops.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"dropped {total} row{'s' if total != 1 else ''}: {parts}"


def _num(raw: str | None) -> float | None:
    raw = (raw or "").strip()
    if raw == "":
        return None
    value = plain_float(raw)  # ValueError -> NOT_A_NUMBER ('1_0', '٣', 'inf' included: float() read them)
    if abs(value) > 1e9:
        raise ValueError(raw)  # NaN, inf, 1e300: not a number an offer can hold
    return value


def parse_offers_lenient(text: str, *, name: str, default_as_of: str = "unknown",
                         validator: Validator | None = None) -> Validator:
    """Read an offers CSV, dropping bad rows with reasons. A bad HEADER is still an error (exit 2)."""
    v = validator or Validator(gpus=set(), check_families=True)
    header, records = csv_records(text, name, wide="keep", known=REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(f"{name}: offers CSV lacks column(s) {', '.join(missing)}",
                                hint="header must be: " + ",".join(REQUIRED_COLUMNS))
    allowed = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    for lineno, row in records:
        where = f"{name}:{lineno}"
        if None in row:  # its cells shifted: every number of it may be another column's
            v.drop(CELLS_PAST_HEADER, where)
            continue
        row = {k: (v_ or "").strip() for k, v_ in row.items() if k in allowed}
        try:
            count = _num(row.get("gpu_count"))
            od = _num(row.get("price_per_hour"))
            spot = _num(row.get("spot_price_per_hour"))
            mem = _num(row.get("gpu_memory_gb"))
            vcpus = _num(row.get("vcpus")) or 0.0
            memory = _num(row.get("memory_gb")) or 0.0
            committed = {c: _num(row.get(c)) for c in OPTIONAL_COLUMNS[2:]}
        except ValueError:
            v.drop(NOT_A_NUMBER, where)
            continue
        if count is None or count != int(count) or not 1 <= count <= 64:
            v.drop(BAD_GPU_COUNT, where)
            continue
        if od is None:
            v.drop(MISSING_FIELD, where)
            continue
        v.add(Offer(cloud=(row.get("cloud") or "").lower(), region=row.get("region", ""),
                    instance_type=row.get("instance_type", ""), gpu=row.get("gpu", ""), gpu_count=int(count),
                    gpu_memory_gb=mem or gpu_memory_gb(row.get("instance_type", ""), row.get("gpu", "")) or 0.0, vcpus=vcpus, memory_gb=memory, price_per_hour=od,
                    spot_price_per_hour=spot, as_of=row.get("as_of") or default_as_of,
                    source=row.get("source") or name, **committed), where)
    return v
