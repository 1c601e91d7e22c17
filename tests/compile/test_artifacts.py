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
