"""Artifacts are replaced whole: stale tasks disappear, plan.json is complete JSON."""

from __future__ import annotations

import json
from pathlib import Path

from hetinfra.artifacts import atomic_write_text, replace_dir

REPO = Path(__file__).resolve().parents[1]


def test_replace_dir_swaps_contents(tmp_path):
    target = tmp_path / "skypilot"
    replace_dir(target, {"a.yaml": "1", "b.yaml": "2"})
    replace_dir(target, {"c.yaml": "3"})
    assert sorted(p.name for p in target.iterdir()) == ["c.yaml"]
    assert [p.name for p in tmp_path.iterdir()] == ["skypilot"]  # no staging or old folders left


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write_text(tmp_path / "plan.json", "{}")
    atomic_write_text(tmp_path / "plan.json", '{"a": 1}')
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]
    assert json.loads((tmp_path / "plan.json").read_text()) == {"a": 1}


def test_replan_into_same_out_removes_stale_tasks(tmp_path, run_cli):
    out = tmp_path / "out"
    (out / "skypilot").mkdir(parents=True)
    (out / "skypilot" / "stale-unit.yaml").write_text("old")
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-baselines")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(p.name for p in (out / "skypilot").iterdir()) == sorted(
        Path(a["skypilot_task"]).name for a in plan["allocations"])


def test_out_must_be_a_directory(tmp_path, run_cli):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(f), "--no-baselines")
    assert code == 2 and "is a file" in err
