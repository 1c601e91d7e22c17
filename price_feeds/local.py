"""Local sources behind the same interface: the embedded snapshot and user offers CSVs."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from hetinfra.fileio import read_text
from hetinfra.price_feeds.base import FeedAdapter, FeedResult, FetchContext, iso_utc
from hetinfra.price_feeds.offers import KNOWN_CLOUDS, load_embedded_snapshot
from hetinfra.price_feeds.validate import Reject, Validator, parse_offers_lenient


class EmbeddedAdapter(FeedAdapter):
    """The snapshot shipped in the package (no network); already validated when built."""

    name = "embedded"
    label = "embedded-snapshot"
    clouds = KNOWN_CLOUDS
    live = False

    def rows(self, ctx: FetchContext):
        return load_embedded_snapshot().offers


class OffersCsvAdapter(FeedAdapter):
    """A user offers CSV used as a feed: bad rows are dropped with reasons (not exit 2).

    (Offers CSVs listed in a spec's ``offers:`` stay strict; see offers.parse_offers_csv.)
    """

    name = "file"
    clouds = ()
    live = False

    def __init__(self, path: Path | str, config=None):
        super().__init__(config)
        self.path = Path(path)

    @property
    def label(self) -> str:  # type: ignore[override]
        return str(self.path)

    def validator(self) -> Validator:
        return Validator(gpus=set())  # custom clouds may name GPUs hetinfra does not know

    def _text(self) -> str:
        return read_text(self.path, "offers file")  # as a spec's offers: are read (a BOM, a size bound)

    def mtime(self) -> str:
        return iso_utc(datetime.fromtimestamp(os.stat(self.path).st_mtime, timezone.utc))

    def rows(self, ctx: FetchContext):
        v = parse_offers_lenient(self._text(), name=str(self.path), default_as_of=self.mtime(),
                                 validator=Validator(gpus=set()))
        for reason, n in v.drops.items():
            examples = v.examples.get(reason, [])
            for i in range(n):
                yield Reject(reason, examples[i] if i < len(examples) else "")
        yield from v.offers

    def coverage(self, offers, ctx):
        return {c: None for c in sorted({o.cloud for o in offers})}

    def fetch(self, **kw) -> FeedResult:
        res = super().fetch(**kw)
        res.fetched_at = self.mtime()
        return res
