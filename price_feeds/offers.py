"""Offers: what can be rented, where, at what price. Loading and validation of offer CSVs.

The embedded snapshot (``data/offers_snapshot.csv``) and user offers CSVs share one format::

    cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour

The snapshot adds ``as_of`` and ``source`` columns; user files may add them too, and
``committed_1y_price_per_hour`` / ``committed_3y_price_per_hour``: the hourly price of the instance
under a 1-year / 3-year commitment (reserved instance, savings plan, committed-use discount), paid
for every hour of the term. Empty (or absent): the offer has no committed purchase option.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from hetinfra.errors import InvalidInputError
from hetinfra.facts import CLOCK_AHEAD_S, CLOUDS, MAX_PRICE_USD_PER_HOUR
from hetinfra.csvtext import number_cell
from hetinfra.fileio import read_text
from hetinfra.csvtext import csv_records

#: Clouds hetinfra can deploy to (IaC and SkyPilot). Any other cloud name in an offers file is a
#: "custom" cloud (on-prem, neocloud): planned, but no infrastructure code is generated for it.
KNOWN_CLOUDS = tuple(CLOUDS)  # hetinfra.facts: the clouds' registry

REQUIRED_COLUMNS = (
    "cloud", "region", "instance_type", "gpu", "gpu_count", "gpu_memory_gb",
    "vcpus", "memory_gb", "price_per_hour", "spot_price_per_hour",
)
OPTIONAL_COLUMNS = ("as_of", "source", "committed_1y_price_per_hour", "committed_3y_price_per_hour")

#: Purchase options (plan.json ``allocations[].purchase``): on-demand, spot, and committed terms with
#: their length in months.
COMMITTED_TERMS = {"committed_1y": 12, "committed_3y": 36}
PURCHASE_OPTIONS = ("on_demand", "spot", *COMMITTED_TERMS)


@dataclass(frozen=True)
class Offer:
    """One instance type in one region, with its on-demand and spot price per hour."""

    cloud: str
    region: str
    instance_type: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: float
    vcpus: float
    memory_gb: float
    price_per_hour: float
    spot_price_per_hour: float | None
    as_of: str
    source: str
    committed_1y_price_per_hour: float | None = None
    committed_3y_price_per_hour: float | None = None

    @property
    def custom_cloud(self) -> bool:
        return self.cloud not in KNOWN_CLOUDS

    def price(self, spot: bool) -> float | None:
        return self.spot_price_per_hour if spot else self.price_per_hour

    def purchase_price(self, purchase: str) -> float | None:
        """$/h of one instance under a purchase option (PURCHASE_OPTIONS); None when not offered."""
        if purchase in COMMITTED_TERMS:
            return getattr(self, f"{purchase}_price_per_hour")
        return self.price(purchase == "spot")


@dataclass(frozen=True)
class SourceInfo:
    """Where a group of offers came from, as recorded in plan.json ``inputs.sources``."""

    name: str  # "embedded-snapshot" or a file path
    as_of: str  # its oldest row's (the published key: what --max-age-h and replan age)
    sha256: str
    rows: int
    newest_as_of: str | None = None  # its newest row's; given as None: as_of's (set so, once, here)

    def __post_init__(self) -> None:
        if self.newest_as_of is None:  # frozen: set through object, once, so no reader needs a fallback
            object.__setattr__(self, "newest_as_of", self.as_of)

    @property
    def span(self) -> str:
        """The source's as-of as every reader states it (:func:`as_of_span`)."""
        return as_of_span((self.as_of, self.newest_as_of))

    def record(self) -> dict:
        """The source as plan.json ``inputs.sources[]`` and `hetinfra prices --json` record it."""
        return {"name": self.name, "as_of": self.as_of, "newest_as_of": self.newest_as_of, "sha256": self.sha256,
                "rows": self.rows}


