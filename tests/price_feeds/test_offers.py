"""The embedded snapshot and offers CSV parsing."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.offers import load_embedded_snapshot, parse_offers_csv


def test_embedded_snapshot_is_valid_and_broad():
    snap = load_embedded_snapshot()
    assert len(snap.offers) > 150
    regions = defaultdict(set)
    for o in snap.offers:
        regions[o.cloud].add(o.region)
        assert o.price_per_hour > 0
        assert o.spot_price_per_hour is None or o.spot_price_per_hour <= o.price_per_hour
    assert all(len(regions[c]) >= 3 for c in ("aws", "gcp", "azure"))
    gpus = {o.gpu for o in snap.offers}
    assert {"T4", "L4", "A10G", "L40S", "A100", "A100-80GB", "H100", "H200"} <= gpus
    assert snap.as_of != "unknown" and len(snap.sources[0].sha256) == 64


def test_snapshot_known_prices():
    by = {(o.cloud, o.region, o.instance_type): o for o in load_embedded_snapshot().offers}
    g2 = by[("gcp", "us-central1", "g2-standard-4")]
    assert (g2.gpu, g2.gpu_count) == ("L4", 1)
    assert abs(g2.price_per_hour - 0.70683) < 1e-4  # host 0.14679 + L4 0.56004
    p5 = by[("aws", "us-east-1", "p5.48xlarge")]
    assert (p5.gpu, p5.gpu_count, p5.price_per_hour) == ("H100", 8, 55.04)


def test_user_offers_override_same_key():
    base = load_embedded_snapshot()
    extra = parse_offers_csv(
        "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"
        "aws,us-east-1,p5.48xlarge,H100,8,80,192,2048,40.0,\n"
        "lab,rack-1,box,L4,4,24,32,128,1.5,\n", name="mine.csv")
    merged = base.merged(extra)
    by = {(o.cloud, o.region, o.instance_type): o for o in merged.offers}
    assert by[("aws", "us-east-1", "p5.48xlarge")].price_per_hour == 40.0
    assert by[("lab", "rack-1", "box")].custom_cloud
    assert [s.name for s in merged.sources] == ["embedded-snapshot", "mine.csv"]


HEADER = "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour,as_of,source"


def _one_row(as_of: str) -> str:
    return f"{HEADER}\naws,us-east-1,x.big,L4,1,24,8,32,1.5,,{as_of},me\n"


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.dates().map(str), st.datetimes(timezones=st.just(timezone.utc)).map(lambda d: d.isoformat()),
                 st.sampled_from(["", "unknown", "2025-11-01T12:00:00Z"])))
def test_an_iso_as_of_or_none_is_read(as_of):
    snap = parse_offers_csv(_one_row(as_of), name="o.csv")
    assert snap.offers[0].as_of == (as_of or "unknown")


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.text(alphabet="0123456789-:TZ /.", min_size=1, max_size=20),
                 st.sampled_from(["2025-13-45", "yesterday", "01/11/2025", "2025-02-30"])))
def test_an_as_of_that_is_no_date_is_refused_at_its_line(as_of):
    """The snapshot's as-of is its oldest row's, found by sorting the cells, and replan ages it: a cell
    that is no date would be sorted as text and read as no age."""
    as_of = as_of.strip()
    if not as_of or as_of == "unknown" or "," in as_of:
        return
    try:
        datetime.fromisoformat(as_of.replace("Z", "+00:00"))
        return  # an ISO date after all
    except ValueError:
        pass
    with pytest.raises(InvalidInputError, match=r"^o\.csv:2: column 'as_of' is .*: not a date or time"):
        parse_offers_csv(_one_row(as_of), name="o.csv")


def _utc(cell: str) -> datetime:
    t = datetime.fromisoformat(cell.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)  # a date: midnight UTC


@settings(max_examples=60, deadline=None)
@given(st.lists(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1),
                             timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-9)),
                                                        timezone(timedelta(hours=5, minutes=30))])),
                min_size=1, max_size=6),
       st.lists(st.sampled_from(["iso", "basic", "date", "z"]), min_size=6, max_size=6), st.booleans())
def test_the_oldest_as_of_is_the_oldest_time_however_it_is_spelled(times, spellings, unknown):
    """A snapshot's as-of (plan.json offers_as_of, the age --max-age-h checks) is its oldest row's by
    time: ISO spellings the offers CSV accepts sort apart as text (20250101 after 2025-06-01, a -09:00
    offset), and 'unknown' rows are no time."""
    def spell(t, how):
        utc = t.astimezone(timezone.utc)
        return {"iso": t.isoformat(), "basic": utc.strftime("%Y%m%d"), "date": utc.date().isoformat(),
                "z": utc.isoformat().replace("+00:00", "Z")}[how]

    cells = [spell(t, how) for t, how in zip(times, spellings)] + (["unknown"] if unknown else [])
    text = HEADER + "\n" + "".join(f"aws,us-east-1,x{i}.big,L4,1,24,8,32,1.5,,{c},me\n" for i, c in enumerate(cells))
    snap = parse_offers_csv(text, name="o.csv")
    assert _utc(snap.as_of) == min(_utc(c) for c in cells if c != "unknown")
    assert snap.sources[0].as_of == snap.as_of
