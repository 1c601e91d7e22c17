"""One validator per value, shared by the spec and plan.json (issue 36): whatever string the spec
loader accepts in a field plan.json carries into a shell-bound section, plan.json's model accepts
too; what it refuses, the SPEC refuses, naming the spec's file and line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from hetinfra.document.base import shell_safety_error
from hetinfra.document.sections import PlanDeploy
from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import load_spec
from hetinfra.spec.models import ServiceSpec

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
BASE["deploy"] = {"target": "kubernetes", "backend_url": "s3://bucket/state",
                  "gateway": {"package": "hetinfra==0.1.0"},
                  "kubernetes": {"clusters": {"aws/us-east-1": {"context": "prod-use1", "node_role": "role-x"}},
                                 "prometheus_url": "http://prom:9090"}}
KEY = object()  # the cluster key itself
FIELDS = [("deploy", "kubernetes", "clusters", KEY), ("deploy", "kubernetes", "clusters", "aws/us-east-1", "context"),
          ("deploy", "kubernetes", "clusters", "aws/us-east-1", "node_role"), ("deploy", "kubernetes", "prometheus_url"),
          ("deploy", "backend_url"), ("deploy", "gateway", "package"), ("models", 0, "name"), ("models", 0, "source")]
TEXT = st.text(alphabet="ab-/.:9()[]{}*?!#~;&|$`\\\"'<> \t\n=,@+%", min_size=1, max_size=12)


def _with(path: tuple, value: str) -> dict:
    doc = copy.deepcopy(BASE)
    node = doc
    for k in path[:-1]:
        node = node[k]
    if path[-1] is KEY:
        node[value] = node.pop("aws/us-east-1")
    else:
        node[path[-1]] = value
    return doc


def _as_planned(spec: ServiceSpec) -> dict:
    """The shell-bound sections plan.json gets from the spec (hetinfra.plan.document copies them)."""
    return {"deploy": spec.deploy.model_dump(mode="json"),
            "models": [{"name": m.name, "source": m.source, "model": m.model} for m in spec.models]}


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.sampled_from(FIELDS), TEXT)
def test_property_plan_json_never_refuses_what_the_spec_accepted(path, value):
    try:
        spec = ServiceSpec.model_validate(_with(path, value))
    except ValidationError:
        return  # refused by the spec: the user is told about the file they wrote
    assert shell_safety_error(_as_planned(spec)) is None
    PlanDeploy.model_validate(spec.deploy.model_dump(mode="json"))  # plan.json's deploy model reads it


@pytest.mark.parametrize("path, value, where", [
    (FIELDS[0], "aws/us-east-1\n", "deploy.kubernetes.clusters"),
    (FIELDS[1], "prod(){}*", "context 'prod(){}*' contains a shell metacharacter"),
    (FIELDS[3], "http://x/(){}*", "prometheus_url 'http://x/(){}*' contains a shell metacharacter"),
    (FIELDS[6], "chat[1]", "name 'chat[1]' contains a shell metacharacter"),
    (FIELDS[6], "-x-chat", "name '-x-chat' starts with '-' (a command line reads it as an option)"),
])
def test_the_spec_names_its_own_line(tmp_path, path, value, where):
    p = tmp_path / "service.yaml"
    p.write_text(yaml.safe_dump(_with(path, value), sort_keys=False))
    with pytest.raises(InvalidInputError, match=r"service.yaml:\d+:\d+: ") as exc:
        load_spec(p)
    assert where in exc.value.message and "plan.json" not in (exc.value.hint or "")


def test_plan_json_refuses_a_command_line_word_starting_with_a_dash():
    """The same rule reads plan.json: an edited model name '-x' would be vLLM's option, not its name."""
    why = shell_safety_error({"models": [{"name": "-x"}]})
    assert why == "models[0].name '-x' starts with '-' (a command line reads it as an option)"
    assert shell_safety_error({"routing": {"m": {"in<=1,out<=1": [{"unit": "-m|aws"}]}}}) is None  # keys, never run


@settings(max_examples=60)
@given(name=st.from_regex(r"\A[a-z0-9-]{1,12}\Z"))
def test_the_service_name_the_spec_accepts_is_one_plan_json_accepts(name):
    """plan.json's reader holds `service` to a DNS label starting with a letter; the spec did not ask
    for the letter, so `name: 9chat` planned and then was refused blaming plan.json."""
    from hetinfra.document.plan import Plan
    from hetinfra.spec.load import parse_spec_text

    text = yaml.safe_dump({**BASE, "name": name})
    try:
        parse_spec_text(text, "s.yaml")
    except InvalidInputError as exc:
        assert exc.message.startswith("s.yaml:") and "name: service name" in exc.message
        with pytest.raises(ValueError):
            Plan._service(name)
        return
    assert Plan._service(name) == name
