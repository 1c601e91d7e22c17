"""`hetinfra plan` with LoRA adapters (issue 38): placement through the one formulation, plan.json's
``allocations[].adapters``, routing only to holders, and each bad input's exit code through the CLI.
The module's plan (about 5 s: a real solve with adapter rows) is made once per test run (conftest's
shared_plan) for its tests, tests/gateway/test_adapters_live.py and tests/sim/test_plan_lora.py."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import shared_output

SPEC = """\
name: lora
models:
  - name: base-8b
    model: llama-3.1-8b
    source: meta-llama/Llama-3.1-8B-Instruct
    slo: {ttft_ms: 2000, tpot_ms: 100}
    demand:
      rate_rps: 6
      sizes: {classes: [{name: c, input_tokens: 500, output_tokens: 200, share: 1}]}
infrastructure:
  clouds: [aws]
  regions: [us-east-1]
  gpus: [L4, L40S]
  availability:
    - {cloud: aws, region: us-east-1, gpu: L40S, max_gpus: 1}
adapters:
  - {name: sql, base: base-8b, source: org/sql, rank: 16, demand: {share: 0.5}}
  - {name: law, base: base-8b, source: org/law, rank: 8, demand: {share: 0.2}}
  - {name: med, base: base-8b, source: org/med, rank: 32, demand: {rate_rps: 1}}
"""


@pytest.fixture(scope="module")
def planned(shared_plan):
    out = shared_plan(yaml.safe_load(SPEC), "--no-verify", "--no-baselines")  # one plan per run (conftest)
    return json.loads((out / "plan.json").read_text()), shared_output(out), out


def test_every_adapter_is_held_and_its_requests_reach_only_holders(planned):
    plan, _, _ = planned
    holders: dict[str, set[str]] = {}
    for a in plan["allocations"]:
        lo = a.get("adapters")
        if lo:
            assert len(lo["held"]) <= lo["max_loras"] and 0 < lo["derate"] < 1 and lo["slot_memory_gb"] > 0
            # rank-aware: a unit's slot rank holds its adapters' ranks (vLLM pads smaller ones up to it)
            assert all(h["lora_rank"] <= lo["max_lora_rank"] and h["instances"] == a["count"] for h in lo["held"])
            for h in lo["held"]:
                holders.setdefault(h["name"], set()).add(a["unit"])
    assert set(holders) == {"sql", "law", "med"}
    routing = plan["routing"]["base-8b"]
    for cls, entries in routing.items():
        if "~" in cls:
            assert entries and {e["unit"] for e in entries} <= holders[cls.split("~")[1]], cls


def test_adapter_demand_splits_the_base_and_rates_add_to_it(planned):
    plan, _, _ = planned
    model = plan["models"][0]
    rates = {c["name"]: c["rate_rps"] for c in model["classes"]}
    assert rates == pytest.approx({"c": 1.8, "c~sql": 3.0, "c~law": 1.2, "c~med": 1.0})
    assert model["rate_rps"] == pytest.approx(7.0)


def test_the_summary_says_where_each_adapter_lives(planned):
    _, out, _ = planned
    for name in ("sql", "law", "med"):
        assert name in out


@pytest.mark.parametrize("entry, code, words", [
    ("  - {name: x, base: base-13b, source: org/x, demand: {share: 0.1}}\n", 2, "is not a model"),
    ("  - {name: x, base: base-8b, source: org/x, rank: 1024, demand: {share: 0.1}}\n", 2, "above 512"),
    ("  - {name: sql, base: base-8b, source: org/x, demand: {share: 0.1}}\n", 2, "already used"),
    ("  - {name: x, base: base-8b, source: org/x, demand: {share: 0.1}, regions: [eu-west-1]}\n", 3,
     "no unit may hold it"),
])
def test_each_bad_adapter_exits_with_its_code_through_the_cli(tmp_path, run_cli, entry, code, words):
    (tmp_path / "s.yaml").write_text(SPEC + entry)
    got, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert got == code and words in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3, err


def test_artifacts_carry_each_units_adapters_and_litellm_routes_them_to_holders(planned):
    import yaml

    plan, _, out = planned
    for a in plan["allocations"]:
        text = (out / a["skypilot_task"]).read_text()
        lo = a.get("adapters")
        if lo is None:
            assert "--enable-lora" not in text
            continue
        rank = min(r for r in (8, 16, 32, 64) if r >= max(h["lora_rank"] for h in lo["held"]))
        assert f"--enable-lora --max-loras {min(lo['max_loras'], len(lo['held']))} --max-lora-rank {rank}" in text
        assert all(f"{h['name']}={h['source']}" in text for h in lo["held"])
    litellm = yaml.safe_load((out / "router" / "litellm.yaml").read_text())
    holders = {h["name"]: set() for a in plan["allocations"] for h in (a.get("adapters") or {}).get("held", [])}
    for a in plan["allocations"]:
        for h in (a.get("adapters") or {}).get("held", []):
            holders[h["name"]].add(a["deployment_unit"])
    listed = {}
    for e in litellm["model_list"]:
        if e["model_name"] in holders:
            listed.setdefault(e["model_name"], set()).add(e["model_info"]["hetinfra_unit"])
    assert listed == holders


def test_an_adapter_whose_regions_have_no_offer_is_exit_3_at_its_line(tmp_path, run_cli):
    """infrastructure.regions unset: every region is allowed, but none of its residency regions has an
    offer the base can run on (us-west-1 sells H100 and H200, the spec allows L4 and L40S: the spec
    check cannot know; the planner's units do). A region no offer is in is exit 2 at its line, as a
    cap's is (plan.inputs._check_named_places)."""
    spec = SPEC.replace("  regions: [us-east-1]\n", "") + \
        "  - {name: x, base: base-8b, source: org/x, demand: {share: 0.1}, regions: [us-west-1]}\n"
    (tmp_path / "s.yaml").write_text(spec)
    got, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert got == 3 and "s.yaml:19:" in err and "no unit may hold it" in err and "Traceback" not in err, err
    assert "TTFT 2000 ms, TPOT 100 ms" in err and "loosen the base's `slo`" in err, err  # the objective it must meet
    (tmp_path / "s.yaml").write_text(spec.replace("regions: [us-west-1]", "regions: [mars-1]"))
    got, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert got == 2 and "s.yaml:19:" in err and "adapters[3].regions: no allowed offer in region 'mars-1'" in err, err


def test_a_base_with_a_demand_profile_plans_its_adapters_in_every_period(tmp_path, run_cli):
    """A profile and adapters together planned nothing (exit 3, "availability caps are too small" with
    no cap named): the adapter holds had no copy per period. Now every adapter is held, each holder
    runs in every period, and a holder's adapters are those of the unit deployed."""
    spec = SPEC.replace("      rate_rps: 6\n", "      rate_rps: 6\n      profile: [0.5, 1.0, 0.75]\n")
    (tmp_path / "s.yaml").write_text(spec)
    got, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-verify",
                          "--no-baselines")
    assert got == 0, err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    held = {h["name"]: a for a in plan["allocations"] if a.get("adapters") for h in a["adapters"]["held"]}
    assert set(held) == {"sql", "law", "med"}
    assert all(min(a["counts_by_period"]) >= 1 for a in held.values())
