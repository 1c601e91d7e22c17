"""A price's as-of is not in the future (price_feeds.offers.as_of_problem, at an offers file's rows and a
stored snapshot's fetched_at): more than a day (hetinfra.facts.CLOCK_AHEAD_S) after now is refused. A row
as of 9999-12-31 was younger than any --max-age-h (its age negative): stale prices passed as fresh."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.offers import load_offers_file
from hetinfra.price_feeds.store import meta_problem

HEADER = "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour,as_of\n"
ROW = "neocloud,dc-1,t1-x1,T1,1,48,16,128,0.9,,{}\n"
ahead = st.one_of(st.integers(86_400 + 60, 10**10).map(lambda s: timedelta(seconds=s)), st.just(None))
spell = st.sampled_from(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S+00:00"])


def _stamp(delta, fmt: str) -> str:
    if delta is None:
        return "9999-12-31"
    when = datetime.now(timezone.utc) + delta
    if fmt == "%Y-%m-%d":
        when += timedelta(days=1)  # a date is its day's start
    return when.strftime(fmt) if when.year < 10_000 else "9999-12-31"


@given(delta=ahead, fmt=spell)
def test_a_price_as_of_the_future_is_refused(tmp_path_factory, delta, fmt):
    stamp = _stamp(delta, fmt)
    path = tmp_path_factory.mktemp("o") / "offers.csv"
    path.write_text(HEADER + ROW.format("") + ROW.format(stamp).replace("t1-x1", "t1-x2"))
    with pytest.raises(InvalidInputError) as err:
        load_offers_file(path)
    assert err.value.message.startswith(f"{path}:3: column 'as_of'") and "after now" in err.value.message
    meta = {"source": "aws", "fetched_at": stamp, "sha256": "0" * 64}
    assert "after now" in (meta_problem(meta) or "")


@given(days=st.integers(0, 3650), fmt=spell)
def test_a_price_as_of_the_past_or_now_is_read(tmp_path_factory, days, fmt):
    stamp = (datetime.now(timezone.utc) - timedelta(days=days)).strftime(fmt)
    path = tmp_path_factory.mktemp("o") / "offers.csv"
    path.write_text(HEADER + ROW.format(stamp))
    assert load_offers_file(path).offers[0].as_of == stamp
