"""A snapshot's meta.json, edited by hand or by another program, is either read whole or the snapshot
is skipped as corrupt: never a traceback in `plan --feeds cache` or `feeds list`."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.price_feeds.base import FeedResult
from hetinfra.price_feeds.offers import Offer
from hetinfra.price_feeds.store import SnapshotStore

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=timezone.utc)
#: every key of meta.json a reader of the store takes
READ_KEYS = ("source", "label", "fetched_at", "as_of", "sha256", "coverage", "rows", "drops")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


def _saved(tmp_path):
    offer = Offer("aws", "us-east-1", "g6.xlarge", "L4", 1, 24, 4, 16, 0.8, 0.4, "2026-01-05T12:00:00Z", "aws")
    result = FeedResult(source="aws", label="aws-pricelist", offers=[offer], fetched_at="2026-01-05T12:00:00Z",
                        coverage={"aws": frozenset({"us-east-1"})})
    store = SnapshotStore(tmp_path)
    return store, store.save(result, now=T0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(READ_KEYS), value=json_values)
def test_an_edited_meta_is_read_whole_or_skipped(tmp_path_factory, key, value):
    store, saved = _saved(tmp_path_factory.mktemp("store"))
    meta_path = saved.path / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[key] = value
    meta_path.write_text(json.dumps(meta))
    got = store.latest_good("aws")
    if got is None:  # skipped, with the reason
        assert store.problems and store.problems[0].startswith(f"snapshot {saved.path}")
        return
    # every accessor a command uses works on what was accepted
    assert isinstance(got.label, str) and got.label.isprintable()
    assert isinstance(got.fetched_at, str) and got.age_h(T0) is not None
    for cloud, regions in got.coverage.items():
        assert isinstance(cloud, str) and (regions is None or all(isinstance(r, str) for r in regions))
    assert [s.name for s in got.snapshot().sources] == [got.label]
    assert isinstance(got.sha256, str)


def test_a_coverage_that_is_a_list_is_skipped_naming_the_field(tmp_path):
    store, saved = _saved(tmp_path)
    meta = json.loads((saved.path / "meta.json").read_text())
    (saved.path / "meta.json").write_text(json.dumps({**meta, "coverage": [1]}))
    assert store.latest_good("aws") is None
    assert "meta.json coverage is [1]" in store.problems[0]
