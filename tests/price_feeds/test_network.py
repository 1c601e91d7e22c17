"""The network table (price_feeds/network.py): every region of the embedded snapshot has a place,
and the estimated round trips behave like distances."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.price_feeds.geo import continent
from hetinfra.price_feeds.network import (FIBRE_KM_PER_MS, ROUTE_INFLATION, continent_of, great_circle_km, locate,
                                          locations, round_trip_ms)
from hetinfra.price_feeds.offers import load_embedded_snapshot

REGIONS = sorted(locations())


def _where(region: str) -> tuple[float, float]:
    loc = locate(region)
    return loc.latitude, loc.longitude


def test_every_snapshot_region_has_a_place_on_its_continent():
    snap = load_embedded_snapshot()
    for cloud, region in sorted({(o.cloud, o.region) for o in snap.offers}):
        loc = locate(region)
        assert loc is not None and loc.cloud == cloud, region
        assert continent_of(region) == continent(cloud, region)


def test_transatlantic_round_trip_is_great_circle_at_fibre_speed():
    km = great_circle_km(locate("us-east-1"), locate("eu-west-1"))
    assert 5300 < km < 5600  # Ashburn - Dublin
    assert round_trip_ms("us-east-1", "eu-west-1") == pytest.approx(2 * km * ROUTE_INFLATION / FIBRE_KM_PER_MS, abs=0.1)


def test_unknown_place_has_no_figure():
    assert round_trip_ms("us-east-1", "onprem-rack-7") is None
    assert round_trip_ms("onprem-rack-7", "onprem-rack-7") == 0.0


@given(st.sampled_from(REGIONS), st.sampled_from(REGIONS), st.sampled_from(REGIONS))
def test_round_trips_are_a_metric(a, b, c):
    ab, ba, bc, ac = round_trip_ms(a, b), round_trip_ms(b, a), round_trip_ms(b, c), round_trip_ms(a, c)
    assert ab == ba and ab >= 0 and (ab == 0) == (a == b or _where(a) == _where(b))
    assert ac <= ab + bc + 0.2  # each figure is rounded up to 0.1 ms
