"""The gateway's pure parts: classes from what a request carries, weights, tables, the demand log."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from hetinfra.compile.router import litellm_config, router_weights
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from hetinfra.gateway.balancer import Balancer
from hetinfra.gateway.classify import RequestError, TokenCounter, output_budget
from hetinfra.gateway.demand import DemandLog, read_all
from hetinfra.gateway.table import load_table, parse_endpoint_overrides
from hetinfra.replan.demand_log import read_demand_log
from tests.gateway.conftest import CLASSES, MODEL, UNITS, make_plan, write_out


@pytest.fixture
def table(tmp_path):
    out = write_out(tmp_path)
    eps = {dep: [f"http://10.0.0.{k}:8000/v1"] for k, dep in enumerate(UNITS.values())}
    return load_table(out, eps)


def test_a_request_maps_to_the_smallest_class_holding_its_prompt_and_max_tokens(table):
    routes = table.models[MODEL]
    assert routes.classify(10, 100)[0].name == "in<=250,out<=100"
    assert routes.classify(250, 101)[0].name == "in<=250,out<=1000"
    assert routes.classify(251, 5)[0].name == "in<=2000,out<=100"
    assert routes.classify(1999, 999)[0].name == "in<=2000,out<=1000"
    cls, clipped = routes.classify(5000, 50)
    assert clipped and cls.name == "in<=2000,out<=100"
    assert routes.default_max_tokens == 1000  # no max_tokens: the largest planned output


def test_token_counts_and_output_budget():
    tc = TokenCounter()
    assert tc.prompt_tokens(MODEL, "completion", {"prompt": "x" * 400}) == 100
    assert tc.prompt_tokens(MODEL, "completion", {"prompt": [1, 2, 3]}) == 3
    assert tc.prompt_tokens(MODEL, "completion", {"prompt": ["x" * 8, "x" * 40]}) == 10
    chat = {"messages": [{"role": "user", "content": "x" * 40}, {"role": "user", "content": [{"type": "text", "text": "abcd"}]}]}
    assert tc.prompt_tokens(MODEL, "chat", chat) == 3 + 4 + 10 + 4 + 1
    with pytest.raises(RequestError):
        tc.prompt_tokens(MODEL, "chat", {"messages": []})
    assert output_budget({"max_tokens": 7}, 99) == 7
    assert output_budget({"max_completion_tokens": 5, "max_tokens": 7}, 99) == 5
    assert output_budget({}, 99) == 99
    with pytest.raises(RequestError):
        output_budget({"max_tokens": "7"}, 99)


def test_smooth_weighted_round_robin_is_exact_and_skips_ejected_units(table):
    bal = Balancer(table)
    routes = table.models[MODEL]
    cls = next(c for c in routes.classes if c.name == "in<=250,out<=100")
    got = Counter(bal.pick(routes, cls, set()).unit for _ in range(1000))
    want = {UNITS[u]: w for u, w in CLASSES[cls.name][2].items()}
    assert {u: n / 1000 for u, n in got.items()} == pytest.approx(want, abs=0.002)
    bal.units[UNITS["u1"]].backends[0].eject()
    got = Counter(bal.pick(routes, cls, set()).unit for _ in range(1000))
    assert UNITS["u1"] not in got and got[UNITS["u2"]] / 1000 == pytest.approx(0.6, abs=0.002)
    # a class whose only unit is down goes to the model's other units
    bal.units[UNITS["u3"]].backends[0].eject()
    only = next(c for c in routes.classes if c.name == "in<=2000,out<=1000")
    assert bal.pick(routes, only, set()).unit == UNITS["u2"]
    # a reload keeps backends (health, in-flight counts) by URL
    again = Balancer(table, previous=bal)
    assert not again.units[UNITS["u3"]].backends[0].healthy


def test_endpoints_by_unit_or_deployment_unit_and_state_json(tmp_path):
    out = write_out(tmp_path)
    plan = make_plan()
    (out / "state.json").write_text(json.dumps({"state_version": 1, "endpoints": {
        UNITS["u1"]: ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"], UNITS["u2"]: ["http://10.0.0.3:8000/v1"]}}))
    t = load_table(out, parse_endpoint_overrides([f"{plan['allocations'][1]['unit']}=http://127.0.0.1:9/v1"]))
    assert t.endpoints[UNITS["u1"]] == ("http://10.0.0.1:8000", "http://10.0.0.2:8000")
    assert t.endpoints[UNITS["u2"]] == ("http://127.0.0.1:9",)  # --endpoint overrides state.json
    [u3] = [w for w in t.warnings if UNITS["u3"] in w]
    assert "goes to its model's other units" in u3  # u1 and u2 have endpoints
    alone = load_table(out / "plan.json", {})  # no unit of the model has an endpoint: nowhere to go
    assert alone.warnings and all(f"no unit of model {MODEL} has one, so the gateway answers 503" in w
                                  for w in alone.warnings)
    with pytest.raises(InvalidInputError, match="unknown unit"):
        load_table(out, {"nope": ["http://x/v1"]})
    with pytest.raises(InvalidInputError, match="UNIT=URL"):
        parse_endpoint_overrides(["no-equals-sign"])
    t2 = load_table(out / "plan.json", {UNITS["u3"]: ["http://h:1/v1"]})  # a bare plan.json works too
    assert set(t2.models) == {MODEL}


def test_demand_log_rotates_and_reads_back_without_contents(tmp_path):
    log = DemandLog(tmp_path / "d.csv", region="eu,west", max_bytes=2000, keep=3)
    for i in range(200):
        log.record(MODEL, 100 + i, 50, "in<=250,out<=100", 40, 200, when=1_790_000_000 + i)
    log.close()
    assert (tmp_path / "d.csv.3").exists() and not (tmp_path / "d.csv.4").exists()
    joined = tmp_path / "all.csv"
    joined.write_text(read_all(tmp_path / "d.csv", keep=3))
    d = read_demand_log(joined)
    assert list(d.timestamps) == sorted(d.timestamps) and set(d.regions.tolist()) == {"eu,west"}
    assert d.input_tokens.max() == 299 and len(d.timestamps) < 200  # the oldest rotation was dropped


def test_weights_carry_the_arrival_rule_and_litellm_states_its_limits():
    w = router_weights(Plan.parse(make_plan()))  # router_weights takes the model
    assert "max_tokens" in w["routing_rule"] and w["models"][MODEL]["default_max_tokens"] == 1000
    assert w["models"][MODEL]["endpoints"][UNITS["u1"]]["unit"].startswith(MODEL + "|")
    text = litellm_config(w, {UNITS["u1"]: ["http://10.0.0.1:8000/v1"]})
    assert "cannot express" in text and "per-class routing" in text
    doc = yaml.safe_load(text)
    assert {d["model_name"] for d in doc["model_list"]} == {MODEL}
    assert any(d["litellm_params"]["api_base"] == "http://10.0.0.1:8000/v1" for d in doc["model_list"])
    assert all(d["litellm_params"]["api_key"] == "os.environ/VLLM_API_KEY" for d in doc["model_list"])


def test_a_plan_routing_an_origin_to_a_unit_it_lacks_is_refused(tmp_path):
    """Plans trimmed by earlier versions could route an origin to a unit the trim had removed; the
    gateway and the simulator refuse such a plan (re-plan) instead of sending requests nowhere."""
    import copy
    import json

    from hetinfra.document.simulation import SimPlan
    from hetinfra.errors import InvalidInputError
    from hetinfra.gateway.table import load_table
    from tests.plan.golden_plans import filled_golden

    doc = filled_golden("multi-region")
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    assert load_table(tmp_path / "plan.json").by_origin  # as written: fine
    stale = copy.deepcopy(doc)
    gone = next(a for a in stale["allocations"] if "us-west-2" in a["unit"])
    stale["allocations"].remove(gone)
    for rows in stale["routing"]["chat-8b"].values():  # class routing moved, origin routing not (the old trim)
        rows[:] = [e for e in rows if e["unit"] != gone["unit"]] or rows
    (tmp_path / "plan.json").write_text(json.dumps(stale))
    with pytest.raises(InvalidInputError, match="routing_by_origin.chat-8b.*which is not among allocations"):
        load_table(tmp_path / "plan.json")
    with pytest.raises(InvalidInputError, match="routing_by_origin.chat-8b.*which is not among allocations"):
        SimPlan.of(stale)
