"""The spec loader's messages for a text field that YAML read as a number or a boolean: the message
shows the value as the file spells it and how to quote it (``vllm_version: 0.10`` is the number 0.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text

CHAT = (Path(__file__).resolve().parents[2] / "services" / "chat.yaml").read_text()

#: text fields of the spec, as (YAML block appended to chat.yaml with {v} for the value, dotted field)
TEXT_FIELDS = [
    ("deploy:\n  vllm_version: {v}\n", "deploy.vllm_version"),
    ("deploy:\n  stack: {v}\n", "deploy.stack"),
]

#: spellings YAML 1.1 resolves to numbers or booleans
SPELLINGS = st.one_of(
    st.builds(lambda i, f: f"{i}.{f}0", st.integers(0, 99), st.integers(0, 99)),  # 0.10, 3.50
    st.integers(0, 10**6).map(str),
    st.sampled_from(["yes", "no", "on", "off", "True", "false", "1e3", ".5", "0x1F", "1_000"]),
)


def _located_error(block: str) -> str:
    with pytest.raises(InvalidInputError) as exc:
        parse_spec_text(CHAT + block, "svc.yaml")
    return str(exc.value)


@settings(max_examples=25, deadline=None)
@given(field=st.sampled_from(TEXT_FIELDS), spelled=SPELLINGS)
def test_a_number_where_text_belongs_says_how_to_quote_it(field, spelled):
    block, dotted = field
    assert not isinstance(yaml.safe_load(spelled), str)
    msg = _located_error(block.format(v=spelled))
    assert msg.startswith("svc.yaml:") and f"{dotted}:" in msg
    assert f'quote it, e.g. "{spelled}"' in msg and "\n" not in msg


def test_vllm_version_0_10_is_not_reported_as_0_1_alone():
    msg = _located_error("deploy:\n  vllm_version: 0.10\n")
    assert msg == ('svc.yaml:31:3: deploy.vllm_version: Input should be a valid string; YAML reads the unquoted '
                   '0.10 as a number (0.1): quote it, e.g. "0.10"')


def test_a_quoted_value_passes():
    parse_spec_text(CHAT + 'deploy:\n  vllm_version: "0.10"\n', "svc.yaml")
