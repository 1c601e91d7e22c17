"""A plan too large for verification to simulate (hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES) is written
unverified and says why, and `simulate` refuses a plan the simulator cannot hold
(hetinfra.facts.MAX_SIMULATED_ENGINES): services/chat.yaml at 20,000 req/s ended in a MemoryError after
4 min 24 s of verification, at 1,000,000 req/s it was killed, and `simulate` of that plan raised one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _chat(tmp_path: Path, rate: float) -> Path:
    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["models"][0]["demand"]["rate_rps"] = rate
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _engines(plan: dict) -> int:
    return sum(a["count"] * a["engines_per_instance"] for a in plan["allocations"])


def test_a_plan_past_the_engines_verification_simulates_is_written_unverified_saying_why(tmp_path, run_cli,
                                                                                         monkeypatch):
    monkeypatch.setattr("hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES", 3)  # chat at 12 req/s starts at 4+
    code, out, err = run_cli("plan", str(_chat(tmp_path, 12)), "--out", str(tmp_path / "out"), "--no-baselines")
    assert code == 0, err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["fidelity"]["verified"] is False and "vLLM engines, more than verification simulates (3)" in \
        plan["fidelity"]["reason"]
    assert any("it was not verified" in w for w in plan["warnings"]) and "it was not verified" in out + err
    assert _engines(plan) > 3


def test_a_plan_within_it_is_verified(tmp_path, run_cli, monkeypatch):
    monkeypatch.setattr("hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES", 1_000)
    code, out, err = run_cli("plan", str(_chat(tmp_path, 12)), "--out", str(tmp_path / "out"), "--no-baselines")
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["fidelity"]["verified"] is True


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
    """A prefill/decode bundle's replica runs x prefill and y decode engines and the simulator builds
    all x + y (hetinfra.sim.split); engines_per_instance holds y alone, so counting by it let a plan of
    bundles past the limit into verification."""
    from hetinfra.document.allocation import Allocation
    spec = yaml.safe_load((REPO / "benchmarks" / "specs" / "llama70-hetero-pd.yaml").read_text())  # splits
    plan = plan_json(tmp_path, spec, "--no-baselines")
    bundles = [Allocation.model_validate(a) for a in plan["allocations"] if a.get("disaggregation")]
    assert bundles
    for a in bundles:  # the pools hetinfra.sim.split builds: count x each role's engines
        assert a.engine_count == a.count * sum(r.engines for r in a.disaggregation.roles) > a.count * a.engines_per_instance
    engines = sum(Allocation.model_validate(x).engine_count for x in plan["allocations"])
    (tmp_path / "out0").mkdir()
    (tmp_path / "out0" / "plan.json").write_text(json.dumps(plan))
    monkeypatch.setattr("hetinfra.sim.plan_load.MAX_SIMULATED_ENGINES", engines - 1)
    code, out, err = run_cli("simulate", str(tmp_path / "out0"), "--requests", "200")
    assert code == 2 and f"the plan runs {engines:,} vLLM engines" in err
    decode_only = sum(a.count * a.engines_per_instance for a in (Allocation.model_validate(x) for x in plan["allocations"]))
    monkeypatch.setattr("hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES", decode_only)
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = run_cli("plan", str(path), "--out", str(tmp_path / "out"), "--no-baselines")
    assert code == 0, err
    verified = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert verified["fidelity"]["verified"] is False and "vLLM engines" in verified["fidelity"]["reason"]
