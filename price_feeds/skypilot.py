"""SkyPilot catalog feed: ``<catalog>/<cloud>/vms.csv`` (schema v8) from a directory or a URL.

The catalog is ``~/.sky/catalogs/v8`` (``$SKY_RUNTIME_DIR/.sky/...`` when set) or
``HETINFRA_SKYPILOT_CATALOG`` (a directory, or an http(s) base URL such as the skypilot-catalog
repository's raw ``catalogs/v8``). Parsing is :mod:`hetinfra.price_feeds.skypilot_catalog`, shared
with ``tools/build_snapshot.py``: GCP machine types are host row + GPU row of the same zone
(us-central1 g2-standard-4 = 0.14679 + 0.56004 = 0.70683), AWS/Azure one price per region.
On-demand must agree across the zones of a region (else the row is dropped); spot is the minimum
over zones. Unlike the embedded snapshot's builder, no hand-curated exclusions are applied here:
only the generic validation (unknown GPU, spot above on-demand, GPU count vs family, ...).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from hetinfra.price_feeds import skypilot_catalog as sp
from hetinfra.price_feeds.base import FeedAdapter, FeedNotConfigured, FetchContext, iso_utc
from hetinfra.price_feeds.http import FetchError, redact
from hetinfra.price_feeds.offers import KNOWN_CLOUDS
from hetinfra.price_feeds.validate import ZONE_PRICES_DIFFER, Reject

NO_ON_DEMAND = "no on-demand price"


def catalog_offers(texts: dict[str, str], ctx: FetchContext, as_of: dict[str, str] | None = None):
    """Offers/Rejects from ``{cloud: vms.csv text}`` (the shared reducers, then feed policy)."""
    for cloud in KNOWN_CLOUDS:
        if cloud not in texts:
            continue
        try:
            rows = sp.parse_text(texts[cloud])
            reduced = list(sp.REDUCERS[cloud](rows))
        except (KeyError, ValueError, TypeError) as exc:
            raise FetchError(f"skypilot: {cloud}/vms.csv is not a v8 catalog ({type(exc).__name__}: {exc})") from None
        for c in reduced:
            if not c.gpu or c.gpu_count is None:
                continue  # CPU types, fractional GPUs, GCP GPU-only rows
            where = f"{cloud}/{c.region}/{c.instance_type}"
            if not c.prices:
                yield Reject(NO_ON_DEMAND, where)
                continue
            if max(c.prices) - min(c.prices) > 1e-4:
                yield Reject(ZONE_PRICES_DIFFER, where)
                continue
            yield ctx.offer(cloud=cloud, region=c.region, instance_type=c.instance_type, gpu=c.gpu,
                            gpu_count=c.gpu_count, price=max(c.prices), spot=min(c.spots) if c.spots else None,
                            vcpus=c.vcpus, memory_gb=c.memory_gb, as_of=(as_of or {}).get(cloud))


class SkyPilotAdapter(FeedAdapter):
    name = "skypilot"
    label = "skypilot-catalog"
    clouds = KNOWN_CLOUDS

    def _read(self, ctx: FetchContext) -> tuple[dict[str, str], dict[str, str]]:
        where = self.config.skypilot_catalog
        texts, as_of = {}, {}
        if where.startswith(("http://", "https://")):
            ctx.meta["url"] = redact(where)
            for i, cloud in enumerate(KNOWN_CLOUDS):
                ctx.report(i, len(KNOWN_CLOUDS), f"{cloud}/vms.csv")
                try:
                    texts[cloud] = ctx.http.get_bytes(f"{where.rstrip('/')}/{cloud}/vms.csv").decode("utf-8")
                except UnicodeDecodeError:
                    raise FetchError(f"skypilot: {cloud}/vms.csv is not UTF-8 text") from None
                except FetchError as exc:
                    if exc.status != 404:
                        raise
                    ctx.warnings.append(f"skypilot: the catalog has no {cloud}/vms.csv (HTTP 404)")
            if not texts:
                raise FetchError(f"skypilot: no <cloud>/vms.csv under {redact(where)}")
            return texts, as_of
        root = Path(where).expanduser()
        ctx.meta["dir"] = str(root)
        for cloud in KNOWN_CLOUDS:
            p = root / cloud / "vms.csv"
            if p.is_file():
                texts[cloud] = p.read_text(encoding="utf-8")
                as_of[cloud] = iso_utc(datetime.fromtimestamp(os.stat(p).st_mtime, timezone.utc))
        if not texts:
            raise FeedNotConfigured(f"skypilot: no catalog at {root} (expected <cloud>/vms.csv)",
                                    hint="run `sky check` once, or set HETINFRA_SKYPILOT_CATALOG to a v8 catalog dir or URL")
        return texts, as_of

    def rows(self, ctx: FetchContext):
        texts, as_of = self._read(ctx)
        ctx.meta["clouds"] = sorted(texts)
        self._clouds = tuple(sorted(texts))
        return catalog_offers(texts, ctx, as_of)

    def coverage(self, offers, ctx):
        return {c: None for c in getattr(self, "_clouds", self.clouds)}
