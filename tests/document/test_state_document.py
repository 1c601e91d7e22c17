"""state.json's model: ``[]``, ``null`` or a wrong type is a clear exit-2 error naming the file and the
field in every command that reads it (status, apply, destroy, replan); a minimal file gets the
model's defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetinfra.deploy.state import DeployState
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import filled_golden


@pytest.mark.parametrize("doc,where", [
    ([], "(top level) is not a JSON object"), (None, "(top level) is not a JSON object"),
    ({"state_version": 1, "allocations": None}, "allocations"),
    ({"state_version": 1, "endpoints": []}, "endpoints"),
    ({"state_version": 1, "endpoints": {"u": "http://x"}}, "endpoints.u"),
    ({"state_version": 1, "pulumi": {"aws": {"outputs": {}}}}, "pulumi.aws.stack"),
    ({"state_version": 1, "operation": {"kind": "apply"}}, "operation."),
    ({"state_version": 2}, "state_version 2"),
])
def test_a_wrong_state_names_file_and_field(tmp_path, doc, where):
    (tmp_path / "state.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError) as exc:
        DeployState.load(tmp_path)
    assert exc.value.exit_code == 2
    assert f"{tmp_path / 'state.json'}: {where}" in str(exc.value)


def test_a_minimal_state_gets_the_defaults(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"state_version": 1, "service": "chat"}))
    state = DeployState.load(tmp_path)
    assert state.running == [] and state.doc["endpoints"] == {} and state.doc["pulumi"] == {}


@pytest.mark.parametrize("command", [["status"], ["destroy", "--yes"], ["apply", "--yes"]])
@pytest.mark.parametrize("text", ["[]", "null", '{"state_version": 1, "allocations": {"a": 1}}'])
def test_commands_exit_2_on_a_bad_state(tmp_path, run_cli, command, text):
    (tmp_path / "state.json").write_text(text)
    (tmp_path / "plan.json").write_text(json.dumps(filled_golden("chat")))
    code, _, err = run_cli(*command[:1], str(tmp_path), *command[1:])
    assert code == 2, err
    assert "state.json" in err and "Traceback" not in err


@pytest.mark.parametrize("text", ["[]", "null", '{"state_version": 1, "allocations": [{"unit": 3}]}'])
def test_replan_exits_2_on_a_bad_state(tmp_path, run_cli, text):
    (tmp_path / "state.json").write_text(text)
    (tmp_path / "plan.json").write_text(json.dumps(filled_golden("chat")))
    spec = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"
    code, _, err = run_cli("replan", str(spec), "--state", str(tmp_path))
    assert code == 2, err
    assert "state.json" in err and "Traceback" not in err
