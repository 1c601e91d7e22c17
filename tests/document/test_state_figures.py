"""state.json's unit figures are checked where it is read (hetinfra.document.state.State, through
parse_state): a running unit's $/h is its price x instances (hetinfra.document.consistency.
unit_figure_problems, as in plan.json), every price per instance, node or stage is at most an offer's
bound (hetinfra.document.base.Price), and a live read's $/h is bounded. A cost edited to $0.01/h was
what `status` printed as the fleet's; a price of 1e300 was read as given."""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.document.state import parse_state
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import EXAMPLES, filled_golden

PLANS = {name: filled_golden(name) for name in EXAMPLES}


def _state(plan: dict) -> dict:
    allocs = [dict(a, path="pulumi") for a in plan["allocations"]]
    return {"state_version": 1, "service": plan["service"], "allocations": allocs,
            "endpoints": {a["deployment_unit"]: ["http://127.0.0.1:9/v1"] for a in allocs}}


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_state_json_apply_writes_is_read(name):
    parse_state(_state(PLANS[name]), "state.json")


FIELDS = ("cost_usd_per_hour", "price_per_instance_usd_per_hour")
#: what a hand edit writes: a figure scaled (off by 2% or more), or a value no offer has
values = st.one_of(st.floats(0.02, 0.98).map(lambda f: ("scale", 1 - f)), st.floats(1.02, 1e6).map(lambda f: ("scale", f)),
                   st.sampled_from([("set", 1e300), ("set", 1e6), ("set", math.nan), ("set", math.inf),
                                    ("set", -1.0), ("set", 0.0001)]))


@settings(max_examples=60)
@given(name=st.sampled_from(EXAMPLES), field=st.sampled_from(FIELDS), data=st.data(), value=values)
def test_a_unit_figure_that_does_not_add_up_is_refused_naming_it(name, field, data, value):
    doc = _state(copy.deepcopy(PLANS[name]))
    i = data.draw(st.integers(0, len(doc["allocations"]) - 1), label="allocation")
    unit = doc["allocations"][i]
    how, v = value
    old = float(unit[field])
    new = old * v if how == "scale" else v
    if old == 0 or abs(new - old) <= 1e-3 * max(old, 1):
        return  # a free unit (a custom offer at $0) scales to itself
    unit[field] = new
    with pytest.raises(InvalidInputError) as err:
        parse_state(doc, "S/state.json")
    msg = err.value.message
    assert msg.startswith("S/state.json: ") and f"allocations[{i}]." in msg and err.value.exit_code == 2, msg


@given(cost=st.sampled_from([1e300, 1e12, -1.0, math.nan, math.inf]))
def test_a_live_cost_out_of_bounds_is_refused(cost):
    doc = _state(copy.deepcopy(PLANS["chat"]))
    doc["live"] = {"cost_usd_per_hour": cost}
    with pytest.raises(InvalidInputError) as err:
        parse_state(doc, "S/state.json")
    assert "live.cost_usd_per_hour" in err.value.message
