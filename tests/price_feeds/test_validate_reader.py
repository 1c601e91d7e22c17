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


@settings(max_examples=400, deadline=None)
@given(cloud=names, region=names, itype=names, gpu=names, count=st.integers(-2, 100), mem=numbers, vcpus=numbers,
       ram=numbers, price=numbers, spot=maybe, c1=maybe)
def test_a_kept_feed_row_reads_back(cloud, region, itype, gpu, count, mem, vcpus, ram, price, spot, c1):
    offer = Offer(cloud=cloud, region=region, instance_type=itype, gpu=gpu, gpu_count=count, gpu_memory_gb=mem,
                  vcpus=vcpus, memory_gb=ram, price_per_hour=price, spot_price_per_hour=spot,
                  as_of="2026-01-01", source="feed", committed_1y_price_per_hour=c1)
    v = Validator(gpus=None, check_families=False)
    if v.check(offer) is not None:
        return
    try:
        back = parse_offers_csv(offers_to_csv([offer]), name="feed")
    except InvalidInputError as exc:
        raise AssertionError(f"kept {offer}, which the reader refuses: {exc.message}") from None
    assert len(back.offers) == 1
