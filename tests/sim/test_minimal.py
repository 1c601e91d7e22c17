"""hetinfra.sim.minimal: the removal the trim and the minimality test share, and the memo."""

from __future__ import annotations

from hetinfra.sim.minimal import SUSTAIN_STEPS, removal_order, sustained_load, without_one_replica


def _doc() -> dict:
    allocs = [{"unit": "a", "model": "m", "count": 2, "nodes_per_replica": 1, "cost_usd_per_hour": 4.0},
              {"unit": "b", "model": "m", "count": 1, "nodes_per_replica": 1, "cost_usd_per_hour": 1.0}]
    routing = {"m": {"x": [{"unit": "a", "share": 0.75, "rps": 3.0}, {"unit": "b", "share": 0.25, "rps": 1.0}],
                     "y": [{"unit": "b", "share": 1.0, "rps": 2.0}]}}
    return {"allocations": allocs, "routing": routing, "models": [{"name": "m", "rate_rps": 6.0}]}


def test_a_replica_fewer_keeps_routing_and_the_last_one_hands_its_share_on():
    doc = _doc()
    fewer = without_one_replica(doc, "a")
    assert [a["count"] for a in fewer["allocations"]] == [1, 1] and fewer["routing"] == doc["routing"]
    assert doc["allocations"][0]["count"] == 2  # a copy
    assert without_one_replica(doc, "b") is None  # class y would have no unit
    doc["routing"]["m"]["y"] = [{"unit": "a", "share": 1.0, "rps": 2.0}]
    gone = without_one_replica(doc, "b")
    assert [a["unit"] for a in gone["allocations"]] == ["a"]
    assert gone["routing"]["m"]["x"] == [{"unit": "a", "share": 1.0, "rps": 4.0}]


def test_a_replica_fewer_runs_no_period_past_its_count():
    """A unit of a demand profile's plan (counts_by_period) with a replica fewer runs at most that many in
    any period: plan.json's own check refuses a period above the count, and `hetinfra simulate` refused
    the copy a hand check of minimality made (the stop-60 audit: 'counts_by_period runs 2 instances in a
    period, more than its count 1')."""

    doc = _doc()
    doc["allocations"][0]["counts_by_period"] = [2, 1, 2]
    fewer = without_one_replica(doc, "a")
    assert fewer["allocations"][0]["count"] == 1 and fewer["allocations"][0]["counts_by_period"] == [1, 1, 1]
    assert doc["allocations"][0]["counts_by_period"] == [2, 1, 2]  # a copy


def test_a_class_served_alone_goes_to_the_units_whose_template_serves_it():
    """The last replica of a unit that served class y alone: y goes to the model's units whose
    template has a rate for it, in proportion to replicas x that rate (hetinfra.sim.minimal.takers);
    refused where no template covers y. chat at 3x its rate: the trim could not remove 2 L4s that
    served one class alone, and the plan kept them ($12.57/h where $11.17/h met)."""
    doc = _doc()
    doc["allocations"] += [{"unit": "c", "model": "m", "count": 1, "nodes_per_replica": 1, "cost_usd_per_hour": 1.0}]
    for a, t in zip(doc["allocations"], ("ta", "tb", "tc")):
        a["template"] = t
    doc["templates"] = [{"id": "ta", "capacity_rps": {"x": 1.0}}, {"id": "tb", "capacity_rps": {"x": 1.0, "y": 1.0}},
                        {"id": "tc", "capacity_rps": {"x": 1.0}}]
    assert without_one_replica(doc, "b") is None  # only b's template serves y
    doc["templates"][0]["capacity_rps"]["y"] = 3.0  # a: 2 replicas x 3 req/s
    doc["templates"][2]["capacity_rps"]["y"] = 2.0  # c: 1 x 2
    gone = without_one_replica(doc, "b")
    assert gone["routing"]["m"]["y"] == [{"unit": "a", "share": 0.75, "rps": 1.5}, {"unit": "c", "share": 0.25, "rps": 0.5}]
    assert gone["routing"]["m"]["x"] == [{"unit": "a", "share": 1.0, "rps": 4.0}]  # shared classes as before


