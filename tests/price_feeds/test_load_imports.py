"""``load_offers("snapshot")``, what every default ``hetinfra plan`` calls, loads none of the feed
machinery (urllib's client, threads, the adapters and the snapshot store): they cost 23 ms of CPU to
import and are only needed for live, cached or file feeds."""

from __future__ import annotations

import subprocess
import sys

NETWORK = ("http.client", "urllib.request", "concurrent.futures", "hetinfra.price_feeds.base",
           "hetinfra.price_feeds.http", "hetinfra.price_feeds.store")


def test_the_embedded_snapshot_loads_without_the_feed_machinery():
    code = ("import sys; from hetinfra.price_feeds.load import load_offers; "
            "snap, _ = load_offers('snapshot', max_age_h=None); assert snap.offers; "
            f"print(','.join(m for m in {NETWORK!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_an_age_check_still_reads_the_snapshot_time():
    from hetinfra.price_feeds.load import load_offers

    _, warnings = load_offers("snapshot", max_age_h=0)
    assert any("the embedded snapshot" in w and "older than --max-age-h 0" in w for w in warnings)
