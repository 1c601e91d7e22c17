"""Committed (1-/3-year) prices: the offers CSV columns and the shipped GCP L4 prices."""

from __future__ import annotations

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.committed import load_committed_table, with_committed_prices
from hetinfra.price_feeds.offers import OfferSnapshot, load_embedded_snapshot, offers_to_csv, parse_offers_csv

HEAD = ("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour,"
        "committed_1y_price_per_hour,committed_3y_price_per_hour\n")


def test_offers_csv_carries_committed_prices_and_round_trips():
    snap = parse_offers_csv(HEAD + "lab,r1,box,L4,1,24,8,32,1.0,,0.6,0.4\nlab,r1,other,L4,1,24,8,32,2.0,,,\n",
                            name="mine.csv")
    by = {o.instance_type: o for o in snap.offers}
    assert by["box"].purchase_price("committed_1y") == 0.6 and by["box"].purchase_price("committed_3y") == 0.4
    assert by["other"].purchase_price("committed_1y") is None and by["other"].purchase_price("on_demand") == 2.0
    text = offers_to_csv(snap.offers)
    assert text.splitlines()[0].endswith("committed_1y_price_per_hour,committed_3y_price_per_hour")
    assert parse_offers_csv(text, name="again.csv").offers == snap.offers
    # without committed prices the CSV keeps its published columns
    plain = parse_offers_csv(HEAD + "lab,r1,other,L4,1,24,8,32,2.0,,,\n", name="plain.csv")
    assert "committed" not in offers_to_csv(plain.offers)


@pytest.mark.parametrize("row, what", [("1.0,,1.2,", "committed_1y_price_per_hour 1.2"),
                                       ("1.0,,,-0.1", "committed_3y_price_per_hour -0.1"),
                                       ("1.0,,cheap,", "'committed_1y_price_per_hour' is 'cheap'")])
def test_bad_committed_price_names_file_and_line(row, what):
    with pytest.raises(InvalidInputError, match=f"mine.csv:2: .*{what}"):
        parse_offers_csv(HEAD + f"lab,r1,box,L4,1,24,8,32,{row}\n", name="mine.csv")


def test_shipped_committed_prices_match_the_snapshot_offers():
    table, info = load_committed_table()
    snap = load_embedded_snapshot()
    assert "committed" not in offers_to_csv(snap.offers)  # the snapshot itself has none
    out = with_committed_prices(snap)
    assert out.sources[-1].name == "embedded-committed-prices" and out.sources[-1].rows == len(table) == 32
    by = {(o.cloud, o.region, o.instance_type): o for o in out.offers}
    g2 = by[("gcp", "us-central1", "g2-standard-4")]
    # Cyclenerd pricing.yml: month_1y 325.07215214, month_3y 232.19438719 (730 hours a month)
    assert g2.committed_1y_price_per_hour == pytest.approx(325.07215214 / 730, abs=1e-6)
    assert g2.committed_3y_price_per_hour == pytest.approx(232.19438719 / 730, abs=1e-6)
    for key in table:
        o = by[key]
        assert o.gpu == "L4" and 0 < o.committed_3y_price_per_hour < o.committed_1y_price_per_hour < o.price_per_hour
    assert by[("aws", "us-east-1", "g6.xlarge")].committed_1y_price_per_hour is None  # no AWS source: no option


def test_committed_prices_need_the_same_on_demand_price_and_never_replace_the_users():
    snap = load_embedded_snapshot()
    g2 = next(o for o in snap.offers if (o.region, o.instance_type) == ("us-central1", "g2-standard-4"))
    moved = OfferSnapshot(tuple(o if o is not g2 else o.__class__(**{**o.__dict__, "price_per_hour": 0.8})
                                for o in snap.offers), snap.sources)
    out = {(o.region, o.instance_type): o for o in with_committed_prices(moved).offers}
    assert out[("us-central1", "g2-standard-4")].committed_1y_price_per_hour is None  # another price book
    assert out[("us-east1", "g2-standard-4")].committed_1y_price_per_hour is not None
    mine = parse_offers_csv(HEAD + "gcp,us-central1,g2-standard-4,L4,1,24,4,16,0.70683,,0.5,\n", name="mine.csv")
    out = {(o.region, o.instance_type): o for o in with_committed_prices(snap.merged(mine)).offers}
    assert out[("us-central1", "g2-standard-4")].committed_1y_price_per_hour == 0.5
    assert out[("us-central1", "g2-standard-4")].committed_3y_price_per_hour is None
