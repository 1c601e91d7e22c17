"""plan.json's model (hetinfra.document.Plan): every field that is wrong, of any kind, is an exit-2
error naming the file and the field; never a traceback. Plans come from the golden files (no solve)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.document import Plan, load_plan
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import EXAMPLES, filled_golden

PLANS = {name: filled_golden(name) for name in EXAMPLES}
INT_FIELDS = ("gpus_per_instance", "tp", "pp", "engines_per_instance", "nodes_per_replica", "count", "instances")
WRONG = st.one_of(st.integers(max_value=0), st.text(max_size=3), st.booleans(), st.none(),
                  st.floats(allow_nan=True), st.lists(st.integers(), max_size=2))


@given(name=st.sampled_from(sorted(PLANS)), field=st.sampled_from(INT_FIELDS), value=WRONG, data=st.data())
@settings(max_examples=150, deadline=None)
def test_any_wrong_count_names_its_field(name, field, value, data):
    doc = copy.deepcopy(PLANS[name])
    i = data.draw(st.integers(0, len(doc["allocations"]) - 1))
    doc["allocations"][i][field] = value
    with pytest.raises(InvalidInputError) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2
    # the field itself, or the one its invariant ties it to (instances = count x nodes_per_replica)
    assert str(exc.value).startswith(f"out/plan.json: allocations[{i}].")


@given(name=st.sampled_from(sorted(PLANS)), section=st.sampled_from(["allocations", "models", "routing", "deploy",
                                                                     "solver", "inputs", "templates", "baselines"]),
       value=st.one_of(st.none(), st.integers(), st.text(max_size=3), st.just([]), st.just({})))
@settings(max_examples=100, deadline=None)
def test_any_wrong_section_is_an_error_or_reads_back(name, section, value):
    doc = copy.deepcopy(PLANS[name])
    doc[section] = value
    try:
        plan = Plan.parse(doc, "out/plan.json")
    except InvalidInputError as exc:
        first = str(exc).splitlines()[0]  # the section, or a reference into it ("... not among the plan's models")
        assert first.startswith("out/plan.json: ") and section in first
    else:  # an empty list or mapping can be valid (no allocations, no baselines): then it reads back
        assert plan.to_dict() == doc


@pytest.mark.parametrize("name", sorted(PLANS))
def test_golden_plans_read_back_exactly(name):
    assert Plan.parse(PLANS[name]).to_dict() == PLANS[name]


def test_defaults_come_from_the_model():
    doc = copy.deepcopy(PLANS["chat"])
    del doc["deploy"]  # a plan without a deploy section deploys with the spec's defaults
    plan = Plan.parse(doc)
    assert plan.deploy.port == 8000 and plan.deploy.gateway.port == 8080 and plan.deploy.stack == "prod"


@pytest.mark.parametrize("text,message", [
    (None, "no plan.json in"), ("{", "is not valid JSON"), ("[]", "(top level) is not a JSON object but list"),
    ("null", "(top level) is not a JSON object but NoneType"), ('{"plan_version": 1}', "is missing"),
])
def test_load_plan_errors_name_the_file(tmp_path, text, message):
    if text is not None:
        (tmp_path / "plan.json").write_text(text)
    with pytest.raises(InvalidInputError) as exc:
        load_plan(tmp_path)
    assert str(tmp_path) in str(exc.value) and "plan.json" in str(exc.value) and message in str(exc.value)
