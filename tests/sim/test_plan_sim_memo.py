"""The simulator's memo (hetinfra.sim.plan_sim): a simulation that reuses it equals a fresh one, and
a removal re-simulates only the unit that lost a replica and collects only its model."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetinfra.sim.plan_sim as plan_sim
from hetinfra.sim import WorkloadConfig
from hetinfra.sim.minimal import without_one_replica
from hetinfra.spec.load import load_spec
from tests.plan.golden_plans import REPO, filled_golden

CONFIG = WorkloadConfig(requests=300, load=1.1, seed=7)


@pytest.fixture(scope="module")
def two_models():
    path = REPO / "services" / "multi-region.yaml"
    return filled_golden("multi-region"), load_spec(path)[0], Path(path)


def test_memo_gives_the_fresh_simulation_and_reruns_only_the_touched_unit(two_models, monkeypatch):
    doc, spec, path = two_models
    memo: dict = {}
    assert plan_sim.simulate_plan(doc, spec, path, CONFIG, memo=memo) == plan_sim.simulate_plan(doc, spec, path, CONFIG)
    uid = next(a["unit"] for a in doc["allocations"] if a["count"] > 1)
    fewer = without_one_replica(doc, uid)
    ran, drawn = [], []
    real_run, real_draw = plan_sim.run_replicas, plan_sim._draw
    monkeypatch.setattr(plan_sim, "run_replicas", lambda reps, reqs, progress=None: (ran.append(len(reps)),
                                                                                      real_run(reps, reqs, progress)))
    monkeypatch.setattr(plan_sim, "_draw", lambda m, *a: (drawn.append(m["name"]), real_draw(m, *a))[1])
    again = plan_sim.simulate_plan(fewer, spec, path, CONFIG, memo=memo)
    assert len(ran) == 1 and drawn == []  # one unit re-simulated; its model's requests reused
    monkeypatch.setattr(plan_sim, "run_replicas", real_run)
    assert again == plan_sim.simulate_plan(fewer, spec, path, CONFIG)
    # and the untouched model's result came from the memo without running anything
    ran.clear()
    monkeypatch.setattr(plan_sim, "run_replicas", lambda reps, reqs, progress=None: ran.append(1))
    assert plan_sim.simulate_plan(fewer, spec, path, CONFIG, memo=memo) == again and ran == []
