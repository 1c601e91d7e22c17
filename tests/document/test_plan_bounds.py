"""plan.json's lists and counts: a list a reader needs an entry of is refused empty, and a count that
sizes a reader's memory or loops (replicas, engines, GPUs of a node, stages) is refused above its
documented bound (hetinfra.document.base), each with exit 2 naming the field. Plans come from the
golden files: every list they hold is emptied in turn, so a new list field needs a decision here."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.document import Plan
from hetinfra.document.base import MAX_GPUS, MAX_NODE_GPUS, MAX_STAGES
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import EXAMPLES, filled_golden, totals_added_up

REPO = Path(__file__).resolve().parents[2]

PLANS = {name: filled_golden(name) for name in EXAMPLES}

#: lists a valid plan may hold empty (the field as :func:`generic` writes it), and why
MAY_BE_EMPTY = {
    "allocations": "a plan that leaves all demand unmet (planning.allow_unmet) allocates nothing",
    "templates": "the templates the allocations use: none without allocations (a replan stage's running units "
                 "keep templates of the plan they came from, which the new plan does not list)",
    "routing.*.*": "a class left unmet is routed to no unit (listed in unmet_rps: the consistency check)",
    "routing_by_origin.*.*.*": "an origin's class left unmet",
    "allocations[].alternates": "a unit pinned to its planned offer",
    "baselines": "--no-baselines",
    "baselines[].allocation": "a baseline that serves nothing (allow_unmet)",
    "warnings": "nothing to warn of",
    "solver.blocks": "one joint model, not decomposed",
    "purchase.break_even": "no committed allocation to weigh",
    "inputs.sources": "provenance only: no reader loops on it",
    "fidelity.*": "verification's report of what it did (no seeds, no vetoes, no rounds): printed, never looped on",
}
#: keys whose entries are named by the data (a model, a class, an origin), not by the format
DATA_KEYED = {"routing": 2, "routing_by_origin": 3, "origins": 2, "by_model": 1, "by_region": 1}


def lists(doc, path=()):
    """The path of every non-empty list in ``doc``."""
    if isinstance(doc, list):
        if doc:
            yield path
        for i, v in enumerate(doc):
            yield from lists(v, path + (i,))
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from lists(v, path + (k,))


def generic(path: tuple) -> str:
    """``path`` as a field: list indexes as ``[]``, data-named keys as ``*`` (routing.*.*)."""
    out, skip = [], 0
    for p in path:
        if skip:
            out.append("*")
            skip -= 1
        elif isinstance(p, int):
            out[-1] += "[]"
        else:
            out.append(p)
            skip = DATA_KEYED.get(p, 0)
    return ".".join(out)


def named(path: tuple) -> str:
    """``path`` as an error names it: models[0].classes, breakdown.by_region['aws/us-east-1'].models."""
    from hetinfra.errors import dotted

    return dotted(path)


CASES = sorted({(name, path) for name, doc in PLANS.items() for path in lists(doc)}, key=repr)


def test_every_list_of_the_examples_is_decided():
    """Each list field the examples hold is either refused empty or listed in MAY_BE_EMPTY (a stale
    entry, one no example holds, fails too)."""
    fields = {generic(path) for _, path in CASES}
    allowed = {f for f in fields if any(f == k or (k.endswith("*") and f.startswith(k[:-1])) for k in MAY_BE_EMPTY)}
    assert {k for k in MAY_BE_EMPTY if not any(f == k or (k.endswith("*") and f.startswith(k[:-1]))
                                               for f in fields)} == set()
    assert len(allowed) < len(fields)


@pytest.mark.parametrize("name,path", CASES, ids=[f"{n}:{named(p)}" for n, p in CASES])
def test_an_emptied_list_is_refused_naming_it_or_may_be_empty(name, path):
    doc = copy.deepcopy(PLANS[name])
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = []
    field = generic(path)
    if any(field == k or (k.endswith("*") and field.startswith(k[:-1])) for k in MAY_BE_EMPTY):
        return  # valid empty; a plan that is then inconsistent (routes to no allocation) is refused elsewhere
    with pytest.raises(InvalidInputError) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2
    assert str(exc.value).startswith(f"out/plan.json: {named(path)} is empty"), str(exc.value)


#: allocation fields -> their bound
BOUNDS = {"count": MAX_GPUS, "instances": MAX_GPUS, "gpus_per_instance": MAX_NODE_GPUS, "tp": MAX_NODE_GPUS,
          "engines_per_instance": MAX_NODE_GPUS, "pp": MAX_STAGES, "nodes_per_replica": MAX_STAGES}


@given(name=st.sampled_from(sorted(PLANS)), field=st.sampled_from(sorted(BOUNDS)), data=st.data())
@settings(max_examples=120, deadline=None)
def test_a_count_above_its_bound_is_refused_naming_it(name, field, data):
    """``count: 1000000000`` simulated for minutes in tens of GB: every count that sizes a reader's work
    is refused above its bound, naming the allocation's field."""
    doc = copy.deepcopy(PLANS[name])
    i = data.draw(st.integers(0, len(doc["allocations"]) - 1))
    value = data.draw(st.integers(BOUNDS[field] + 1, 10 ** 30))
    doc["allocations"][i][field] = value
    with pytest.raises(InvalidInputError) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2
    # the field itself, or the one an invariant ties it to (instances = count x nodes_per_replica)
    assert re.match(rf"out/plan.json: allocations\[{i}\]\.\w+ is ", str(exc.value)), str(exc.value)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_engines_of_an_allocation_are_bounded_together(name):
    """Each count within its bound, their product (the engines the simulator builds) still is not."""
    doc = copy.deepcopy(PLANS[name])
    a = doc["allocations"][0]
    a.update(gpus_per_instance=MAX_NODE_GPUS, engines_per_instance=MAX_NODE_GPUS, tp=1, count=MAX_GPUS // 10,
             instances=MAX_GPUS // 10 * a["nodes_per_replica"])
    with pytest.raises(InvalidInputError, match=r"allocations\[0\]\.count is 100000: .* engines, more than hetinfra "
                                                r"plans"):
        Plan.parse(doc, "out/plan.json")


def test_a_bundles_prefill_engines_count_against_the_bound(tmp_path, plan_json):
    """A one-node 2P1D bundle runs 3 engines a replica on one instance: engines_per_instance (its decode
    engines) x nodes_per_replica read 1, so 500,000 replicas (1,500,000 engines) passed the bound."""
    spec = yaml.safe_load((REPO / "benchmarks" / "specs" / "llama70-hetero-pd.yaml").read_text())
    doc = plan_json(tmp_path, spec, "--no-baselines")
    i = next(i for i, a in enumerate(doc["allocations"]) if a.get("disaggregation"))
    b = doc["allocations"][i]
    b.update(tp=4, engines_per_instance=1, nodes_per_replica=1, gpu="H100", count=3, instances=3,
             cost_usd_per_hour=round(b["price_per_instance_usd_per_hour"] * 3, 4))
    b["disaggregation"].update(xpyd="2P1D", roles=[{"role": "prefill", "engines": 2, "tp": 2, "nodes": 0},
                                                   {"role": "decode", "engines": 1, "tp": 4, "nodes": 0}])
    Plan.parse(totals_added_up(copy.deepcopy(doc)), "out/plan.json")
    b.update(count=MAX_GPUS // 2, instances=MAX_GPUS // 2)
    with pytest.raises(InvalidInputError, match=rf"allocations\[{i}\]\.count is 500000: .* 1,500,000 engines, more"):
        Plan.parse(doc, "out/plan.json")


def test_the_schema_states_the_bounds():
    from hetinfra.document.schemas import json_schema

    alloc = json_schema("plan")["$defs"]["Allocation"]["properties"]
    assert alloc["count"]["maximum"] == MAX_GPUS and alloc["tp"]["maximum"] == MAX_NODE_GPUS
    assert json_schema("plan")["$defs"]["ModelEntry"]["properties"]["classes"]["minItems"] == 1


def test_the_replica_bound_is_the_planners():
    """plan.json refuses no plan the planner makes: its bound is the one figure the planner plans to."""
    from hetinfra.plan import planner

    assert planner.MAX_GPUS is MAX_GPUS and planner.WARN_GPUS < MAX_GPUS


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(PLANS)), factor=st.sampled_from([0.0, 0.5, 0.99, 0.9995, 1.0005, 1.01, 2.0]))
def test_a_models_class_shares_sum_to_one(name, factor):
    """A model's classes are its request mix: shares scaled so that they sum to anything but 1 (within
    the planner's rounding, consistency.SHARE_TOL) are refused naming the model's classes (all edited to
    0, the simulator drew requests from nothing it was told and reported a 1,823x miss)."""
    from hetinfra.document.consistency import SHARE_TOL

    doc = copy.deepcopy(PLANS[name])
    for c in doc["models"][0]["classes"]:  # each class's rate follows its share (consistency.figure_problems)
        c["share"] = min(1.0, c["share"] * factor)
        c["rate_rps"] = c["share"] * doc["models"][0]["rate_rps"]
    total = sum(c["share"] for c in doc["models"][0]["classes"])
    if abs(total - 1.0) <= SHARE_TOL:
        Plan.model_validate(doc)
    else:
        with pytest.raises((InvalidInputError, ValueError), match=r"models\[0\]\.classes shares sum to"):
            Plan.model_validate(doc)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(n for n, d in PLANS.items() if d["objective"] == "min_cost")), data=st.data())
