"""state.json's model: ``[]``, ``null`` or a wrong type is a clear exit-2 error naming the file and the
field in every command that reads it (status, apply, destroy, replan); a minimal file gets the
model's defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=st.text(max_size=30) | st.sampled_from(["http://10.0.0.5:8000/v1", "http://[::1]:8080/v1", "1.2.3.4:30001",
                                                   "http://a\x1b[31m", "https://x/v1; rm -rf /", "http://a b"]),
       where=st.sampled_from(["endpoints", "gateways"]))
def test_an_address_is_one_word_status_can_print_or_refused(tmp_path_factory, url, where):
    """`status` prints the endpoints and gateways of state.json, and the launch lines users copy carry
    them: an escape sequence reached the terminal, '; rm -rf /' a copied command."""
    from hetinfra.document.state import load_state
    from hetinfra.errors import InvalidInputError

    path = tmp_path_factory.mktemp("s") / "state.json"
    value = {"u": [url]} if where == "endpoints" else {"g": url}
    path.write_text(json.dumps({"state_version": 1, where: value}))
    try:
        doc = load_state(path)
    except InvalidInputError as exc:
        assert exc.message.startswith(f"{path}: {where}.")
        return
    assert url.isprintable() and not any(c.isspace() for c in url) and not set(url) & set(";&$`\\\"'")
    assert (doc[where]["u"][0] if where == "endpoints" else doc[where]["g"]) == url
