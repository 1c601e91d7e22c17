"""The snapshot store: every fetch kept as a timestamped, content-hashed snapshot.

Layout (root: ``HETINFRA_CACHE_DIR`` or ``~/.cache/hetinfra/feeds``)::

    <root>/<source>/<YYYYmmddTHHMMSSffffffZ>-<sha256[:12]>/offers.csv   offers CSV (offers format)
                                                           /meta.json    source, fetched_at, as_of,
                                                                         sha256, rows, drops, coverage

``sha256`` is the hash of offers.csv, whose text depends only on the offers (sorted rows, fixed
number format, no as_of column when every row has the fetch's as-of), so equal prices hash the
same across fetches. Snapshots are written to a temporary directory and renamed into place
(atomic); a snapshot whose offers.csv no longer matches its hash, or does not parse, is skipped as
corrupt by :meth:`SnapshotStore.latest_good`. The oldest snapshots beyond ``keep`` per source are
pruned.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from hetinfra.errors import HetinfraError
from hetinfra.price_feeds.base import Coverage, FeedResult, parse_time
from hetinfra.price_feeds.config import default_cache_dir
from hetinfra.price_feeds.offers import OfferSnapshot, as_of_problem, is_source_text, parse_offers_csv

FORMAT = 1
OFFERS = "offers.csv"
META = "meta.json"


class CorruptSnapshot(HetinfraError):
    exit_code = 4


@dataclass
class StoredSnapshot:
    path: Path
    meta: dict
    text: str = field(repr=False, default="")

    @property
    def source(self) -> str:
        return self.meta["source"]

    @property
    def label(self) -> str:
        return self.meta.get("label") or self.meta["source"]

    @property
    def fetched_at(self) -> str:
        return self.meta["fetched_at"]

    @property
    def as_of(self) -> str:
        return self.meta.get("as_of") or self.fetched_at

    @property
    def sha256(self) -> str:
        return self.meta["sha256"]

    @property
    def coverage(self) -> Coverage:
        cov = self.meta.get("coverage") or {}
        return {c: (None if regs is None else frozenset(regs)) for c, regs in cov.items()}

    def age_h(self, now: datetime | None = None) -> float | None:
        t = parse_time(self.fetched_at)
        if t is None:
            return None
        return ((now or datetime.now(timezone.utc)) - t).total_seconds() / 3600.0

    def snapshot(self) -> OfferSnapshot:
        return parse_offers_csv(self.text, name=self.label, default_as_of=self.as_of)


#: meta.json's keys that are read, and the type each must have (None: the key may be absent or null)
_META_TEXT = ("source", "fetched_at", "sha256")
_META_OPTIONAL_TEXT = ("label", "as_of")


def meta_problem(meta: object) -> str | None:
    """What is wrong with a snapshot's meta.json, or None. Every field a reader takes is checked here,
    where the file is read: meta.json sits in a cache anyone can edit, and a coverage of ``[1]`` or a
    label of ``5`` was a traceback in `hetinfra plan --feeds cache` (a snapshot that fails is skipped
    as corrupt, with a warning, as one whose offers.csv does not match its hash)."""
    if not isinstance(meta, dict):
        return "is not a JSON object"
    for key in _META_TEXT:
        if not isinstance(meta.get(key), str) or not meta[key]:
            return f"lacks source/fetched_at/sha256 as text ({key} is {meta.get(key)!r:.60})"
    if as_of_problem(meta["fetched_at"]):
        return f"fetched_at {meta['fetched_at']!r:.60} is {as_of_problem(meta['fetched_at'])}"
    for key in _META_OPTIONAL_TEXT:
        value = meta.get(key)
        if value is not None and not is_source_text(value):  # the label is the offers' source column
            return f"{key} is {value!r:.60}: expected one line of text"
    coverage = meta.get("coverage")
    if coverage is None:
        return None
    if not isinstance(coverage, dict) or not all(
            isinstance(regions, list) and all(isinstance(r, str) for r in regions)
            for regions in coverage.values() if regions is not None):
        return f"coverage is {coverage!r:.60}: expected {{cloud: [region, ...] or null}}"
    return None


def read_snapshot_dir(path: Path) -> StoredSnapshot:
    """Load and verify one snapshot directory; :class:`CorruptSnapshot` when it does not check out."""
    path = Path(path)
    from hetinfra.errors import HetinfraError
    from hetinfra.fileio import read_json, read_text

    try:  # the one reader: a FIFO in the cache never hangs a plan, a nest is an error, not a RecursionError
        meta = read_json(path / META, "snapshot meta.json", max_bytes=1 << 20)
        raw = read_text(path / OFFERS, "snapshot offers.csv").encode("utf-8")
    except HetinfraError as exc:
        raise CorruptSnapshot(f"snapshot {path} is unreadable: {exc.message}") from None
    problem = meta_problem(meta)
    if problem:
        raise CorruptSnapshot(f"snapshot {path}: meta.json {problem}")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != meta["sha256"]:
        raise CorruptSnapshot(f"snapshot {path}: offers.csv does not match its sha256 (corrupt or edited)")
    snap = StoredSnapshot(path, meta, raw.decode("utf-8"))
    try:
        snap.snapshot()
    except HetinfraError as exc:
        raise CorruptSnapshot(f"snapshot {path}: {exc.message}") from None
    return snap


def is_snapshot_dir(path: Path) -> bool:
    return (Path(path) / META).is_file() and (Path(path) / OFFERS).is_file()


class SnapshotStore:
    def __init__(self, root: Path | str | None = None, *, keep: int = 50):
        self.root = Path(root).expanduser() if root else default_cache_dir()
        self.keep = keep
        self.problems: list[str] = []  # corrupt snapshots met while looking for a good one

    def source_dir(self, source: str) -> Path:
        if not source or "/" in source or source.startswith("."):
            raise ValueError(f"bad source name {source!r}")
        return self.root / source

    def save(self, result: FeedResult, *, now: datetime | None = None) -> StoredSnapshot:
        """Write ``result`` as a new snapshot (atomic rename); returns it."""
        text = result.csv_text()
        digest = hashlib.sha256(text.encode()).hexdigest()
        now = now or datetime.now(timezone.utc)
        meta = {
            "format": FORMAT, "source": result.source, "label": result.label, "fetched_at": result.fetched_at,
            "as_of": result.as_of, "sha256": digest, "rows": len(result.offers), "drops": result.drops,
            "drop_examples": result.drop_examples, "warnings": result.warnings,
            "coverage": {c: (None if r is None else sorted(r)) for c, r in result.coverage.items()},
            "meta": result.meta,
        }
        sdir = self.source_dir(result.source)
        sdir.mkdir(parents=True, exist_ok=True)
        final = sdir / f"{now.astimezone(timezone.utc):%Y%m%dT%H%M%S%fZ}-{digest[:12]}"
        tmp = sdir / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            (tmp / OFFERS).write_text(text, encoding="utf-8")
            (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.prune(result.source)
        return StoredSnapshot(final, meta, text)

    def dirs(self, source: str) -> list[Path]:
        """Snapshot directories of ``source``, newest first."""
        sdir = self.source_dir(source)
        if not sdir.is_dir():
            return []
        return sorted((p for p in sdir.iterdir() if p.is_dir() and not p.name.startswith(".")),
                      key=lambda p: p.name, reverse=True)

    def list(self, source: str | None = None) -> list[StoredSnapshot]:
        """Every readable snapshot (newest first per source), verified."""
        sources = [source] if source else self.sources()
        out = []
        for s in sources:
            for d in self.dirs(s):
                try:
                    out.append(read_snapshot_dir(d))
                except CorruptSnapshot as exc:
                    self.problems.append(exc.message)
        return out

    def sources(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def latest_good(self, source: str) -> StoredSnapshot | None:
        """The newest snapshot of ``source`` that verifies and parses (corrupt ones are skipped)."""
        for d in self.dirs(source):
            try:
                return read_snapshot_dir(d)
            except CorruptSnapshot as exc:
                self.problems.append(exc.message)
        return None

    def prune(self, source: str) -> None:
        for d in self.dirs(source)[self.keep:]:
            shutil.rmtree(d, ignore_errors=True)
