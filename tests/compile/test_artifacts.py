"""Artifacts are replaced whole: stale tasks disappear; --out must be a directory."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_replan_into_same_out_removes_stale_tasks(tmp_path, run_cli):
    out = tmp_path / "out"
    (out / "skypilot").mkdir(parents=True)
    (out / "skypilot" / "stale-unit.yaml").write_text("old")
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-baselines",
                           "--no-verify")  # the out folder is the point here, not verification
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(p.name for p in (out / "skypilot").iterdir()) == sorted(
        Path(a["skypilot_task"]).name for a in plan["allocations"])


def test_out_must_be_a_directory(tmp_path, run_cli):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(f), "--no-baselines")
    assert code == 2 and "is a file" in err


def test_expand_stages_gives_models_for_models_and_dicts_for_dicts():
    import copy

    from hetinfra.compile.artifacts import expand_stages
    from hetinfra.document import Plan
    from hetinfra.document.plan import DUMP
    from tests.document.test_plan_document import PLANS, mixed

    doc = mixed(copy.deepcopy(PLANS["chat"]))
    state_dicts = [dict(a, path="pulumi") for a in doc["allocations"]]  # state.json's allocations carry a path
    typed = expand_stages(Plan.parse(doc).allocations)
    as_dicts = expand_stages(state_dicts)
    assert len(typed) == len(as_dicts) == len(doc["allocations"]) + 1  # the mixed one: a group per stage
    assert [dict(g.model_dump(**DUMP), path="pulumi") for g in typed] == as_dicts
    assert expand_stages(state_dicts[1:]) == state_dicts[1:]  # others as they are
