"""Atomic writes: a folder is swapped whole, a file leaves no temporary behind."""

from __future__ import annotations

import json

from hetinfra.fileio import atomic_write_text, replace_dir


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