@dataclass(frozen=True)
class OfferSnapshot:
    offers: tuple[Offer, ...]
    sources: tuple[SourceInfo, ...] = field(default_factory=tuple)

    @property
    def as_of(self) -> str:
        """The oldest as-of date among the sources (what a user should worry about)."""
        return oldest_as_of(s.as_of for s in self.sources)

    @property
    def newest_as_of(self) -> str:
        """The newest as-of date among the sources' rows."""
        return newest_as_of(s.newest_as_of for s in self.sources)

    @property
    def span(self) -> str:
        """The sources' as-of as every reader states it (:func:`as_of_span`)."""
        return as_of_span((self.as_of, self.newest_as_of))

    def merged(self, other: "OfferSnapshot") -> "OfferSnapshot":
        """Offers of ``other`` replace same (cloud, region, instance_type) offers of self."""
        by_key = {(o.cloud, o.region, o.instance_type): o for o in self.offers}
        for o in other.offers:
            by_key[(o.cloud, o.region, o.instance_type)] = o
        return OfferSnapshot(tuple(by_key.values()), self.sources + other.sources)


#: what each numeric column may hold (a GPU count of a million or a price of 1e300 is a typo, not an offer)
RANGES = {"gpu_count": (1, 64), "gpu_memory_gb": (1e-3, 4096), "vcpus": (0, 4096), "memory_gb": (0, 65536),
          "price_per_hour": (-MAX_PRICE_USD_PER_HOUR, MAX_PRICE_USD_PER_HOUR)}  # the sign is checked below, with a clearer message
#: what a name cell (cloud, region, instance type, GPU) may hold: these reach YAML, shell and resource names
NAME_CELL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


def is_source_text(value: object) -> bool:
    """Whether ``value`` may be a row's ``source`` (a label such as 'skypilot-catalog-v8/aws@e385a0d3',
    shown by `hetinfra prices`): one line of printable text, at most 200 characters. A cell holding a
    newline or an escape sequence split the table and reached the terminal as is."""
    return isinstance(value, str) and value.isprintable() and len(value) <= 200


def parse_time(text: str) -> datetime | None:
    """An as-of text ("2025-11-01", "2026-01-05T12:00:00Z") as an aware UTC datetime."""
    text = (text or "").strip()
    if not text or text == "unknown":
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


_NO_TIME = datetime.max.replace(tzinfo=timezone.utc)


def oldest_as_of(texts, default: str = "unknown") -> str:
    """The oldest of as-of texts by the time they name, not by their spelling: ISO forms that sort
    apart as text (``20250101`` after ``2025-06-01``, ``-09:00`` offsets) are ordered by time; texts
    naming no time (``unknown``) come last; equal times keep the first spelling in text order.
    Every reader of "the oldest source" uses it; empty texts are skipped, none at all is ``default``."""
    def key(text: str) -> tuple:
        t = parse_time(text)
        return (t is None, t or _NO_TIME, text)

    return min((t for t in texts if t), key=key, default=default)


def newest_as_of(texts, default: str = "unknown") -> str:
    """The newest of as-of texts by the time they name (as :func:`oldest_as_of`, the other end);
    texts naming no time count only when none does."""
    def key(text: str) -> tuple:
        t = parse_time(text)
        return (t is not None, t or _NO_TIME, text)

    return max((t for t in texts if t), key=key, default=default)


def as_of_span(texts, default: str = "unknown") -> str:
    """The one way a group of rows (a snapshot, a source, the rows a command lists) states its as-of:
    their date when all name the same time, else ``oldest to newest``. A snapshot assembled from
    several price lists (the embedded one: Azure of 2024-07-01, AWS of 2025-11-01, GCP of two dates)
    read as its oldest date alone made a warning about its AWS rows and a header over those rows
    contradict each other."""
    texts = [t for t in texts if t]
    oldest, newest = oldest_as_of(texts, default), newest_as_of(texts, default)
    return oldest if parse_time(oldest) == parse_time(newest) else f"{oldest} to {newest}"


