"""`simulate` refuses a plan the simulator cannot hold (hetinfra.facts.MAX_SIMULATED_ENGINES), counting
every engine it would build (plan.json's Allocation.engine_count): services/chat.yaml at 1,000,000 req/s
planned 241,032 engines, and simulating it raised a MemoryError."""

from __future__ import annotations

import json
import shutil

import yaml

from tests.plan.test_pipeline_scale import BUNDLES, _chat, _engines


def test_simulate_refuses_a_plan_past_the_engines_it_holds(tmp_path, run_cli, monkeypatch):
    code, _, err = run_cli("plan", str(_chat(tmp_path, 12)), "--out", str(tmp_path / "out"), "--no-verify",
                           "--no-baselines")
    assert code == 0, err
    engines = _engines(json.loads((tmp_path / "out" / "plan.json").read_text()))
    monkeypatch.setattr("hetinfra.sim.plan_load.MAX_SIMULATED_ENGINES", engines - 1)
    code, out, err = run_cli("simulate", str(tmp_path / "out"), "--requests", "2000")
    assert code == 2 and f"the plan runs {engines:,} vLLM engines, more than the simulator holds" in err
    assert "split the service" in err and "Traceback" not in err + out
    monkeypatch.setattr("hetinfra.sim.plan_load.MAX_SIMULATED_ENGINES", engines)
    code, out, err = run_cli("simulate", str(tmp_path / "out"), "--requests", "2000")
    assert code == 0, err
    shutil.rmtree(tmp_path / "out")


def test_a_bundle_counts_its_prefill_engines_as_well_as_its_decode_engines(tmp_path, plan_json, run_cli, monkeypatch):
    """hetinfra.sim.split builds count x each role's engines for a prefill/decode bundle; plan.json's
    engines_per_instance holds the decode role's alone."""
    from hetinfra.document.allocation import Allocation

    plan = plan_json(tmp_path, yaml.safe_load(BUNDLES.read_text()), "--no-baselines")
    allocations = [Allocation.model_validate(a) for a in plan["allocations"]]
    bundles = [a for a in allocations if a.disaggregation is not None]
    assert bundles
    for a in bundles:
        assert a.engine_count == a.count * sum(r.engines for r in a.disaggregation.roles) > a.count * a.engines_per_instance
    engines = sum(a.engine_count for a in allocations)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "plan.json").write_text(json.dumps(plan))
    monkeypatch.setattr("hetinfra.sim.plan_load.MAX_SIMULATED_ENGINES", engines - 1)
    code, out, err = run_cli("simulate", str(tmp_path / "out"), "--requests", "200")
    assert code == 2 and f"the plan runs {engines:,} vLLM engines" in err and "Traceback" not in err + out
