"""A union field's error (hetinfra.errors.union_errors, real_keys with the document's model): one line
naming the file's own keys, never pydantic's member class names or the error of a member that only
refused the input's type (an `architecture:` block missing head_dim is not "Input should be a valid string")."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text

SPEC = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"
ARCH = {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "params": 8e9}


def _error(model_update: dict, demand_update: dict | None = None) -> str | None:
    doc = yaml.safe_load(SPEC.read_text())
    m = doc["models"][0]
    m.pop("model")
    m.update({"architecture": ARCH, **model_update})
    m["demand"].update(demand_update or {})
    try:
        parse_spec_text(yaml.safe_dump(doc, sort_keys=False), "svc.yaml")
    except InvalidInputError as exc:
        return exc.message
    return None


def test_a_block_missing_a_key_is_one_line_naming_it():
    arch = {k: v for k, v in ARCH.items() if k != "head_dim"}
    msg = _error({"architecture": arch})
    assert msg.endswith("missing required field 'models[0].architecture.head_dim'") and "\n" not in msg


def test_a_value_no_member_takes_says_what_the_union_takes():
    assert _error({"architecture": 5}).endswith("models[0].architecture: expected a mapping or a string (got 5)")


def test_a_string_member_s_own_error_stands_alone():
    assert _error({"architecture": ""}).endswith("models[0].architecture: a path must be 1-4096 printable characters")


def test_another_union_benefits_and_a_key_spelt_like_a_class_stays():
    msg = _error({}, {"origins": {"OriginSpec": {"share": "x"}}})
    assert "models[0].demand.origins.OriginSpec.share: Input should be a valid number (got 'x')" in msg
    assert "\n" not in msg and "constrained-float" not in msg


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(), st.booleans(), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.sampled_from(sorted(ARCH) + ["bogus"]), st.integers(-2, 300), max_size=6)))
def test_any_wrong_architecture_is_reported_without_member_names(value):
    msg = _error({"architecture": value})
    if msg is None:  # a dict that happens to be a consistent architecture: nothing to report
        return
    assert "ArchitectureSpec" not in msg and "function-after" not in msg and "valid string" not in msg
    assert "models[0].architecture" in msg