def source_info(name: str, as_ofs, text: str, rows: int, default: str = "unknown") -> SourceInfo:
    """A source's record (plan.json ``inputs.sources[]``): its rows' oldest and newest as-of and its hash."""
    as_ofs = list(as_ofs)
    return SourceInfo(name=name, as_of=oldest_as_of(as_ofs, default), sha256=hashlib.sha256(text.encode()).hexdigest(),
                      rows=rows, newest_as_of=newest_as_of(as_ofs, default))


def as_of_problem(text: str, now: datetime | None = None) -> str | None:
    """Why ``text`` cannot be a price's as-of (an offers row's, a stored snapshot's fetched_at), or None:
    not an ISO date or time, or more than CLOCK_AHEAD_S after ``now``. A price stamped 9999-12-31 was
    younger than any --max-age-h (its age negative), so stale prices passed as fresh."""
    t = parse_time(text)
    if t is None:
        return "not a date or time"
    now = now or datetime.now(timezone.utc)
    if (t - now).total_seconds() > CLOCK_AHEAD_S:
        return f"more than a day after now ({now:%Y-%m-%d %H:%M} UTC): a price cannot be as of the future"
    return None


def _as_of(raw: str, where: str, default: str, user: bool) -> str:
    """A row's as-of cell: empty (``default``), ``unknown`` or an ISO date or time, in a ``user`` file not
    in the future (:func:`as_of_problem`). Anything else is refused: the snapshot's as-of is its oldest
    row's, read by sorting, and replan and --max-age-h age it."""
    why = (as_of_problem(raw) if user else None if parse_time(raw) else "not a date or time") \
        if raw and raw != "unknown" else None
    if why:
        raise InvalidInputError(f"{where}: column 'as_of' is {raw[:40]!r}: {why}",
                                hint="write an ISO date or time (2025-11-01, 2025-11-01T12:00:00Z), or leave it empty")
    return raw or default


def _num(raw: str, *, where: str, column: str, required: bool = True) -> float | None:
    lo, hi = RANGES.get(column, RANGES["price_per_hour"])
    value = number_cell(raw, where=where, column=column, lo=lo, hi=hi, whole=column == "gpu_count")
    if value is None and required:
        raise InvalidInputError(f"{where}: column '{column}' is empty", hint="give a number")
    return value


