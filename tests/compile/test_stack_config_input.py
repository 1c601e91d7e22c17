"""OUT/pulumi/<cloud>/Pulumi.<stack>.yaml is the user's (`pulumi config set`, the salt, secrets):
`plan --out` merges its keys into whatever is there. Any text there is merged, keeping the user's
keys, or refused as exit 2 naming OUT's file, with OUT left as it was; never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.compile.pulumi_project import read_stack_config, stack_config
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.conftest import copied_plan

REPO = Path(__file__).resolve().parents[2]
CHAT = REPO / "services" / "chat.yaml"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
#: what a stack config file may hold: YAML of any shape (a config of any type among them), odd text, any bytes
stack_files = st.one_of(
    json_values.map(lambda v: yaml.safe_dump(v).encode()),
    json_values.map(lambda v: yaml.safe_dump({"encryptionsalt": "v1:x", "config": v}).encode()),
    st.text(max_size=60).map(str.encode),
    st.binary(max_size=60),
    st.sampled_from([b"config: {a: [", b"a: &x [*x]", b"config: " + b"[" * 5000, b"\xef\xbb\xbfconfig: {k: v}"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=stack_files)
def test_any_stack_config_is_merged_keeping_its_keys_or_refused(shared_plan, tmp_path_factory, data):
    plan = Plan.parse(json.loads((shared_plan(CHAT, "--no-baselines", "--no-verify") / "plan.json").read_text()))
    path = tmp_path_factory.mktemp("stack") / "Pulumi.prod.yaml"
    path.write_bytes(data)
    try:
        existing = read_stack_config(path)
    except InvalidInputError as exc:
        assert str(path) in exc.message and "\n" not in exc.message
        return
    merged = yaml.safe_load(stack_config(plan, "aws", existing))
    assert merged["config"]["hetinfra:cloud"] == "aws"
    assert {k: v for k, v in merged.items() if k != "config"} == {k: v for k, v in existing.items() if k != "config"}
    kept = {k: v for k, v in (existing.get("config") or {}).items() if not str(k).startswith(("hetinfra:", "aws:"))}
    assert kept.items() <= merged["config"].items()


def test_plan_over_a_broken_stack_config_names_out_and_leaves_it(shared_plan, run_cli, tmp_path):
    out = copied_plan(shared_plan(CHAT, "--no-baselines", "--no-verify"), tmp_path / "out")
    cfg = out / "pulumi" / "aws" / "Pulumi.prod.yaml"
    cfg.write_text("encryptionsalt: v1:x\nconfig: [1, 2]\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, stderr = run_cli("plan", str(CHAT), "--out", str(out), "--no-baselines", "--no-verify")
    assert code == 2, stderr
    assert f"{cfg}: config is a YAML list" in stderr and ".new." not in stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert os.listdir(tmp_path) == ["out"]
