"""plan.json's inputs.spec_path is found from any folder (hetinfra.document.spec_location). It was
written relative to the folder `plan` ran in and `simulate` joined it to the plan's folder: `hetinfra
plan services/chat.yaml --out /tmp/x/chat`, then `cd /tmp && hetinfra simulate /tmp/x/chat` said
"the plan's spec /tmp/x/chat/services/chat.yaml is not found"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hetinfra.document.spec_location import spec_file

REPO = Path(__file__).resolve().parents[2]
FAST = ("--no-verify", "--no-baselines")


def _simulate(run_cli, out: Path):
    return run_cli("simulate", str(out), "--requests", "1000", "--out", str(out / "sim"))


def test_simulate_finds_the_spec_from_another_folder(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    out = tmp_path / "x" / "chat"
    assert run_cli("plan", "services/chat.yaml", "--out", str(out), *FAST)[0] == 0
    stored = json.loads((out / "plan.json").read_text())["inputs"]["spec_path"]
    assert not Path(stored).is_absolute() and (out / stored).resolve() == (REPO / "services" / "chat.yaml").resolve()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, err = _simulate(run_cli, out)
    assert code == 0, err


def test_an_out_folder_moved_with_its_spec_still_finds_it(run_cli, tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    shutil.copy(REPO / "services" / "chat.yaml", project / "specs" / "chat.yaml")
    monkeypatch.chdir(project)
    assert run_cli("plan", "specs/chat.yaml", "--out", "out/chat", *FAST)[0] == 0
    moved = tmp_path / "moved"
    project.rename(moved)
    monkeypatch.chdir(tmp_path)
    code, _, err = _simulate(run_cli, moved / "out" / "chat")
    assert code == 0, err


def test_a_plan_printed_without_out_names_its_spec_absolutely(run_cli, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, _ = run_cli("plan", "services/chat.yaml", "--json", *FAST)
    assert code == 0 and json.loads(out)["inputs"]["spec_path"] == str((REPO / "services" / "chat.yaml").resolve())


def _planned_naming(run_cli, out: Path, stored: str) -> Path:
    """services/chat.yaml planned into ``out`` (from the repository), its spec_path then ``stored``."""
    assert run_cli("plan", "services/chat.yaml", "--out", str(out), *FAST)[0] == 0
    doc = json.loads((out / "plan.json").read_text())
    doc["inputs"]["spec_path"] = stored
    (out / "plan.json").write_text(json.dumps(doc, indent=2))
    return out


def test_an_older_plan_json_is_read_from_where_plan_ran(run_cli, tmp_path, monkeypatch):
    """plan.json files written before: spec_path relative to the folder `plan` ran in."""
    monkeypatch.chdir(REPO)
    code, _, err = _simulate(run_cli, _planned_naming(run_cli, tmp_path / "old", "services/chat.yaml"))
    assert code == 0, err


def test_where_two_places_hold_a_file_the_planned_spec_wins(tmp_path, monkeypatch):
    """An old relative path that names a file both beside plan.json and under the current folder: the
    one whose text is the planned spec's (inputs.spec_sha256), whichever comes first."""
    import hashlib

    spec = (REPO / "services" / "chat.yaml").read_text()
    out, here = tmp_path / "out", tmp_path / "here"
    for folder, text in ((out, "name: a-decoy\n"), (here, spec)):
        (folder / "services").mkdir(parents=True)
        (folder / "services" / "chat.yaml").write_text(text)
    monkeypatch.chdir(here)
    sha = hashlib.sha256(spec.encode()).hexdigest()
    found, looked = spec_file(out / "plan.json", "services/chat.yaml", sha)
    assert found == here / "services" / "chat.yaml" and looked[0] == out / "services" / "chat.yaml"
    assert spec_file(out / "plan.json", "services/chat.yaml", "0" * 64)[0] == out / "services" / "chat.yaml"


def test_a_spec_found_nowhere_says_where_it_looked(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    code, _, err = _simulate(run_cli, _planned_naming(run_cli, tmp_path / "lost", "gone/chat.yaml"))
    assert code == 2 and "'gone/chat.yaml' (inputs.spec_path) is not found" in err and "--spec" in err
