"""The spec loader's messages for a text field that YAML read as a number or a boolean: the message
shows the value as the file spells it and how to quote it (``vllm_version: 0.10`` is the number 0.1);
and for a number field that YAML 1.1 read as text (``rate_rps: 1e3`` is the string '1e3')."""

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
    st.sampled_from(["yes", "no", "on", "off", "True", "false", "1.0e+3", ".5", "0x1F", "1_000"]),
)


def _located_error(block: str) -> str:
    return _error_of(CHAT + block)


def _error_of(text: str) -> str:
    with pytest.raises(InvalidInputError) as exc:
        parse_spec_text(text, "svc.yaml")
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


#: number fields of the spec, as (chat.yaml's text with {v} for the value, dotted field, the field's range)
NUMBER_FIELDS = [
    ("rate_rps: 12", "rate_rps: {v}", "models[0].demand.rate_rps", (0.001, 1e6)),
    ("headroom: 0.1", "headroom: {v}", "planning.headroom", (0.0, 0.99)),
    ("  headroom: 0.1\n", "  headroom: 0.1\n  max_nodes_per_template: {v}\n", "planning.max_nodes_per_template", (1, 8)),
]


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(NUMBER_FIELDS), mantissa=st.integers(1, 9), exponent=st.integers(-300, 300),
       upper=st.booleans())
def test_a_yaml_1_1_exponent_where_a_number_belongs_says_how_to_write_it(field, mantissa, exponent, upper):
    """``1e3`` is a number to Python and to YAML 1.2 but text to YAML 1.1: the message says so and
    gives a spelling YAML reads as the same number; with it the file loads where the number is in
    the field's range (else the range error is what remains)."""
    old, new, dotted, (lo, hi) = field
    spelled = f"{mantissa}{'E' if upper else 'e'}{exponent}"
    assert isinstance(yaml.safe_load(spelled), str)
    msg = _error_of(CHAT.replace(old, new.format(v=spelled)))
    assert msg.startswith("svc.yaml:") and f"{dotted}:" in msg and "\n" not in msg
    fix = msg.rsplit("write ", 1)[1]
    assert "YAML 1.1 reads" in msg and yaml.safe_load(fix) == float(spelled)
    if lo <= float(spelled) <= hi:
        parse_spec_text(CHAT.replace(old, new.format(v=fix)), "svc.yaml")


#: decimal digits of other scripts (Arabic-Indic, Devanagari, fullwidth, Thai): Python's float() reads them
_SCRIPTS = ["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "๐๑๒๓๔๕๖๗๘๙"]


@given(number=st.one_of(st.integers(1, 10**6).map(str),
                        st.tuples(st.integers(0, 999), st.integers(1, 99)).map(lambda p: f"{p[0]}.{p[1]}")),
       script=st.sampled_from(_SCRIPTS), quoted=st.booleans())
def test_a_number_in_another_scripts_digits_is_refused_saying_what_to_write(number, script, quoted):
    """`rate_rps: '１２'` was refused with "YAML 1.1 reads １２ as text, not a number (an exponent needs a
    dot and a sign there)": the reason was another case's. It now says the digits are another script's
    and what to write, the number in ASCII digits."""
    from hetinfra.spec.load import parse_spec_text

    written = number.translate(str.maketrans("0123456789", script))
    text = CHAT.replace("rate_rps: 12", f"rate_rps: {chr(39) + written + chr(39) if quoted else written}")
    with pytest.raises(InvalidInputError) as refused:
        parse_spec_text(text, "s.yaml")
    message = refused.value.message
    assert message.startswith("s.yaml:11:7: models[0].demand.rate_rps:") and "exponent" not in message, message
    assert message.endswith(f"is written with digits of another script, which YAML reads as text: write "
                            f"{number}"), message


#: lines of chat.yaml after which a key of the same mapping may go, with that mapping's indent
KEY_PLACES = [("name: chat", ""), ("  spot: false", "  "), ("      rate_rps: 12", "      "), ("  headroom: 0.1", "  ")]

#: key spellings YAML reads as something other than text: numbers, booleans, null, dates
KEY_SPELLINGS = st.one_of(
    st.integers(0, 10**6).map(str), st.floats(0.5, 1e6).map(lambda f: f"{f:.2f}"),
    st.sampled_from(["yes", "no", "on", "off", "true", "False", "null", "~", "2026-01-01", "0x10", "1_000"]))


@settings(max_examples=40, derandomize=True, deadline=None)
@given(place=st.sampled_from(KEY_PLACES), spelled=KEY_SPELLINGS)
def test_a_key_yaml_reads_as_no_text_is_named_at_its_line(place, spelled):
    """A mapping key YAML reads as a number, a boolean, null or a date (``1:``, ``on:``, ``~:``,
    ``2026-01-01:``), in any mapping of the spec, is refused at its own line, as written, with how to quote
    it: the error had been put at the mapping's first key (``s.yaml:3:1: [1]: Keys should be strings`` of a
    ``1:`` at line 30; ``infrastructure[1]`` of an ``on:``), looked for under the key's text."""
    after, indent = place
    lines = CHAT.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.rstrip("\n") == after) + 1
    text = "".join(lines[:at] + [f"{indent}{spelled}: 3\n"] + lines[at:])
    message = _error_of(text)
    assert message.startswith(f"svc.yaml:{at + 1}:{len(indent) + 1}: "), message
    assert f"the key {spelled} is read as" in message and "not text" in message, message
