"""Committed (1-year / 3-year) prices shipped with hetinfra, laid over the offers a plan uses.

``data/committed_prices.csv`` holds committed-use prices from a public price list (provenance in
``data/SOURCES.md``)::

    cloud,region,instance_type,on_demand_price_per_hour,committed_1y_price_per_hour,committed_3y_price_per_hour,as_of,source

A row applies to the offer of the same cloud, region and instance type only when that offer's
on-demand price is within ``MATCH_TOLERANCE`` of the row's: the two lists then describe the same
price book, so committed / on-demand (the break-even utilisation) is right. An offer that already
carries committed prices (a user's offers CSV) keeps its own. Plans load these prices only when the
spec allows a committed term, so plans without one keep their sources and bytes.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources

from hetinfra.csvtext import csv_records
from hetinfra.price_feeds.offers import OfferSnapshot, SourceInfo, source_info

#: relative difference of on-demand prices under which a committed row matches an offer
MATCH_TOLERANCE = 1e-3
NAME = "embedded-committed-prices"


def load_committed_table() -> tuple[dict[tuple[str, str, str], dict], SourceInfo]:
    """{(cloud, region, instance_type): row} of the shipped committed prices, and their source."""
    text = resources.files("hetinfra.price_feeds").joinpath("data/committed_prices.csv").read_text()
    table = {}
    for _, row in csv_records(text, NAME)[1]:
        table[(row["cloud"], row["region"], row["instance_type"])] = {
            "on_demand": float(row["on_demand_price_per_hour"]),
            "committed_1y_price_per_hour": float(row["committed_1y_price_per_hour"]) or None,
            "committed_3y_price_per_hour": float(row["committed_3y_price_per_hour"]) or None,
            "as_of": row["as_of"],
        }
    return table, source_info(NAME, (r["as_of"] for r in table.values()), text, len(table))


def with_committed_prices(snapshot: OfferSnapshot) -> OfferSnapshot:
    """``snapshot`` with the shipped committed prices on the offers they match (see the module
    docstring), and their source appended when any matched."""
    table, info = load_committed_table()
    offers, used = [], 0
    for o in snapshot.offers:
        row = table.get((o.cloud, o.region, o.instance_type))
        mine = o.committed_1y_price_per_hour is not None or o.committed_3y_price_per_hour is not None
        if row is None or mine or abs(o.price_per_hour - row["on_demand"]) > MATCH_TOLERANCE * row["on_demand"]:
            offers.append(o)
            continue
        used += 1
        offers.append(replace(o, committed_1y_price_per_hour=row["committed_1y_price_per_hour"],
                              committed_3y_price_per_hour=row["committed_3y_price_per_hour"]))
    if not used:
        return snapshot
    return OfferSnapshot(tuple(offers), snapshot.sources + (replace(info, rows=used),))