def test_every_class_with_demand_is_routed_or_listed_unmet(name, data):
    """A class left out of routing (or routed at share 0) was simulated as 0 requests and reported met,
    while the gateway's weights still sent its requests: every reader refuses it, naming the class
    (min_cost plans, which list what they leave unmet; max_throughput serves what it can)."""
    doc = copy.deepcopy(PLANS[name])
    m = data.draw(st.sampled_from([m for m in doc["models"] if m["rate_rps"]]))
    c = data.draw(st.sampled_from([c for c in m["classes"] if c["rate_rps"] > 0]))
    if data.draw(st.booleans()):
        del doc["routing"][m["name"]][c["name"]]
    else:
        for row in doc["routing"][m["name"]][c["name"]]:
            row["share"] = 0.0
    with pytest.raises(InvalidInputError, match=re.escape(f"routing.{m['name']}.")) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2 and "no route with a share > 0" in str(exc.value)
    doc["unmet_rps"] = {**doc.get("unmet_rps", {}), f"{m['name']}/{c['name']}": c["rate_rps"]}
    if all(f"{m['name']}/{k['name']}" in doc["unmet_rps"] or doc["routing"][m["name"]].get(k["name"])
           for k in m["classes"]):
        Plan.parse(doc, "out/plan.json")  # left unserved, and said so: a plan may do that


