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


def _fraction_and_rate_paths(doc: dict) -> list[tuple[list, str]]:
    """Where a plan holds a fraction (in [0, 1]) or a rate (>= 0): (path to its dict, key, kind)."""
    out = []
    for m, per in doc["routing"].items():
        for c, rows in per.items():
            out += [(["routing", m, c, i], k) for i in range(len(rows)) for k in ("share", "rps")]
    for m, per in (doc.get("routing_by_origin") or {}).items():
        for o, classes in per.items():
            for c, rows in classes.items():
                out += [(["routing_by_origin", m, o, c, i], k) for i in range(len(rows)) for k in ("share", "rps")]
    for m, per in (doc.get("origins") or {}).items():
        out += [(["origins", m, o], "share") for o in per]
    for i, model in enumerate(doc["models"]):
        out += [(["models", i], "rate_rps")]
        out += [(["models", i, "classes", j], k) for j in range(len(model["classes"])) for k in ("share", "rate_rps")]
    out += [(["allocations", i], k) for i in range(len(doc["allocations"])) for k in ("routed_rps", "utilization")]
    return out


@given(name=st.sampled_from(sorted(PLANS)), data=st.data(),
       value=st.one_of(st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False),
                       st.floats(min_value=1.0 + 1e-9, max_value=1e12)))
@settings(max_examples=120, deadline=None)
def test_a_share_outside_0_1_or_a_negative_rate_is_refused_where_it_is(name, data, value):
    """A hand-edited plan.json whose routing share is 7.0 was simulated as it stood (the simulator and the
    gateway read the shares): every fraction of a plan is in [0, 1], every rate >= 0, else exit 2 naming
    the field. A share above 1 is out; a rate or a utilization above 1 is a value like any other."""
    doc = copy.deepcopy(PLANS[name])
    path, key = data.draw(st.sampled_from(_fraction_and_rate_paths(doc)))
    if value > 1 and key != "share":
        value = -value  # rates and loads may exceed 1: only their sign is bounded
    node = doc
    for step in path:
        node = node[step]
    node[key] = value
    with pytest.raises(InvalidInputError) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2 and str(exc.value).startswith(f"out/plan.json: {path[0]}")
    assert key in str(exc.value).splitlines()[0]


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


def test_an_allocation_serves_only_a_variant_its_model_lists():
    doc = copy.deepcopy(PLANS["variants"])
    doc["allocations"][0]["variant"] = "fp4"
    with pytest.raises(InvalidInputError, match=r"^out/plan.json: allocations\[0\]\.variant 'fp4' is not among model "
                                                r"chat-8b's variants \(bf16, fp8, int4\)"):
        Plan.parse(doc, "out/plan.json")


def test_a_units_max_model_len_is_its_own_else_its_models():
    doc = copy.deepcopy(PLANS["chat"])
    own = doc["allocations"][0]["max_model_len"] + 16  # still within its KV cache
    doc["allocations"][0]["max_model_len"] = own
    assert Plan.parse(doc).max_model_len(Plan.parse(doc).allocations[0]) == own
    del doc["allocations"][0]["max_model_len"]  # a plan written before per-unit lengths
    plan = Plan.parse(doc)
    assert plan.max_model_len(plan.allocations[0]) == doc["models"][0]["max_model_len"]


def mixed(doc: dict) -> dict:
    """``doc`` with its first allocation made a two-stage mixed pipeline of 2 replicas."""
    a = doc["allocations"][0]
    a.update(count=2, instances=2 * a["nodes_per_replica"], skypilot_task=None, experimental=True, stages=[
        {"instance_type": "p5.48xlarge", "gpu": "H100", "gpus": 8, "layers": 50, "price_usd_per_hour": 98.32},
        {"instance_type": "g6e.12xlarge", "gpu": "L40S", "gpus": 4, "layers": 30, "price_usd_per_hour": 10.49}])
    return doc


def test_a_mixed_pipeline_counts_instances_stage_by_stage():
    plan = Plan.parse(mixed(copy.deepcopy(PLANS["chat"])))
    a = plan.allocations[0]
    assert [(g.instance_type, g.gpu, g.gpus_per_instance, g.instances, g.cost_usd_per_hour, g.stages)
            for g in a.stage_groups()] == [("p5.48xlarge", "H100", 8, 2, 98.32 * 2, None),
                                           ("g6e.12xlarge", "L40S", 4, 2, 10.49 * 2, None)]
    assert all(g.deployment_unit == a.deployment_unit for g in a.stage_groups())
    other = Plan.parse(PLANS["chat"]).allocations[0]
    assert other.stage_groups() == [other]


@given(name=st.sampled_from(sorted(PLANS)), data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_whole_plan_routes_only_to_its_allocations(name, data):
    """Whatever allocations a plan loses without its routes moving, the simulator's reading of it
    (SimPlan) refuses it exactly when some route (per class or per origin) names a lost unit, and
    names that route."""
    from hetinfra.document.simulation import SimPlan

    doc = copy.deepcopy(PLANS[name])
    lost = data.draw(st.sets(st.sampled_from([a["unit"] for a in doc["allocations"]])), label="lost")
    doc["allocations"] = [a for a in doc["allocations"] if a["unit"] not in lost]
    routed = {e["unit"] for per in doc["routing"].values() for rows in per.values() for e in rows}
    routed |= {e["unit"] for per in (doc.get("routing_by_origin") or {}).values() for o in per.values()
               for rows in o.values() for e in rows}
    if routed & lost:
        with pytest.raises(InvalidInputError, match="routes to unit .*, which is not among allocations"):
            SimPlan.of(doc)
    else:
        SimPlan.of(doc)
