"""A plan's LoRA units in the plan simulator (issue 38 point 2): verification runs them on sim.lora (requests
carrying their adapter, the slots' memory out of the KV cache, every batch with adapters m times slower),
so a unit with adapters is at least the slowdown slower than the same unit simulated as a base engine (a planted fault: the
adapters section dropped, as if the hook were gone)."""

from __future__ import annotations

import json

import pytest
import yaml

from hetinfra.sim.plan_sim import simulate_plan
from hetinfra.sim.workload import WorkloadConfig
from hetinfra.spec.load import load_spec
from tests.plan.test_adapter_plan import SPEC


@pytest.fixture(scope="module")
def planned(shared_plan):
    out = shared_plan(yaml.safe_load(SPEC), "--no-verify", "--no-baselines")  # tests/plan/test_adapter_plan.py's
    return json.loads((out / "plan.json").read_text()), out.parent / "service.yaml"


def tpot_p50(plan: dict, spec_path) -> dict[str, float]:
    spec, _, _ = load_spec(spec_path)
    out = simulate_plan(plan, spec, spec_path, WorkloadConfig(requests=1500))
    return {u["unit"]: u["tpot_ms"]["p50"] for u in out["units"] if u["count"]}


def test_lora_units_run_slower_than_their_base_engine(planned):
    """At the same routed traffic every step is m times slower, and batches grow with it: at least m."""
    plan, spec_path = planned
    lora = tpot_p50(plan, spec_path)
    base = tpot_p50(dict(plan, allocations=[{k: v for k, v in a.items() if k != "adapters"}
                                            for a in plan["allocations"]]), spec_path)
    for a in plan["allocations"]:
        if a.get("adapters") and a["unit"] in lora:
            ratio = lora[a["unit"]] / base[a["unit"]]
            assert ratio > 0.95 * a["adapters"]["slowdown"], (a["unit"], ratio)


def test_a_plan_of_lora_units_only_replays_its_replications_and_units_in_turn(planned, shared_plan, monkeypatch):
    """Its units replay on the Python loop, so threads would only contend for the GIL: no thread is
    started (a planted pool fails), and each replication is what a simulation of its seed alone gives.
    A plan with a unit the compiled core runs (the same without adapters; tests/plan/test_adapter_plan's,
    which has a base unit) keeps its threads."""
    from dataclasses import replace

    from hetinfra.document.simulation import SimPlan
    from hetinfra.sim import core, replications
    from tests.plan.test_held_everywhere import SHARES, SPEC as EVERYWHERE

    adapters = "\n".join(f"  - {{name: a{i}, base: b, source: org/a{i}, rank: 16, demand: {{share: {s}}}}}"
                         for i, s in enumerate(SHARES))
    out = shared_plan(yaml.safe_load(EVERYWHERE % (adapters, "everywhere")), "--no-verify", "--no-baselines")
    plan, spec_path = json.loads((out / "plan.json").read_text()), out.parent / "service.yaml"
    spec, _, _ = load_spec(spec_path)
    base = dict(plan, allocations=[{k: v for k, v in a.items() if k != "adapters"} for a in plan["allocations"]])
    assert core.python_only(SimPlan.of(plan).allocations) and not core.python_only(SimPlan.of(base).allocations)
    assert not core.python_only(SimPlan.of(planned[0]).allocations)
    config, seeds = WorkloadConfig(requests=1500), [1000, 1003]
    alone = [simulate_plan(plan, spec, spec_path, replace(config, seed=s), detail=False) for s in seeds]

    def no_threads(*args, **kw):
        raise AssertionError("a thread pool for work the Python loop does alone")

    monkeypatch.setattr(core, "cores", lambda: 2)  # threads where there are cores (a pinned xdist worker has one)
    asked = []  # the units' map_units(threads=...) of each simulation: off where every unit is LoRA
    real_map = core.map_units
    monkeypatch.setattr(core, "map_units", lambda fn, items, threads=True: asked.append(threads) or
                        real_map(fn, items, threads))
    simulate_plan(planned[0], load_spec(planned[1])[0], planned[1], config, detail=False)
    assert asked[0] is True  # the mixed plan: threads for its units
    asked.clear()
    monkeypatch.setattr(core, "ThreadPoolExecutor", no_threads)  # replications' threads are core.map_units' too
    assert replications.simulate_replications(plan, spec, spec_path, config, seeds) == alone
    assert asked and asked[0] is False  # the units of each replication in turn too
    with pytest.raises(AssertionError, match="thread pool"):
        if core.available():
            replications.simulate_replications(base, spec, spec_path, config, seeds)
        else:
            raise AssertionError("thread pool (no compiled core here: nothing runs on threads)")