@pytest.mark.parametrize("path, value, says", [
    (("models", 0, "slo", "ttft_ms"), 5e-324, "models[0].slo.ttft_ms"),
    (("models", 0, "slo", "tpot_ms"), 1e-4, "models[0].slo.tpot_ms"),
    (("models", 0, "rate_rps"), 5e-324, "models[0].rate_rps must be 0 or at least"),
    (("models", 0, "rate_rps"), 1e-101, "models[0].rate_rps must be 0 or at least"),
])
def test_a_vanishing_objective_or_rate_is_refused_naming_it(path, value, says):
    """5e-324 ms or req/s made every ratio over it, and the arrival gaps, infinite: plan.json NaN, exit 1."""
    doc = copy.deepcopy(PLANS["chat"])
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InvalidInputError, match=re.escape(says)) as exc:
        Plan.parse(doc, "out/plan.json")
    assert exc.value.exit_code == 2


def test_a_model_listed_twice_is_refused():
    doc = copy.deepcopy(PLANS["chat"])
    doc["models"].append(copy.deepcopy(doc["models"][0]))
    with pytest.raises(InvalidInputError, match="models list chat-8b more than once"):
        Plan.parse(doc, "out/plan.json")


def _lora_split(doc: dict) -> tuple[dict, str, str]:
    """The chat plan with its first class split into the base class and an adapter's ``<class>~sql``,
    each routed as the planner keys them (hetinfra.plan.adapters.split_classes)."""
    m = doc["models"][0]
    base = m["classes"][0]
    adapter = dict(base, name=base["name"] + "~sql", share=base["share"] / 2, rate_rps=base["rate_rps"] / 2)
    base["share"] /= 2
    base["rate_rps"] /= 2
    m["classes"].append(adapter)
    routes = doc["routing"][m["name"]]
    routes[adapter["name"]] = copy.deepcopy(routes[base["name"]])
    for a in doc["allocations"]:
        if a["unit"] in {e["unit"] for e in routes[adapter["name"]]}:
            a["adapters"] = {"max_loras": 1, "max_lora_rank": 16, "slot_memory_gb": 0.1, "slowdown": 1.1,
                             "derate": 1 / 1.1, "cold_load_ms": 10, "held": [
                                 {"name": "sql", "source": "x/sql", "lora_rank": 8, "instances": a["instances"],
                                  "routed_rps": 1.0}]}
    return doc, base["name"], adapter["name"]


@pytest.mark.parametrize("drop", ["base", "adapter"])
def test_an_adapters_class_and_its_base_are_routed_each_by_its_own_name(drop):
    """The simulator looks routes up by a class's own name: a base class routed did not stand in for its
    adapter's class (or the other way round) deleted from routing (the review of this stop's first rule)."""
    doc, base, adapter = _lora_split(copy.deepcopy(PLANS["chat"]))
    Plan.parse(copy.deepcopy(doc), "out/plan.json")
    gone = base if drop == "base" else adapter
    del doc["routing"][doc["models"][0]["name"]][gone]
    with pytest.raises(InvalidInputError, match=re.escape(f"routing.chat-8b.{gone}: ")):
        Plan.parse(doc, "out/plan.json")


def test_a_class_routed_by_no_origin_is_refused():
    """Where clients' origins are routed the simulator reads routing_by_origin alone: a class deleted from
    every origin's rows (kept in routing) was simulated as 0 requests."""
    doc = copy.deepcopy(PLANS["europe"])
    m = next(m for m in doc["models"] if m["name"] in doc["routing_by_origin"])
    c = next(c for c in m["classes"] if c["rate_rps"] > 0)
    for per in doc["routing_by_origin"][m["name"]].values():
        per.pop(c["name"], None)
    with pytest.raises(InvalidInputError, match=re.escape(f"routing_by_origin.{m['name']}.{c['name']}: ")):
        Plan.parse(doc, "out/plan.json")