def parse_offers_csv(text: str, *, name: str, default_as_of: str = "unknown", user: bool = False) -> OfferSnapshot:
    """Parse and validate an offers CSV. Any bad row is an error naming file, line and column."""
    header, records = csv_records(text, name, known=REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(
            f"{name}: offers CSV lacks column(s) {', '.join(missing)}",
            hint="header must be: " + ",".join(REQUIRED_COLUMNS),
        )
    unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise InvalidInputError(f"{name}: unknown column(s) {', '.join(unknown)}",
                                hint="allowed: " + ",".join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS))
    offers: list[Offer] = []
    seen: set[tuple[str, str, str]] = set()
    for lineno, row in records:
        row = {k: (v or "").strip() for k, v in row.items() if k is not None}
        where = f"{name}:{lineno}"
        for col in ("cloud", "region", "instance_type", "gpu"):
            if not row.get(col):
                raise InvalidInputError(f"{where}: column '{col}' is empty")
            if not NAME_CELL.match(row[col]):
                raise InvalidInputError(f"{where}: column '{col}' is {row[col][:40]!r}: use letters, digits, '.', "
                                        "'_' and '-' (at most 128; it names cloud resources)")
        if row.get("source") and not is_source_text(row["source"]):
            raise InvalidInputError(f"{where}: column 'source' is {row['source'][:40]!r}: one line of printable text "
                                    "(at most 200 characters)")
        count = _num(row["gpu_count"], where=where, column="gpu_count")
        if count is None or count < 1 or count != int(count):
            raise InvalidInputError(f"{where}: gpu_count must be a whole number >= 1, got {row['gpu_count']!r}")
        od = _num(row["price_per_hour"], where=where, column="price_per_hour")
        spot = _num(row["spot_price_per_hour"], where=where, column="spot_price_per_hour", required=False)
        mem = _num(row["gpu_memory_gb"], where=where, column="gpu_memory_gb")
        if od <= 0:
            raise InvalidInputError(f"{where}: price_per_hour must be > 0, got {od}")
        if spot is not None and (spot <= 0 or spot > od):
            raise InvalidInputError(f"{where}: spot_price_per_hour {spot} must be > 0 and <= price_per_hour {od}",
                                    hint="leave it empty when there is no spot offer")
        if mem <= 0:
            raise InvalidInputError(f"{where}: gpu_memory_gb must be > 0, got {mem}")
        committed = {}
        for term in COMMITTED_TERMS:
            col = f"{term}_price_per_hour"
            committed[col] = _num(row.get(col, ""), where=where, column=col, required=False)
            if committed[col] is not None and (committed[col] <= 0 or committed[col] > od):
                raise InvalidInputError(f"{where}: {col} {committed[col]} must be > 0 and <= price_per_hour {od}",
                                        hint="leave it empty when there is no committed price")
        key = (row["cloud"].lower(), row["region"], row["instance_type"])
        if key in seen:
            raise InvalidInputError(f"{where}: duplicate offer {key[0]}/{key[1]}/{key[2]}")
        seen.add(key)
        offers.append(Offer(
            cloud=key[0], region=row["region"], instance_type=row["instance_type"], gpu=row["gpu"],
            gpu_count=int(count), gpu_memory_gb=mem,
            vcpus=_num(row["vcpus"], where=where, column="vcpus", required=False) or 0.0,
            memory_gb=_num(row["memory_gb"], where=where, column="memory_gb", required=False) or 0.0,
            price_per_hour=od, spot_price_per_hour=spot,
            as_of=_as_of(row.get("as_of", ""), where, default_as_of, user), source=row.get("source") or name, **committed,
        ))
    return OfferSnapshot(tuple(offers), (source_info(name, (o.as_of for o in offers), text, len(offers), default_as_of),))


def load_offers_file(path: Path) -> OfferSnapshot:
    text = read_text(path, "offers file", hint="paths in the spec are relative to the spec file")
    return parse_offers_csv(text, name=str(path), user=True)  # a user's file: no as-of in the future


@functools.lru_cache(maxsize=1)
def load_embedded_snapshot() -> OfferSnapshot:
    """The snapshot shipped in the package (no network); parsed once per process (it is package data,
    and an OfferSnapshot is immutable)."""
    text = resources.files("hetinfra.price_feeds").joinpath("data/offers_snapshot.csv").read_text()
    snap = parse_offers_csv(text, name="embedded-snapshot")
    return snap


def format_number(x: float | int | None) -> str:
    """CSV text of a number: integers without a decimal point, others with at most 6 decimals."""
    if x is None:
        return ""
    if isinstance(x, float):
        if x == int(x):
            return str(int(x))
        return f"{x:.6f}".rstrip("0").rstrip(".")
    return str(x)


def offers_to_csv(offers, *, with_as_of: bool = True, with_source: bool = True) -> str:
    """Offers as an offers CSV (the format :func:`parse_offers_csv` reads), in a stable order.

    Rows are sorted by (cloud, region, gpu, gpu_count, instance_type) and numbers are formatted by
    :func:`format_number`, so equal offers always give byte-identical text (and the same hash). The
    committed-price columns are written only when some offer has a committed price.
    """
    offers = list(offers)
    cols = list(REQUIRED_COLUMNS) + (["as_of"] if with_as_of else []) + (["source"] if with_source else [])
    cols += [c for c in OPTIONAL_COLUMNS[2:] if any(getattr(o, c) is not None for o in offers)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for o in sorted(offers, key=lambda o: (o.cloud, o.region, o.gpu, o.gpu_count, o.instance_type)):
        w.writerow([format_number(getattr(o, c)) if c not in ("cloud", "region", "instance_type", "gpu", "as_of", "source")
                    else getattr(o, c) for c in cols])
    return buf.getvalue()
