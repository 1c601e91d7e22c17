"""demand.origins (issue 25): the published shape {region: share} and the entry with residency
read the same way, whatever mix of them a spec has; bad entries are 1-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.price_feeds.network import locations
from hetinfra.spec.models import DemandSpec
from hetinfra.spec.origins import OriginSpec, origin_residency, origin_shares

SIZES = {"classes": [{"name": "c", "input_tokens": 10, "output_tokens": 10, "share": 1}]}
REGIONS = sorted(locations())
entry = st.one_of(st.floats(0, 10, allow_nan=False),
                  st.builds(lambda s, r: {"share": s, "residency": r}, st.floats(0, 10, allow_nan=False),
                            st.sampled_from(["region", "continent", "none"])))


@given(st.dictionaries(st.sampled_from(REGIONS), entry, min_size=1, max_size=5))
def test_both_shapes_read_alike(raw):
    total = sum(v["share"] if isinstance(v, dict) else v for v in raw.values())
    if total <= 0:
        with pytest.raises(ValidationError):
            DemandSpec(rate_rps=1, sizes=SIZES, origins=raw)
        return
    d = DemandSpec(rate_rps=1, sizes=SIZES, origins=raw)
    assert origin_shares(d.origins) == {r: float(v["share"] if isinstance(v, dict) else v) for r, v in raw.items()}
    assert origin_residency(d.origins) == {r: v["residency"] if isinstance(v, dict) else "none" for r, v in raw.items()}
    # the round trip through JSON (what replan re-validates) keeps every rule
    again = DemandSpec.model_validate(d.model_dump())
    assert origin_residency(again.origins) == origin_residency(d.origins)


def test_unknown_residency_and_negative_share_are_refused():
    with pytest.raises(ValidationError, match="residency"):
        DemandSpec(rate_rps=1, sizes=SIZES, origins={"eu-west-1": {"share": 1, "residency": "country"}})
    with pytest.raises(ValidationError, match="share"):
        OriginSpec(share=-1)
    with pytest.raises(ValidationError):
        DemandSpec(rate_rps=1, sizes=SIZES, origins={"eu-west-1": {"share": 1, "residencey": "region"}})
