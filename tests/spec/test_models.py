"""Spec validation of purchase terms, the planning horizon and demand profiles."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hetinfra.spec.models import InfrastructureSpec, ServiceSpec

MODEL = {"name": "m", "model": "llama-3.1-8b", "source": "x/y", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
         "demand": {"rate_rps": 1, "sizes": {"classes": [{"name": "c", "input_tokens": 10, "output_tokens": 10,
                                                          "share": 1}]}}}


def _spec(profiles=(None,), **top) -> dict:
    models = []
    for i, prof in enumerate(profiles):
        m = {**MODEL, "name": f"m{i}", "demand": {**MODEL["demand"]}}
        if prof is not None:
            m["demand"]["profile"] = prof
        models.append(m)
    return {"name": "s", "models": models, **top}


def test_default_terms_are_todays_behaviour():
    assert InfrastructureSpec().terms() == ("on_demand",)
    assert InfrastructureSpec(spot=True).terms() == ("on_demand", "spot")
    assert InfrastructureSpec(purchase_terms=["committed_3y", "on_demand"]).terms() == ("on_demand", "committed_3y")
    assert ServiceSpec(**_spec()).planning.horizon_months == 12


@pytest.mark.parametrize("spec, msg", [
    (_spec(infrastructure={"spot": True, "purchase_terms": ["on_demand"]}), "leaves out spot"),
    (_spec(infrastructure={"purchase_terms": ["committed_2y"]}), "committed_2y"),
    (_spec(infrastructure={"purchase_terms": []}), "at least 1"),
    (_spec(profiles=([1, 0.5], [1, 0.5, 0.2])), "lengths differ"),
    (_spec(profiles=([0, 0],)), "at least one > 0"),
    (_spec(profiles=([1, -0.5],)), "greater than or equal to 0"),
    (_spec(profiles=([1.0] * 169,)), "at most 168"),
    (_spec(profiles=([1, 0.5],), planning={"allow_unmet": True}), "allow_unmet"),
    (_spec(planning={"horizon_months": 0}), "horizon_months"),
])
def test_bad_purchase_settings_are_rejected(spec, msg):
    with pytest.raises(ValidationError, match=msg):
        ServiceSpec(**spec)