def test_the_last_replica_hands_each_origins_share_on_within_that_origin():
    """routing_by_origin moves as routing does, within each origin; a removal that leaves an origin's
    class with no unit is refused (its requests would have nowhere the plan routes them)."""
    doc = _doc()
    doc["routing"]["m"]["y"] = [{"unit": "a", "share": 0.5, "rps": 1.0}, {"unit": "b", "share": 0.5, "rps": 1.0}]
    doc["routing_by_origin"] = {"m": {
        "east": {"x": [{"unit": "a", "share": 0.5, "rps": 1.0}, {"unit": "b", "share": 0.5, "rps": 1.0}]},
        "west": {"x": [{"unit": "a", "share": 1.0, "rps": 2.0}], "y": [{"unit": "b", "share": 1.0, "rps": 2.0}]}}}
    assert without_one_replica(doc, "b") is None  # west's class y has only b
    doc["routing_by_origin"]["m"]["west"]["y"] = [{"unit": "a", "share": 0.25, "rps": 0.5},
                                                   {"unit": "b", "share": 0.75, "rps": 1.5}]
    gone = without_one_replica(doc, "b")
    assert gone["routing_by_origin"]["m"]["east"]["x"] == [{"unit": "a", "share": 1.0, "rps": 2.0}]
    assert gone["routing_by_origin"]["m"]["west"]["y"] == [{"unit": "a", "share": 1.0, "rps": 2.0}]
    assert doc["routing_by_origin"]["m"]["east"]["x"][1]["unit"] == "b"  # the input is not edited


def test_removal_order_dearest_replica_first():
    assert removal_order(_doc()) == [("a", False), ("a", True), ("b", False)]  # a unit of 2: also as a whole


def test_sustained_load_searches_per_model_in_shared_simulations():
    doc = {"models": [{"name": "p", "rate_rps": 1.0}, {"name": "q", "rate_rps": 1.0}]}
    limits = {"p": 1.5, "q": 1.1}
    calls = []

    def meets(d):
        calls.append({m["name"]: m["rate_rps"] for m in d["models"] if m["rate_rps"]})
        return {m["name"]: m["rate_rps"] * 1.0 <= limits[m["name"]] for m in d["models"] if m["rate_rps"]}

    got = sustained_load(doc, 1.0, meets)
    # 1.125 for both (q misses there and is done), then p alone bisects 1.125 .. 2
    assert calls == [{"p": 1.125, "q": 1.125}, {"p": 1.5}, {"p": 1.75}, {"p": 1.625}]
    assert got == {"p": 1.5, "q": 1.0}


def test_sustained_load_of_a_minimal_plan_takes_one_simulation():
    calls = []
    got = sustained_load({"models": [{"name": "p", "rate_rps": 2.0}]}, 1.2,
                         lambda d: calls.append(d) or {"p": False})
    assert got == {"p": 1.2} and len(calls) == 1


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _routed_docs(draw):
    """A plan of 2-4 one-replica units of one model, 1-3 classes, each routed (per class and per
    each of 2 origins) to a drawn non-empty set of units with drawn shares."""
    units = [f"u{i}" for i in range(draw(st.integers(2, 4)))]

    def rows():
        chosen = draw(st.lists(st.sampled_from(units), min_size=1, max_size=len(units), unique=True))
        weights = [draw(st.integers(1, 9)) for _ in chosen]
        return [{"unit": u, "share": round(w / sum(weights), 6), "rps": float(w)} for u, w in zip(chosen, weights)]

    classes = [f"c{k}" for k in range(draw(st.integers(1, 3)))]
    allocs = [{"unit": u, "model": "m", "count": 1, "nodes_per_replica": 1, "cost_usd_per_hour": 1.0} for u in units]
    return {"allocations": allocs, "routing": {"m": {c: rows() for c in classes}},
            "routing_by_origin": {"m": {o: {c: rows() for c in classes} for o in ("east", "west")}},
            "models": [{"name": "m", "rate_rps": 1.0}]}


