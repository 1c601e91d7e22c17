"""The simulation memo's bound (hetinfra.sim.memo): what it forgets is simulated again to the same
result, it never holds more arrays than its limit, a unit-run keeps only what a later simulation
reads, and a verification whose memo forgets nearly everything writes the same plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hetinfra.sim.memo as memo_mod
import hetinfra.sim.plan_sim as plan_sim
from hetinfra.sim import WorkloadConfig
from hetinfra.sim.memo import Memo, array_bytes
from hetinfra.sim.minimal import without_one_replica
from hetinfra.sim.unit_entry import Measured, kept
from hetinfra.spec.load import load_spec
from tests.plan.golden_plans import GOLDEN, REPO, filled_golden, golden_text, plan_example

CONFIG = WorkloadConfig(requests=300, load=1.1, seed=7)


@pytest.fixture(scope="module")
def europe():
    path = REPO / "services" / "europe.yaml"  # two models, one with a class split over three units
    return filled_golden("europe"), load_spec(path)[0], Path(path)


def test_memo_forgets_least_recently_used_arrays_past_its_limit():
    memo = Memo(limit=3000)
    memo["a"], memo["b"], memo["small"] = np.zeros(125), (np.zeros(125), {"x": np.zeros(125)}), {"entry": 1}
    assert memo.held == 3000 and len(memo) == 3
    assert memo["a"] is not None  # read: now the most recent
    memo["c"] = np.zeros(125)
    assert "b" not in memo and all(k in memo for k in ("a", "c", "small"))
    assert memo.held == 2000
    memo["huge"] = np.zeros(1000)  # alone over the limit: kept by no one, the others go first
    assert "huge" not in memo and "small" in memo and memo.held == 0
    shared = np.zeros(100)
    assert array_bytes((shared, [shared], {"k": shared})) == 800  # an array counts once


def test_a_forgotten_unit_is_simulated_again_to_the_fresh_result(europe, monkeypatch):
    """The trim's path (a replica fewer in one unit, then back) through a memo too small to keep every
    unit-run: each simulation equals a fresh one, the memo stays under its limit, and the unit-runs it
    forgot were simulated again."""
    doc, spec, path = europe
    uid = doc["allocations"][1]["unit"]  # chat-8b's unit of two replicas, beside two others of its model
    fewer = without_one_replica(doc, uid)
    fresh = {id(d): plan_sim.simulate_plan(d, spec, path, CONFIG) for d in (doc, fewer)}
    ran = []
    real_run = plan_sim.simulate_unit
    monkeypatch.setattr(plan_sim, "simulate_unit", lambda reps, reqs, progress=None: (ran.append(len(reqs)),
                                                                                       real_run(reps, reqs, progress)))
    held = []
    memo = Memo(limit=40_000)  # a few unit-runs of 300 requests, not a whole plan's with its draws
    for d in (doc, fewer, doc, fewer, doc):
        assert plan_sim.simulate_plan(d, spec, path, CONFIG, memo=memo) == fresh[id(d)]
        held.append(memo.held)
    assert max(held) <= memo.limit
    assert len(ran) > len(doc["allocations"]) + 1  # more than the first plan and the one changed unit


def test_a_unit_run_keeps_its_measured_requests_in_under_half_the_bytes(europe):
    """The memo keeps of a simulated unit only the columns a later simulation reads, its measured rows
    (after the warm-up), integers narrowed: equal values, under half the 72 bytes a request of the
    full columns takes (and no engine or replicas)."""
    doc, spec, path = europe
    memo: dict = {}
    plan_sim.simulate_plan(doc, spec, path, CONFIG, memo=memo)
    units = [v for v in memo.values() if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], Measured)]
    assert len(units) == len(doc["allocations"])
    warm = int(CONFIG.requests * CONFIG.warmup_fraction)
    for m, _entry in units:
        assert len(m) and (m.rid >= warm).all()
        assert array_bytes(m) < 36 * len(m)
        again = kept(m, warm)  # keeping what is kept changes nothing
        for name in ("rid", "arrival", "first", "finish", "output", "preempted", "cls"):
            assert np.array_equal(getattr(again, name), getattr(m, name))


def test_verification_with_a_memo_that_forgets_nearly_everything_writes_the_same_plan(monkeypatch):
    """Verification's memo is a bounded Memo: at a limit of a few unit-runs (everything else is
    simulated, drawn and routed again) europe's plan is its golden plan byte for byte, and the memo
    never held more than its limit."""
    made: list[Memo] = []
    most, arrays = [0], []  # the most held; (memo, key) of each entry written with arrays
    real_init, real_set = Memo.__init__, Memo.__setitem__

    def init(self, limit=None):
        real_init(self, limit)
        made.append(self)

    def setitem(self, key, value):
        real_set(self, key, value)
        most[0] = max(most[0], self.held)
        if array_bytes(value):
            arrays.append((self, key))

    monkeypatch.setattr(memo_mod, "MEMO_BYTES", 200_000)
    monkeypatch.setattr(Memo, "__init__", init)
    monkeypatch.setattr(Memo, "__setitem__", setitem)
    doc = json.loads(plan_example("europe"))
    assert made and all(m.limit == 200_000 for m in made)
    assert 0 < most[0] <= 200_000
    assert sum(key not in m for m, key in arrays) > len(arrays) // 2  # most were forgotten
    assert golden_text(doc) == (GOLDEN / "europe.json").read_text()
