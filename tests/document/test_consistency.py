"""hetinfra.document.consistency.figure_problems: plan.json's figures add up, as every command reads a plan. A
unit's $/h is its price x instances (a top-up's: x its instances averaged over its periods), a model's and the
plan's are the sums of their units', and a class's rate is its share of its model's. Plans come from the golden
files (no solve)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import EXAMPLES, filled_golden

PLANS = {name: filled_golden(name) for name in EXAMPLES}


def _figures(doc: dict) -> list[tuple[str, tuple]]:
    """(the name an error gives it, the path to it) of every figure of ``doc`` another one states."""
    out = [("cost_usd_per_hour", ("cost_usd_per_hour",))]
    out += [(f"allocations[{i}].cost_usd_per_hour", ("allocations", i, "cost_usd_per_hour"))
            for i in range(len(doc["allocations"]))]
    out += [(f"allocations[{i}].cost_usd_per_hour", ("allocations", i, "price_per_instance_usd_per_hour"))
            for i in range(len(doc["allocations"]))]
    out += [(f"models[{i}].cost_usd_per_hour", ("models", i, "cost_usd_per_hour")) for i in range(len(doc["models"]))]
    out += [(f"models[{i}].classes[{j}].rate_rps", ("models", i, "classes", j, "rate_rps"))
            for i, m in enumerate(doc["models"]) for j in range(len(m["classes"]))]
    return out


def _at(doc, path):
    for p in path[:-1]:
        doc = doc[p]
    return doc, path[-1]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_golden_plan_adds_up(name):
    """What `hetinfra plan` writes passes (the examples cover a demand profile's top-ups, committed terms,
    max_throughput, variants, a mixed pipeline and several regions and models)."""
    Plan.parse(copy.deepcopy(PLANS[name]))


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(EXAMPLES), data=st.data(),
       factor=st.one_of(st.floats(0.0, 0.98), st.floats(1.02, 1000.0)))
def test_property_a_figure_that_does_not_add_up_is_refused_naming_it(name, data, factor):
    """Any one figure scaled (a $/h, a price, a class's rate; by 2% or more, past plan.json's rounding) is exit 2
    naming the figure that no longer adds up (a unit's price: the unit's $/h); an edited count left every $/h at
    the old fleet's, and a class's rate was taken as written, silently."""
    doc = copy.deepcopy(PLANS[name])
    figures = [(n, p) for n, p in _figures(doc) if float(_value(doc, p) or 0) > 0.01]
    shown, path = data.draw(st.sampled_from(figures))
    node, key = _at(doc, path)
    node[key] = node[key] * factor
    with pytest.raises(InvalidInputError) as err:
        Plan.parse(doc, "plan.json")
    assert err.value.message.startswith(f"plan.json: {shown} is "), err.value.message


def _value(doc, path):
    node, key = _at(doc, path)
    return node[key]


def test_a_staged_plan_states_its_own_totals():
    """A staged re-plan (--max-changes) wrote its models' $/h as the whole new plan's: it now adds up."""
    from hetinfra.replan.safe import stage_plan

    doc = PLANS["multi-region"]
    counts = {a["unit"]: max(1, a["count"] - 1) for a in doc["allocations"][:2]}
    Plan.parse(stage_plan(doc, [], counts))


@pytest.mark.parametrize("short", [0, 1, 2])
def test_a_staged_top_up_states_its_cost_over_its_periods_and_runs_no_more_than_is_staged(short):
    """services/committed.yaml's plan (a committed base and an on-demand top-up with counts_by_period),
    staged with its top-up ``short`` replicas below the new plan's: its cost is the staged top-up's over
    its periods (the staged plan wrote price x instances, its peak), and its periods run no more than it
    stages (staged short of its peak, the plan was refused: counts_by_period runs more than its count)."""
    from hetinfra.replan.safe import stage_plan

    from tests.plan.golden_plans import totals_added_up

    doc = copy.deepcopy(PLANS["committed"])
    top = next(a for a in doc["allocations"] if a.get("counts_by_period"))
    top.update(count=4, instances=4, counts_by_period=[4 * c for c in top["counts_by_period"]])  # a peak of 4
    doc = totals_added_up(doc)
    Plan.parse(doc)
    counts = {a["unit"]: a["count"] for a in doc["allocations"]} | {top["unit"]: 4 - short}
    staged = Plan.parse(stage_plan(doc, [], counts))
    a = next(x for x in staged.allocations if x.unit == top["unit"])
    assert max(a.counts_by_period) <= a.count == counts[top["unit"]]
    assert float(a.cost_usd_per_hour) == pytest.approx(
        float(a.price_per_instance_usd_per_hour) * sum(a.counts_by_period) / len(a.counts_by_period), abs=1e-4)