@settings(max_examples=150, deadline=None)
@given(_routed_docs(), st.data())
def test_a_units_last_replica_hands_on_every_route_it_had(doc, data):
    """The removal the trim and the minimality test share: refused exactly when a class, or an
    origin's class, has no other unit; otherwise no route names the unit any more, and every class's
    (and origin's class's) shares and req/s are kept, up to plan.json's rounding."""
    unit = data.draw(st.sampled_from([a["unit"] for a in doc["allocations"]]))
    lists = [rows for rows in doc["routing"]["m"].values()]
    lists += [rows for per in doc["routing_by_origin"]["m"].values() for rows in per.values()]
    gone = without_one_replica(doc, unit)
    if any(all(e["unit"] == unit for e in rows) for rows in lists):
        assert gone is None
        return
    after = [rows for rows in gone["routing"]["m"].values()]
    after += [rows for per in gone["routing_by_origin"]["m"].values() for rows in per.values()]
    for before, now in zip(lists, after):
        assert all(e["unit"] != unit for e in now)
        assert abs(sum(e["share"] for e in now) - sum(e["share"] for e in before)) < 1e-5
        assert abs(sum(e["rps"] for e in now) - sum(e["rps"] for e in before)) < 1e-5


@settings(max_examples=200, deadline=None)
@given(limits=st.lists(st.floats(0.9, 2.5, allow_nan=False), min_size=1, max_size=4),
       load=st.sampled_from([1.0, 1.2, 1.5]))
def test_sustained_load_is_the_highest_grid_load_met_where_meeting_is_monotone(limits, load):
    """Each model meets up to its own limit (monotone in the load): the search finds the highest
    point of the grid load x (1 + k/8), k = 0..7, at or below the limit (the declared load where it
    is below even that), in at most SUSTAIN_STEPS + 1 shared simulations."""
    names = [f"m{i}" for i in range(len(limits))]
    doc = {"models": [{"name": n, "rate_rps": 1.0} for n in names]}
    calls = []

    def meets(d):
        calls.append(d)
        return {m["name"]: m["rate_rps"] * load <= limits[names.index(m["name"])] * (1 + 1e-12)
                for m in d["models"] if m["rate_rps"]}

    got = sustained_load(doc, load, meets)
    for n, limit in zip(names, limits):
        grid = [load * (1 + k / 8) for k in range(8)]
        assert got[n] == round(max([g for g in grid if g <= limit * (1 + 1e-12)], default=load), 4)
    assert 1 <= len(calls) <= SUSTAIN_STEPS + 1


@settings(max_examples=150, deadline=None)
@given(_routed_docs(), st.data())
def test_a_class_left_alone_goes_only_where_a_template_serves_it(doc, data):
    """Without clients' origins: a removal is refused exactly when a class the unit served alone has no
    other unit whose template serves it; otherwise every class keeps its shares and req/s, and a
    route goes only to a unit whose template has a rate for its class."""
    del doc["routing_by_origin"]
    units = [a["unit"] for a in doc["allocations"]]
    classes = sorted(doc["routing"]["m"])
    serves = {u: data.draw(st.lists(st.sampled_from(classes), unique=True)) for u in units}
    for a in doc["allocations"]:
        a["template"] = "t" + a["unit"]
        serves[a["unit"]] += [c for c, rows in doc["routing"]["m"].items() if any(e["unit"] == a["unit"] for e in rows)]
    doc["templates"] = [{"id": "t" + u, "capacity_rps": {c: 1.0 + i for i, c in enumerate(sorted(set(cs)))}}
                        for u, cs in serves.items()]
    unit = data.draw(st.sampled_from(units))
    gone = without_one_replica(doc, unit)
    orphaned = [c for c, rows in doc["routing"]["m"].items() if all(e["unit"] == unit for e in rows)]
    if any(not any(c in serves[u] for u in units if u != unit) for c in orphaned):
        assert gone is None
        return
    for c, before in doc["routing"]["m"].items():
        now = gone["routing"]["m"][c]
        assert all(e["unit"] != unit and c in serves[e["unit"]] for e in now)
        assert abs(sum(e["share"] for e in now) - sum(e["share"] for e in before)) < 1e-5
        assert abs(sum(e["rps"] for e in now) - sum(e["rps"] for e in before)) < 1e-5
