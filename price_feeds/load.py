"""``load_offers``: one call that turns a ``--feeds`` value into an OfferSnapshot and warnings.

``feeds`` values:

- ``"snapshot"``: the embedded snapshot (no network, no cache).
- ``"live"`` (or ``"live:aws,skypilot"`` to choose sources; default ``HETINFRA_FEEDS_SOURCES`` or
  aws,azure,gcp): fetch each source concurrently, store every good fetch in the snapshot store,
  and lay the results over the embedded snapshot: a source replaces the embedded offers of the
  (cloud, region)s it covers (AWS: the regions fetched; Azure/GCP/SkyPilot: whole clouds). A source
  that fails (unreachable, HTTP error, timeout, malformed data, not configured) falls back to its
  last good cached snapshot, else to the embedded offers, with a warning saying so; with
  ``strict=True`` it raises :class:`~hetinfra.errors.FeedError` (exit 4) instead.
- ``"cache"`` (or ``"cache:aws,gcp"``): the last good cached snapshot of each source, laid over the
  embedded snapshot the same way; no network.
- a PATH: an offers CSV (bad rows dropped with reasons; ``strict=True``: exit 2 on the first bad
  row), one cached snapshot directory (verified against its hash), or a store root (as ``cache``).

``max_age_h``: with ``live``, a cached snapshot younger than this is used instead of fetching; for
every source actually used, data older than this gives a warning (``strict``: FeedError).
``timeout_s`` is the per-request timeout (connect and each read); each source also has a total
deadline (``FeedConfig.deadline_s``), so nothing waits unboundedly. Rows failing validation are
dropped and reported per source: ``"aws: dropped 3 rows: 2 spot above on-demand, 1 unknown GPU"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from hetinfra.errors import FeedError, HetinfraError, InvalidInputError, closest
from hetinfra.price_feeds.config import ALL_SOURCES, FeedConfig
from hetinfra.price_feeds.offers import (KNOWN_CLOUDS, Offer, OfferSnapshot, SourceInfo, as_of_span,
                                         load_embedded_snapshot, newest_as_of, oldest_as_of)

# The feed machinery (adapters, the urllib client, the snapshot store, threads) is imported by the
# functions that use it: `plan`'s default `--feeds snapshot` needs none of it (23 ms of CPU to import).
if TYPE_CHECKING:
    from hetinfra.price_feeds.base import Coverage, FeedAdapter, FeedResult, Progress
    from hetinfra.price_feeds.store import SnapshotStore, StoredSnapshot

FEEDS_HELP = "snapshot (embedded, default), live[:SOURCES], cache[:SOURCES], or a PATH (offers CSV or snapshot dir)"


def make_adapter(source: str, config: FeedConfig) -> FeedAdapter:
    if source == "aws":
        from hetinfra.price_feeds.aws import AwsBulkAdapter as cls
    elif source == "azure":
        from hetinfra.price_feeds.azure import AzureRetailAdapter as cls
    elif source == "gcp":
        from hetinfra.price_feeds.gcp import GcpCatalogAdapter as cls
    elif source == "skypilot":
        from hetinfra.price_feeds.skypilot import SkyPilotAdapter as cls
    elif source == "embedded":
        from hetinfra.price_feeds.local import EmbeddedAdapter as cls
    else:
        raise InvalidInputError(f"unknown feed source {source!r}", hint="sources: " + ", ".join(ALL_SOURCES))
    return cls(config)


def parse_sources(text: str | Iterable[str] | None, default: Iterable[str]) -> tuple[str, ...]:
    from hetinfra.csvtext import comma_items

    items = comma_items(text, "--feeds") if isinstance(text, str) else list(text or [])
    out = tuple(dict.fromkeys(s.strip().lower() for s in items if s and s.strip())) or tuple(default)
    bad = [s for s in out if s not in ALL_SOURCES]
    if bad:
        close = closest(bad[0], ALL_SOURCES, cutoff=0.6)
        raise InvalidInputError(f"unknown feed source {bad[0]!r}" + (f"; did you mean '{close}'?" if close else ""),
                                hint="sources: " + ", ".join(ALL_SOURCES))
    return out


def _fmt_age(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.0f} days"


def _age_h(as_of: str, now: datetime) -> float | None:
    from hetinfra.price_feeds.base import parse_time

    t = parse_time(as_of)
    return None if t is None else (now - t).total_seconds() / 3600.0


def _check_age(label: str, as_of: str, max_age_h: float | None, strict: bool, warnings: list[str],
               now: datetime) -> None:
    if max_age_h is None:
        return
    age = _age_h(as_of, now)
    if age is None:
        msg = f"{label}: age unknown (as of {as_of!r}); cannot check --max-age-h {max_age_h:g}"
    elif age > max_age_h:
        msg = f"{label} is {_fmt_age(age)} old (as of {as_of}), older than --max-age-h {max_age_h:g}"
    else:
        return
    if strict:
        raise FeedError(msg, hint="refresh with `hetinfra feeds refresh` or use --feeds live")
    warnings.append(msg + "; prices may be stale")


def _covered(o: Offer, parts: list[tuple[OfferSnapshot, Coverage]]) -> bool:
    for _, cov in parts:
        if o.cloud in cov and (cov[o.cloud] is None or o.region in cov[o.cloud]):
            return True
    return False


def overlay(base: OfferSnapshot, parts: list[tuple[OfferSnapshot, Coverage]]) -> OfferSnapshot:
    """``base`` with each part replacing the offers of the (cloud, region)s it covers.

    Parts listed first win for the same (cloud, region, instance type). Sources are recorded in
    order (base first, with the number of its rows still used).
    """
    kept = [o for o in base.offers if not _covered(o, parts)]
    by_key: dict[tuple[str, str, str], Offer] = {}
    for snap, _ in reversed(parts):
        for o in snap.offers:
            by_key[(o.cloud, o.region, o.instance_type)] = o
    for o in kept:
        by_key.setdefault((o.cloud, o.region, o.instance_type), o)
    offers = sorted(by_key.values(), key=lambda o: (o.cloud, o.region, o.gpu, o.gpu_count, o.instance_type))
    sources: list[SourceInfo] = []
    if kept:  # the base's record speaks of the rows still used: their count and their dates
        for s in base.sources:
            dates = [o.as_of for o in kept]
            sources.append(SourceInfo(s.name, oldest_as_of(dates, s.as_of), s.sha256, len(kept),
                                      newest_as_of(dates, s.newest_as_of)))
    for snap, _ in parts:
        sources.extend(snap.sources)
    return OfferSnapshot(tuple(offers), tuple(sources))


@dataclass
class SourceOutcome:
    """What happened to one source in a live load or a refresh."""

    source: str
    ok: bool
    result: FeedResult | None = None
    stored: StoredSnapshot | None = None
    error: HetinfraError | None = None
    from_cache: bool = False
    warnings: list[str] = field(default_factory=list)
    store_error: str | None = None  # why a fetched result could not be stored

    @property
    def rows(self) -> int:
        if self.result is not None:
            return len(self.result.offers)
        return int(self.stored.meta.get("rows", 0)) if self.stored else 0


def _fetch_one(source: str, cfg: FeedConfig, store: SnapshotStore, timeout_s: float,
               progress: Progress | None, save: bool) -> SourceOutcome:
    from hetinfra.price_feeds.http import FetchError

    try:
        adapter = make_adapter(source, cfg)
        result = adapter.fetch(http=cfg.http(timeout_s=timeout_s), progress=progress)
    except HetinfraError as exc:
        return SourceOutcome(source, False, error=exc)
    except Exception as exc:  # noqa: BLE001 - malformed data that slipped past the parsers
        return SourceOutcome(source, False, error=FetchError(
            f"{source}: malformed feed data ({type(exc).__name__}: {exc})"))
    out = SourceOutcome(source, True, result=result)
    if save:
        try:
            out.stored = store.save(result)
        except OSError as exc:
            out.store_error = f"could not write the snapshot store {store.root}: {exc.strerror or exc}"
            out.warnings.append(f"{source}: {out.store_error}")
    return out


def fetch_sources(sources: Iterable[str], *, config: FeedConfig, timeout_s: float, progress: Progress | None = None,
                  store: SnapshotStore | None = None, save: bool = True) -> list[SourceOutcome]:
    """Fetch sources concurrently (each bounded by its own timeouts and deadline), in order."""
    from concurrent.futures import ThreadPoolExecutor

    from hetinfra.price_feeds.store import SnapshotStore

    sources = list(sources)
    store = store or SnapshotStore(config.cache_dir, keep=config.keep_snapshots)
    if not sources:
        return []
    with ThreadPoolExecutor(max_workers=len(sources), thread_name_prefix="hetinfra-feed") as pool:
        futures = [pool.submit(_fetch_one, s, config, store, timeout_s, progress, save) for s in sources]
        return [f.result() for f in futures]


def refresh(sources: Iterable[str] | None = None, *, config: FeedConfig | None = None, timeout_s: float = 20,
            progress: Progress | None = None) -> list[SourceOutcome]:
    """Fetch ``sources`` (default: the configured live sources) into the snapshot store."""
    cfg = config or FeedConfig.from_env()
    return fetch_sources(parse_sources(list(sources or []), cfg.sources), config=cfg, timeout_s=timeout_s,
                         progress=progress)


def _embedded_note(embedded: OfferSnapshot, source: str) -> str:
    """The embedded snapshot as a fallback for ``source`` names it as its header and sources do (its
    as-of span), then the span of the rows that stand in for the source where that differs."""
    clouds = KNOWN_CLOUDS if source == "skypilot" else (source,)
    rows = as_of_span((o.as_of for o in embedded.offers if o.cloud in clouds), embedded.span)
    whole = embedded.span
    return f"the embedded snapshot (as of {whole}" + (f"; its {source} rows {rows})" if rows != whole else ")")


def _describe(exc: HetinfraError) -> str:
    from hetinfra.price_feeds.base import FeedNotConfigured

    return exc.message + (f" ({exc.hint})" if isinstance(exc, FeedNotConfigured) and exc.hint else "")


def _live(sources: tuple[str, ...], *, strict: bool, max_age_h: float | None, timeout_s: float, cfg: FeedConfig,
          progress: Progress | None, now: datetime) -> tuple[OfferSnapshot, list[str]]:
    from hetinfra.price_feeds.store import SnapshotStore

    store = SnapshotStore(cfg.cache_dir, keep=cfg.keep_snapshots)
    embedded = load_embedded_snapshot()
    warnings: list[str] = []
    fresh: dict[str, StoredSnapshot] = {}
    if max_age_h is not None:  # a young enough cached snapshot saves the download
        for s in sources:
            cached = store.latest_good(s)
            age = cached.age_h(now) if cached else None
            if cached is not None and age is not None and age <= max_age_h:
                fresh[s] = cached
    outcomes = {o.source: o for o in fetch_sources([s for s in sources if s not in fresh], config=cfg,
                                                   timeout_s=timeout_s, progress=progress, store=store)}
    parts: list[tuple[OfferSnapshot, Coverage]] = []
    for s in sources:
        if s in fresh:
            parts.append((fresh[s].snapshot(), fresh[s].coverage))
            continue
        out = outcomes[s]
        warnings.extend(out.warnings)
        if out.ok:
            res = out.result
            if res.drop_summary():
                warnings.append(f"{s}: {res.drop_summary()}")
            warnings.extend(res.warnings)
            parts.append((res.snapshot(), res.coverage))
            continue
        if strict:
            raise FeedError(f"live feed {s} failed: {out.error.message}",
                            hint=out.error.hint or "drop --strict-feeds to fall back to the last good snapshot")
        cached = store.latest_good(s)
        if cached is not None:
            age = cached.age_h(now)
            msg = (f"{s}: live fetch failed ({_describe(out.error)}); using the cached snapshot of "
                   f"{cached.fetched_at}" + (f" ({_fmt_age(age)} old)" if age is not None else ""))
            if max_age_h is not None and age is not None and age > max_age_h:
                msg += f", older than --max-age-h {max_age_h:g}"
            warnings.append(msg)
            parts.append((cached.snapshot(), cached.coverage))
        else:
            warnings.append(f"{s}: live fetch failed ({_describe(out.error)}); using {_embedded_note(embedded, s)}")
    warnings.extend(dict.fromkeys(store.problems))
    _warn_embedded_left(embedded, parts, max_age_h, warnings, now)
    return overlay(embedded, parts), warnings


def _warn_embedded_left(embedded: OfferSnapshot, parts: list[tuple[OfferSnapshot, Coverage]],
                        max_age_h: float | None, warnings: list[str], now: datetime) -> None:
    """With --max-age-h, say so when embedded offers older than that are still in the result."""
    if max_age_h is None:
        return
    left = [o for o in embedded.offers if not _covered(o, parts)]
    if left:
        clouds = sorted({o.cloud for o in left})
        _check_age(f"the embedded offers still used for {', '.join(clouds)}", oldest_as_of(o.as_of for o in left),
                   max_age_h, False, warnings, now)


def _cached(store: SnapshotStore, sources: tuple[str, ...], *, strict: bool, max_age_h: float | None,
            now: datetime) -> tuple[OfferSnapshot, list[str]]:
    embedded = load_embedded_snapshot()
    warnings: list[str] = []
    parts = []
    for s in sources:
        cached = store.latest_good(s)
        if cached is None:
            msg = f"{s}: no cached snapshot in {store.root}"
            if strict:
                raise FeedError(msg, hint="run `hetinfra feeds refresh` first")
            warnings.append(msg + f"; using {_embedded_note(embedded, s)}")
            continue
        _check_age(f"{s}: cached snapshot", cached.fetched_at, max_age_h, strict, warnings, now)
        parts.append((cached.snapshot(), cached.coverage))
    warnings.extend(dict.fromkeys(store.problems))
    _warn_embedded_left(embedded, parts, max_age_h, warnings, now)
    return overlay(embedded, parts), warnings


def _from_path(path: Path, *, strict: bool, max_age_h: float | None, cfg: FeedConfig,
               now: datetime) -> tuple[OfferSnapshot, list[str]]:
    from hetinfra.price_feeds.http import FetchError
    from hetinfra.price_feeds.store import CorruptSnapshot, SnapshotStore, is_snapshot_dir, read_snapshot_dir

    warnings: list[str] = []
    if path.is_file():
        if strict:
            from hetinfra.price_feeds.offers import load_offers_file

            snap = load_offers_file(path)
        else:
            from hetinfra.price_feeds.local import OffersCsvAdapter

            try:
                res = OffersCsvAdapter(path, cfg).fetch(now=now)
            except FetchError as exc:  # no valid row at all
                raise InvalidInputError(f"{path}: {exc.message.split(': ', 1)[-1]}",
                                        hint="header must be: cloud,region,instance_type,gpu,gpu_count,"
                                             "gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour") from None
            if res.drop_summary():  # an offers file's rows named by line: the user can mend them
                warnings.append(f"{path}: {res.drop_summary(examples=True)}")
            snap = res.snapshot()
        _check_age(str(path), snap.as_of, max_age_h, strict, warnings, now)
        return snap, warnings
    if path.is_dir() and is_snapshot_dir(path):
        try:
            stored = read_snapshot_dir(path)
        except CorruptSnapshot as exc:
            raise InvalidInputError(exc.message, hint="use another snapshot, or `hetinfra feeds refresh`") from None
        _check_age(f"snapshot {path}", stored.fetched_at, max_age_h, strict, warnings, now)
        return stored.snapshot(), warnings
    if path.is_dir():
        store = SnapshotStore(path)
        found = tuple(s for s in store.sources() if s in ALL_SOURCES and store.dirs(s))
        if not found:
            raise InvalidInputError(f"{path}: neither an offers CSV, a snapshot directory (offers.csv + meta.json) "
                                    "nor a snapshot store", hint="pass a file or a directory written by `hetinfra feeds refresh`")
        return _cached(store, found, strict=strict, max_age_h=max_age_h, now=now)
    what = "is neither a file nor a directory (a device, a FIFO or a socket)" if path.exists() else \
        "no such file or directory"
    raise InvalidInputError(f"--feeds {path}: {what}", hint="use " + FEEDS_HELP)


def load_offers(feeds: str = "snapshot", *, strict: bool = False, max_age_h: float | None = None,
                timeout_s: float = 20, config: FeedConfig | None = None, progress: Progress | None = None,
                now: datetime | None = None) -> tuple[OfferSnapshot, list[str]]:
    """The offers to plan with, and warnings to show (see the module docstring for ``feeds``).

    Raises :class:`~hetinfra.errors.InvalidInputError` (exit 2) for a bad ``feeds`` value or PATH,
    and :class:`~hetinfra.errors.FeedError` (exit 4) only when ``strict`` and a feed failed or is
    older than ``max_age_h``.
    """
    if timeout_s is None or timeout_s <= 0:
        raise InvalidInputError(f"feed timeout must be > 0 seconds, got {timeout_s!r}")
    if max_age_h is not None and max_age_h < 0:
        raise InvalidInputError(f"--max-age-h must be >= 0, got {max_age_h:g}")
    now = now or datetime.now(timezone.utc)
    spec = (feeds or "snapshot").strip()
    kind, _, rest = spec.partition(":")
    if spec in ("snapshot", "embedded"):
        snap = load_embedded_snapshot()
        warnings: list[str] = []
        _check_age("the embedded snapshot", snap.as_of, max_age_h, strict, warnings, now)
        return snap, warnings
    cfg = config or FeedConfig.from_env()
    if kind in ("live", "cache"):
        from hetinfra.csvtext import comma_items

        comma_items(spec, "--feeds")  # live:aws,,gcp: an empty source is exit 2 (it was dropped)
    if kind == "live" and (rest or spec == "live"):
        return _live(parse_sources(rest, cfg.sources), strict=strict, max_age_h=max_age_h, timeout_s=timeout_s,
                     cfg=cfg, progress=progress, now=now)
    if kind == "cache" and (rest or spec == "cache"):
        from hetinfra.price_feeds.store import SnapshotStore

        store = SnapshotStore(cfg.cache_dir, keep=cfg.keep_snapshots)
        return _cached(store, parse_sources(rest, cfg.sources), strict=strict, max_age_h=max_age_h, now=now)
    from hetinfra.envpaths import word_path

    path = word_path("--feeds", spec, "use " + FEEDS_HELP)
    return _from_path(path, strict=strict, max_age_h=max_age_h, cfg=cfg, now=now)
