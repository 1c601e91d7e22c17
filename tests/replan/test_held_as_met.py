"""A move forced by the new plan's cost alone, held where the running fleet still meets
(hetinfra.plan.still_meets judges it; hetinfra.replan.diff.held_as_met records it)."""

from __future__ import annotations

from hetinfra.replan.diff import FORCED, HOLD, Decision, held_as_met


def test_a_forced_move_held_says_why_and_keeps_its_other_triggers():
    d = Decision(FORCED, [], 10.0, 10.0, 11.0, ["L40S price up", "the running fleet no longer meets the demand or "
                                                                 "caps; the new plan costs more"], costlier=True)
    held = held_as_met(d, "the running fleet still meets")
    assert held.kind == HOLD and held.note == "the running fleet still meets" and held.triggers == ["L40S price up"]


def test_a_unit_the_spec_no_longer_allows_is_moved_not_held(example_plans, tmp_path, run_cli):
    """The running fleet may still meet its latency, but a spec that drops its GPU (or its cloud, or its
    variant) asks for the move: only a move forced by cost alone among units the spec still allows is held
    (the review of this stop: chat.yaml without L40S read 'no change worth making', every cron run)."""
    import shutil

    import yaml

    from tests.plan.golden_plans import REPO

    out = shutil.copytree(example_plans["chat"][0], tmp_path / "out")
    doc = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    assert "L40S" in doc["infrastructure"]["gpus"] and any(a["gpu"] == "L40S" for a in example_plans["chat"][1]["allocations"])
    doc["infrastructure"]["gpus"] = [g for g in doc["infrastructure"]["gpus"] if g != "L40S"]
    spec = tmp_path / "chat.yaml"
    spec.write_text(yaml.safe_dump(doc))
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--no-refresh", "--json")
    import json

    d = json.loads(stdout)
    assert code == 10 and d["summary"].startswith("forced move"), stdout + err
    assert any("the spec no longer allows it" in t for t in d["decision"]["triggers"]), d["decision"]["triggers"]


def test_a_lora_tier_unit_is_allowed_where_its_base_unit_is():
    """LoRA tier units (``<template>+lora<k>[r<rank>]|region|purchase``) are made and pruned per solve: a
    running tier missing from this solve is still allowed where its base unit is (lora-50, planned and
    re-planned unchanged, read 'the spec no longer allows it' for four running tiers)."""
    from types import SimpleNamespace

    from hetinfra.replan.diff import still_allowed

    unit = lambda uid: SimpleNamespace(id=uid)  # noqa: E731
    result = SimpleNamespace(all_units=[unit("m|aws|g6e.xlarge|tp1x1|us-east-1|ondemand")],
                             problem=SimpleNamespace(units=[unit("m|aws|g6e.xlarge|tp1x1+lora64|us-east-1|ondemand")]))
    assert still_allowed("m|aws|g6e.xlarge|tp1x1+lora16|us-east-1|ondemand", result)
    assert still_allowed("m|aws|g6e.xlarge|tp1x1+lora8r64|us-east-1|ondemand", result)
    assert still_allowed("m|aws|g6e.xlarge|tp1x1+lora64|us-east-1|ondemand", result)
    assert not still_allowed("m|aws|g6e.xlarge|tp1x1+lora16|us-west-2|ondemand", result)  # another region
    assert not still_allowed("m|aws|g5.xlarge|tp1x1|us-east-1|ondemand", result)
