"""The simulator's memo (hetinfra.sim.plan_sim): a simulation that reuses it equals a fresh one, and
a removal re-simulates only the unit that lost a replica and collects only its model."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetinfra.sim.draw as draw
import hetinfra.sim.plan_sim as plan_sim
from hetinfra.sim import core, unit_entry
from hetinfra.sim import WorkloadConfig
from hetinfra.sim.minimal import without_one_replica
from hetinfra.spec.load import load_spec
from tests.plan.golden_plans import REPO, filled_golden

CONFIG = WorkloadConfig(requests=300, load=1.1, seed=7)


@pytest.fixture(scope="module")
def two_models():
    path = REPO / "services" / "europe.yaml"  # two models, one with a class split over two units
    return filled_golden("europe"), load_spec(path)[0], Path(path)


def test_memo_gives_the_fresh_simulation_and_reruns_only_the_touched_unit(two_models, monkeypatch):
    doc, spec, path = two_models
    uid = doc["allocations"][0]["unit"]  # a replica more there, to remove (the golden plan may have none to spare)
    doc = {**doc, "allocations": [dict(a, count=a["count"] + 1) if a["unit"] == uid else a for a in doc["allocations"]]}
    memo: dict = {}
    assert plan_sim.simulate_plan(doc, spec, path, CONFIG, memo=memo) == plan_sim.simulate_plan(doc, spec, path, CONFIG)
    fewer = without_one_replica(doc, uid)
    ran, drawn = [], []
    real_run, real_sample = plan_sim.simulate_unit, draw._sample
    monkeypatch.setattr(plan_sim, "simulate_unit", lambda reps, reqs, progress=None: (ran.append(len(reps)),
                                                                                       real_run(reps, reqs, progress)))
    monkeypatch.setattr(draw, "_sample", lambda m, *a: (drawn.append(m.name), real_sample(m, *a))[1])
    again = plan_sim.simulate_plan(fewer, spec, path, CONFIG, memo=memo)
    assert len(ran) == 1 and drawn == []  # one unit re-simulated; its model's requests reused
    monkeypatch.setattr(plan_sim, "simulate_unit", real_run)
    assert again == plan_sim.simulate_plan(fewer, spec, path, CONFIG)
    # and the untouched model's result came from the memo without running anything
    ran.clear()
    monkeypatch.setattr(plan_sim, "simulate_unit", lambda reps, reqs, progress=None: ran.append(1))
    assert plan_sim.simulate_plan(fewer, spec, path, CONFIG, memo=memo) == again and ran == []


def test_the_other_units_of_a_touched_model_recall_their_statistics(two_models, monkeypatch):
    """A unit's simulation.json entry depends only on its key, so the memo keeps it beside the unit's
    requests: a replica fewer in one of a model's units summarizes that unit alone again."""
    both, spec, path = two_models
    doc = {**both, "models": [m for m in both["models"] if m["name"] == "chat-8b"],
           "allocations": [a for a in both["allocations"] if a["model"] == "chat-8b"],
           **{k: {"chat-8b": both[k]["chat-8b"]} for k in ("routing", "routing_by_origin") if both.get(k)}}
    uid = doc["allocations"][0]["unit"]
    more = {**doc, "allocations": [dict(a, count=2) if a["unit"] == uid else a for a in doc["allocations"]]}
    memo: dict = {}
    plan_sim.simulate_plan(more, spec, path, CONFIG, memo=memo)
    summed = []
    real_block = plan_sim.block
    for where in (plan_sim, unit_entry):  # a model's block, and a unit's (summarized on its thread)
        monkeypatch.setattr(where, "block", lambda *a: (summed.append(1), real_block(*a))[1])
    recalled = plan_sim.simulate_plan(doc, spec, path, CONFIG, memo=memo)
    with_memo, summed[:] = len(summed), []
    assert recalled == plan_sim.simulate_plan(doc, spec, path, CONFIG)
    assert len(doc["allocations"]) >= 3
    assert with_memo == len(summed) - (len(doc["allocations"]) - 1)  # chat-8b's other units


def test_a_routing_change_routes_the_same_requests_again(two_models, monkeypatch):
    """Requests are drawn once per model and workload (``_sample``): a plan whose shares moved routes
    them again, and gets exactly the fresh simulation."""
    import copy

    doc, spec, path = two_models
    memo: dict = {}
    plan_sim.simulate_plan(doc, spec, path, CONFIG, memo=memo)
    model, per_class = next((m, rows) for m, rows in doc["routing"].items()
                            if any(len(entries) > 1 for entries in rows.values()))
    moved = copy.deepcopy(doc)
    entries = next(e for e in moved["routing"][model].values() if len(e) > 1)
    shift = entries[1]["share"] / 2
    entries[0]["share"], entries[1]["share"] = entries[0]["share"] + shift, entries[1]["share"] - shift
    sampled = []
    real_sample = draw._sample
    monkeypatch.setattr(draw, "_sample", lambda m, *a: (sampled.append(m.name), real_sample(m, *a))[1])
    again = plan_sim.simulate_plan(moved, spec, path, CONFIG, memo=memo)
    assert sampled == []
    assert again == plan_sim.simulate_plan(moved, spec, path, CONFIG)


def test_a_models_result_depends_only_on_its_own_plan(two_models):
    """What lets verification simulate only the models whose plan changed (and models apart): each
    model's simulated result is the same in the whole plan and with the other models' demand gone."""
    from hetinfra.sim.minimal import scaled

    doc, spec, path = two_models
    whole = plan_sim.simulate_plan(doc, spec, path, CONFIG)
    for m in whole["models"]:
        alone = plan_sim.simulate_plan(scaled(doc, {m["model"]: 1.0}), spec, path, CONFIG)
        assert alone["models"] == [m]
        assert alone["units"] == [u for u in whole["units"] if u["model"] == m["model"]]


def test_units_replayed_on_threads_give_the_serial_simulation(two_models, monkeypatch):
    """The units of a simulation run on a thread per core (the core releases the GIL): the result is
    the one-thread result, whatever the threads' timing."""
    doc, spec, path = two_models
    monkeypatch.setattr(core, "cores", lambda: 1)
    serial = plan_sim.simulate_plan(doc, spec, path, CONFIG)
    monkeypatch.setattr(core, "cores", lambda: 8)
    assert plan_sim.simulate_plan(doc, spec, path, CONFIG) == serial
