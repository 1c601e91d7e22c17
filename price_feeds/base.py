"""The one interface every price source implements, and what a fetch returns.

An adapter's :meth:`FeedAdapter.rows` yields candidate :class:`Offer` rows (or :class:`Reject`
markers for rows it could not read); :meth:`FeedAdapter.fetch` runs them through the
:class:`~hetinfra.price_feeds.validate.Validator` (bad rows dropped, counted by reason) and returns
a :class:`FeedResult` whose :meth:`FeedResult.snapshot` is an ordinary
:class:`~hetinfra.price_feeds.offers.OfferSnapshot` with one SourceInfo (name, as_of, sha256, rows).
"""

from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, ClassVar, Iterable

from hetinfra.price_feeds.config import FeedConfig
from hetinfra.price_feeds.families import gpu_memory_gb
from hetinfra.price_feeds.http import FetchError, HttpClient
from hetinfra.price_feeds.offers import Offer, OfferSnapshot, oldest_as_of, offers_to_csv, parse_offers_csv, parse_time
from hetinfra.price_feeds.validate import Reject, Validator

#: progress(source, done, total or None, message)
Progress = Callable[[str, int, "int | None", str], None]

#: cloud -> regions a result is authoritative for (None: every region of that cloud).
Coverage = dict[str, "frozenset[str] | None"]


def iso_utc(dt: datetime | None = None) -> str:
    dt = dt or datetime.now(timezone.utc)
    return dt.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class FeedNotConfigured(FetchError):
    """A source needs something the user has not set up (an API key, a catalog dir)."""


@dataclass
class FetchContext:
    http: HttpClient
    config: FeedConfig
    as_of: str
    label: str
    source: str
    progress: Progress | None = None
    warnings: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def report(self, done: int, total: int | None, message: str) -> None:
        if self.progress is not None:
            self.progress(self.source, done, total, message)

    def offer(self, *, cloud: str, region: str, instance_type: str, gpu: str, gpu_count: int,
              price: float | None, spot: float | None, vcpus: float | None, memory_gb: float | None,
              gpu_mem: float | None = None, as_of: str | None = None) -> Offer:
        return Offer(cloud=cloud, region=region, instance_type=instance_type, gpu=gpu, gpu_count=gpu_count,
                     gpu_memory_gb=gpu_mem if gpu_mem is not None else (gpu_memory_gb(instance_type, gpu) or 0.0),
                     vcpus=vcpus or 0.0, memory_gb=memory_gb or 0.0,
                     price_per_hour=price if price is not None else 0.0, spot_price_per_hour=spot,
                     as_of=as_of or self.as_of, source=self.label)


@dataclass
class FeedResult:
    """Validated offers of one source, with what was dropped and why."""

    source: str  # adapter name: aws, azure, gcp, skypilot, embedded, file
    label: str  # SourceInfo name, also the offers' `source` column
    offers: list[Offer]
    fetched_at: str
    coverage: Coverage
    drops: dict[str, int] = field(default_factory=dict)
    drop_examples: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def as_of(self) -> str:
        return oldest_as_of((o.as_of for o in self.offers), self.fetched_at)

    def csv_text(self) -> str:
        """The offers CSV stored for this result; no as_of column when every row has the
        fetch's own as-of, so that equal prices always hash the same."""
        uniform = all(o.as_of == self.fetched_at for o in self.offers)
        return offers_to_csv(self.offers, with_as_of=not uniform)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.csv_text().encode()).hexdigest()

    def snapshot(self) -> OfferSnapshot:
        return parse_offers_csv(self.csv_text(), name=self.label, default_as_of=self.fetched_at)

    def drop_summary(self, examples: bool = False) -> str | None:
        """What was dropped, by reason; with ``examples``, the first few rows of each reason (an
        offers file's ``file:line``, a feed's cloud/region/instance type)."""
        from hetinfra.price_feeds.validate import drops_summary

        return drops_summary(self.drops, self.drop_examples if examples else None)


class FeedAdapter(abc.ABC):
    """A price source. Subclasses set ``name``/``label``/``clouds`` and implement :meth:`rows`."""

    name: ClassVar[str]
    label: ClassVar[str]
    clouds: ClassVar[tuple[str, ...]]
    live: ClassVar[bool] = True  # fetched over the network (stored in the cache)

    def __init__(self, config: FeedConfig | None = None):
        self.config = config or FeedConfig.from_env()

    @abc.abstractmethod
    def rows(self, ctx: FetchContext) -> Iterable[Offer | Reject]:
        """Candidate rows; may raise :class:`FetchError` for unreachable or malformed feeds."""

    def coverage(self, offers: list[Offer], ctx: FetchContext) -> Coverage:
        return {c: None for c in self.clouds}

    def validator(self) -> Validator:
        return Validator()

    def fetch(self, *, http: HttpClient | None = None, progress: Progress | None = None,
              now: datetime | None = None) -> FeedResult:
        ctx = FetchContext(http=http or self.config.http(), config=self.config, as_of=iso_utc(now),
                           label=self.label, source=self.name, progress=progress)
        v = self.validator()
        for row in self.rows(ctx):
            v.add(row)
        if not v.offers:
            why = f" ({v.summary()})" if v.dropped else ""
            raise FetchError(f"{self.name}: the feed yielded no valid GPU offer{why}",
                             hint="the feed may have changed format; the last good snapshot is used unless strict")
        return FeedResult(source=self.name, label=self.label, offers=v.offers, fetched_at=ctx.as_of,
                          coverage=self.coverage(v.offers, ctx), drops=dict(v.drops),
                          drop_examples={k: list(x) for k, x in v.examples.items()}, warnings=ctx.warnings,
                          meta=ctx.meta)
