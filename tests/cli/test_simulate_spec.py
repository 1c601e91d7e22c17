"""`hetinfra simulate` against a spec edited after planning: the simulation checks plan.json's own
objectives and demand, so it says so, names what differs, and `--check` fails (exit 13) unless
`--plan-promise` (a tighter TPOT passed as 'objectives met', exit 0, against the old 120 ms)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetinfra.sim.check import SPEC_CHANGED


@pytest.fixture(scope="module")
def chat(example_plans):
    out, _doc, _text, spec = example_plans["chat"]
    return out, Path(spec)


def _edited(spec: Path, tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = spec.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "edited.yaml"
    path.write_text(text)
    return path


def test_check_of_a_spec_with_a_tighter_slo_fails_with_its_own_code(chat, tmp_path, run_cli):
    out, spec = chat
    tight = _edited(spec, tmp_path, ("tpot_ms: 120", "tpot_ms: 70"))
    args = ("simulate", str(out), "--spec", str(tight), "--requests", "1500", "--out", str(tmp_path))
    code, _, err = run_cli(*args, "--check")
    assert code == SPEC_CHANGED == 13, err
    assert "objectives of chat-8b: tpot_ms 120 -> 70" in err and "plan.json's own objectives" in err
    assert "--plan-promise" in err
    code, _, err = run_cli(*args, "--check", "--plan-promise")
    assert code == 0, err  # the plan's own promise (TPOT <= 120) is met, and said to be what was checked
    assert "checks the plan's promise" in err
    code, out_json, err = run_cli(*args, "--json")
    assert code == 0 and "warning: the spec" in err  # without --check: a warning, not a failure
    drift = json.loads(out_json)["spec_changed"]
    assert drift["differs"] == ["objectives of chat-8b: tpot_ms 120 -> 70"] and drift["spec_file"] == str(tight)


def test_the_spec_plan_json_names_edited_in_place_is_compared_too(chat, example_plans, tmp_path, run_cli):
    out, spec = chat
    edited = _edited(spec, tmp_path, ("rate_rps: 12", "rate_rps: 36"), ("name: chat\n", "name: chat-two\n"))
    doc = json.loads(json.dumps(example_plans["chat"][1]))
    doc["inputs"]["spec_path"] = str(edited)  # where the plan finds its spec: now edited
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    code, _, err = run_cli("simulate", str(tmp_path / "plan.json"), "--check", "--requests", "1500",
                           "--out", str(tmp_path))
    assert code == 13, err
    assert "name: 'chat' -> 'chat-two'" in err and "demand of chat-8b: rate_rps 12 -> 36" in err


def test_a_spec_changed_elsewhere_only_is_still_a_changed_spec(chat, tmp_path, run_cli):
    out, spec = chat
    other = _edited(spec, tmp_path, ("spot: false", "spot: true"))
    code, _, err = run_cli("simulate", str(out), "--spec", str(other), "--check", "--requests", "1500",
                           "--out", str(tmp_path))
    assert code == 13 and "no difference found in its name or its models' slo and demand" in err


def test_the_planned_spec_checks_as_before(chat, tmp_path, run_cli):
    out, spec = chat
    code, out_json, err = run_cli("simulate", str(out), "--spec", str(spec), "--check", "--requests", "1500",
                                  "--out", str(tmp_path), "--json")
    assert code == 0 and "warning: the spec" not in err
    assert "spec_changed" not in json.loads(out_json)


def test_every_example_read_against_its_own_spec_differs_in_nothing(example_plans):
    # the comparison reads plan.json as planning writes it (rates at a profile's peak, adapters' own
    # rates added, classes from sizes): against the spec each plan was made from it finds nothing
    from hetinfra.document import load_plan
    from hetinfra.sim.spec_drift import _differences
    from hetinfra.spec.load import load_spec

    for name in example_plans.names():
        out, _doc, _text, spec_path = example_plans[name]
        spec, _, _ = load_spec(spec_path)
        assert _differences(load_plan(Path(out) / "plan.json"), spec, Path(spec_path)) == [], name
