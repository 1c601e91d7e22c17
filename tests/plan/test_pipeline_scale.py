"""A plan too large for verification to simulate (hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES) is written
unverified and says why, and `simulate` refuses a plan the simulator cannot hold
(hetinfra.facts.MAX_SIMULATED_ENGINES): services/chat.yaml at 20,000 req/s ended in a MemoryError after
4 min 24 s of verification, at 1,000,000 req/s it was killed, and `simulate` of that plan raised one."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
#: a spec whose plan, as estimated, splits into a heterogeneous prefill/decode bundle
BUNDLES = REPO / "benchmarks" / "specs" / "llama70-hetero-pd.yaml"


def _chat(tmp_path: Path, rate: float) -> Path:
    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["models"][0]["demand"]["rate_rps"] = rate
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _engines(plan: dict) -> int:
    """The engines the simulator builds for ``plan`` (a prefill/decode bundle's prefill engines too)."""
    from hetinfra.document.allocation import Allocation

    return sum(Allocation.model_validate(a).engine_count for a in plan["allocations"])


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


def test_a_bundle_counts_its_prefill_engines_as_well_as_its_decode_engines(tmp_path, plan_json, run_cli, monkeypatch):
    """A prefill/decode bundle's replica runs x prefill and y decode engines and the simulator builds
    all x + y (hetinfra.sim.split); engines_per_instance holds y alone, so counting by it let a plan of
    bundles past the limit into verification (tests/sim/test_plan_load.py: simulate's count)."""
    spec = yaml.safe_load(BUNDLES.read_text())
    plan = plan_json(tmp_path, spec, "--no-baselines")
    assert any(a.get("disaggregation") for a in plan["allocations"])
    decode_only = sum(a["count"] * a["engines_per_instance"] for a in plan["allocations"])
    monkeypatch.setattr("hetinfra.plan.pipeline.MAX_VERIFIED_ENGINES", decode_only)
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = run_cli("plan", str(path), "--out", str(tmp_path / "out"), "--no-baselines")
    assert code == 0, err
    verified = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert verified["fidelity"]["verified"] is False and "vLLM engines" in verified["fidelity"]["reason"]
