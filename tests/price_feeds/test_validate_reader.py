"""A feed row the Validator keeps is one the offers CSV reader reads back: the snapshot a feed stores
(and the offers `--feeds live` plans) never holds a row `parse_offers_csv` refuses. A catalog's
instance type 'g5$(id)' or a vCPU count of 1e300 was kept, then the whole snapshot was refused
(exit 2 blaming 'skypilot-catalog:3', or skipped as corrupt at every later read)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.offers import Offer, offers_to_csv, parse_offers_csv
from hetinfra.price_feeds.validate import Validator

names = st.sampled_from(["aws", "us-east-1", "g6.xlarge", "L4", "p5.48xlarge", "H100"]) | st.text(max_size=10)
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10, 10**6) | st.sampled_from([1, 8, 0.5, 24.0])
maybe = st.none() | numbers


@settings(max_examples=150, deadline=None)
@given(cloud=names, region=names, itype=names, gpu=names, count=st.integers(-2, 100), mem=numbers, vcpus=numbers,
       ram=numbers, price=numbers, spot=maybe, c1=maybe,
       source=st.sampled_from(["feed", "skypilot-catalog-v8/aws@e385a0d3"]) | st.text(max_size=8))
def test_a_kept_feed_row_reads_back(cloud, region, itype, gpu, count, mem, vcpus, ram, price, spot, c1, source):
    offer = Offer(cloud=cloud, region=region, instance_type=itype, gpu=gpu, gpu_count=count, gpu_memory_gb=mem,
                  vcpus=vcpus, memory_gb=ram, price_per_hour=price, spot_price_per_hour=spot,
                  as_of="2026-01-01", source=source, committed_1y_price_per_hour=c1)
    v = Validator(gpus=None, check_families=False)
    if v.check(offer) is not None:
        return
    try:
        back = parse_offers_csv(offers_to_csv([offer]), name="feed")
    except InvalidInputError as exc:
        raise AssertionError(f"kept {offer}, which the reader refuses: {exc.message}") from None
    assert len(back.offers) == 1 and (back.offers[0].source == source.strip() or not source.strip())
    assert back.offers[0].source.isprintable()  # `hetinfra prices` shows it: no newline, no escape sequence


@given(bad=st.sampled_from(["\n", "\r", "\x1b[31m", "\x00", "\u2028", "\t"]), at=st.integers(0, 6))
def test_an_offers_csv_source_cell_is_one_line_of_text(bad, at):
    """`hetinfra prices` prints the source column: a quoted cell holding a newline split its table and
    an escape sequence reached the terminal; the reader refuses it at its line."""
    import csv
    import io

    source = ("my-feed"[:at] + bad + "my-feed"[at:])
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["cloud", "region", "instance_type", "gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb",
                "price_per_hour", "spot_price_per_hour", "as_of", "source"])
    w.writerow(["lab", "r1", "box", "L4", 1, 24, 4, 16, 1.0, "", "2026-01-01", source])
    try:
        parse_offers_csv(out.getvalue(), name="o.csv")
    except InvalidInputError as exc:
        assert exc.message.startswith("o.csv:2: column 'source'")
        return
    assert source.strip().isprintable()  # only where the reader's strip() took the bad character away
