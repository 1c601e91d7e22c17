"""An error about a spec value is a line a terminal shows: a value or key of thousands of characters
is cut in its middle (where and which field kept, and the rule after it), never printed whole."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text

BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "services" / "chat.yaml").read_text())
#: where a long text goes: string fields of every kind, a list item, a mapping key
PLACES = [("name",), ("models", 0, "name"), ("models", 0, "model"), ("models", 0, "source"),
          ("models", 0, "precision"), ("infrastructure", "gpus", 0), ("infrastructure", "clouds", 0),
          ("planning", "objective"), ("models", 0, "slo", "ttft_ms"), ("models", 0, "demand", "rate_rps")]
#: the longest line (hetinfra.spec.load.MAX_LINE, 300, and a little for what follows the line's value)
LIMIT = 340


def _set(doc, place, value):
    for key in place[:-1]:
        doc = doc[key]
    doc[place[-1]] = value


@settings(max_examples=30, deadline=None)
@given(place=st.sampled_from(PLACES), char=st.sampled_from("ab-9é;"), length=st.integers(400, 6000))
def test_a_long_value_is_refused_in_lines_a_terminal_shows(place, char, length):
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    _set(doc, place, char * length)
    with pytest.raises(InvalidInputError) as err:
        parse_spec_text(yaml.safe_dump(doc, width=10**6), "s.yaml")
    lines = err.value.message.splitlines()
    assert all(len(line) <= LIMIT for line in lines), max(map(len, lines))
    assert lines[0].startswith("s.yaml:")


def test_a_long_unknown_key_too():
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["planning"]["k" * 900] = 1
    with pytest.raises(InvalidInputError) as err:
        parse_spec_text(yaml.safe_dump(doc, width=10**6), "s.yaml")
    assert "unknown field" in err.value.message and len(err.value.message) <= LIMIT
