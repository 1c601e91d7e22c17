"""plan.json, router/weights.json and state.json are checked against each other
(hetinfra.document.crosscheck): a schema-valid file that sends one model's requests to another
model's units, or a state.json of another service, fleet or target, is refused with the file and the
route or unit named. Property: for every route of a two-model plan, pointing it at the other
model's unit is refused, in plan.json and in weights.json alike; the untouched files load."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.compile.router import router_weights
from hetinfra.document import Plan, load_plan
from hetinfra.errors import InvalidInputError
from hetinfra.gateway.table import load_table
from tests.gateway.conftest import CLASSES, MODEL, make_plan, write_out
from tests.plan.golden_plans import totals_added_up

OTHER = "code-3b"


def two_model_plan() -> dict:
    """make_plan's three units, the third (u3) serving a second model with the same classes."""
    plan = make_plan()
    u3 = plan["allocations"][2]
    old_unit = u3["unit"]
    u3.update(model=OTHER, unit=old_unit.replace(MODEL, OTHER), deployment_unit=u3["deployment_unit"].replace(MODEL, OTHER),
              skypilot_task=u3["skypilot_task"].replace(MODEL, OTHER))
    plan["models"].append(dict(plan["models"][0], name=OTHER))
    chat = {c: [dict(e, share=1.0) for e in es if e["unit"] != old_unit][:1] or
            [{"unit": plan["allocations"][0]["unit"], "share": 1.0, "rps": 1.0}]
            for c, es in plan["routing"][MODEL].items()}
    plan["routing"] = {MODEL: chat, OTHER: {c: [{"unit": u3["unit"], "share": 1.0, "rps": 1.0}] for c in CLASSES}}
    return totals_added_up(plan)


def test_the_two_model_plan_loads_and_routes_each_model_to_its_own_units(tmp_path):
    out = write_out(tmp_path / "out", two_model_plan())
    table = load_table(out)
    assert {u for c in table.models[OTHER].classes for u, _ in c.weights} == {"code-3b-gcp-us-central1-a2-highgpu-1g"}
    assert "code-3b-gcp-us-central1-a2-highgpu-1g" not in {u for c in table.models[MODEL].classes for u, _ in c.weights}


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from([MODEL, OTHER]), cls=st.sampled_from(sorted(CLASSES)))
def test_a_route_to_another_models_unit_is_refused_naming_plan_json_and_the_route(tmp_path_factory, model, cls):
    plan = two_model_plan()
    foreign = next(a for a in plan["allocations"] if a["model"] != model)
    bad = copy.deepcopy(plan)
    bad["routing"][model][cls][0]["unit"] = foreign["unit"]
    path = tmp_path_factory.mktemp("x") / "plan.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InvalidInputError) as err:
        load_plan(path)
    msg = err.value.message
    assert str(path) in msg and f"routing.{model}.{cls}" in msg and f"which serves model {foreign['model']!r}" in msg


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from([MODEL, OTHER]), cls=st.sampled_from(sorted(CLASSES)),
       where=st.sampled_from(["weights", "endpoints"]))
def test_weights_json_sending_a_model_to_another_models_unit_is_refused(tmp_path_factory, model, cls, where):
    plan = two_model_plan()
    out = write_out(tmp_path_factory.mktemp("x") / "out", plan)
    foreign = next(a for a in plan["allocations"] if a["model"] != model)["deployment_unit"]
    weights = router_weights(Plan.parse(plan))
    if where == "weights":
        weights["models"][model]["classes"][cls]["weights"][foreign] = 0.5
        route = f"models.{model}.classes.{cls}.weights.{foreign}"
    else:
        weights["models"][model]["endpoints"][foreign] = {"share": 0.1}
        route = f"models.{model}.endpoints.{foreign}"
    (out / "router" / "weights.json").write_text(json.dumps(weights))
    with pytest.raises(InvalidInputError) as err:
        load_table(out)
    assert str(out / "router" / "weights.json") in err.value.message and route in err.value.message


def _state(plan: dict, **changes) -> dict:
    running = [dict(a, path="pulumi") for a in plan["allocations"]]
    doc = {"state_version": 1, "service": plan["service"], "allocations": running,
           "endpoints": {a["deployment_unit"]: [f"http://127.0.0.1:{9 + i}/v1"] for i, a in enumerate(running)}}
    return dict(doc, **changes)


@pytest.mark.parametrize("change, says", [
    (lambda p, s: s.update(service="other-svc"), "runs service 'other-svc', but plan.json is for service"),
    (lambda p, s: s["allocations"][0].update(model=OTHER), "but plan.json has it for model 'chat-8b'"),
    (lambda p, s: s["allocations"][0].update(region="eu-west-1"), "in aws/us-east-1"),
    (lambda p, s: s["allocations"][1].update(path="kubernetes"), "deploy.target 'vms' runs it by pulumi or skypilot"),
])
def test_a_state_of_another_service_fleet_or_target_is_refused(tmp_path, change, says):
    plan = two_model_plan()
    out = write_out(tmp_path / "out", plan)
    state = _state(plan)
    load_table(out)  # no state: loads
    (out / "state.json").write_text(json.dumps(state))
    assert load_table(out).endpoints  # the matching state: loads, endpoints read
    change(plan, state)
    (out / "state.json").write_text(json.dumps(state))
    with pytest.raises(InvalidInputError) as err:
        load_table(out)
    assert str(out / "state.json") in err.value.message and says in err.value.message
