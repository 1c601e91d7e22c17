"""document.load.describe: a wrong value is shown in a bounded form (a list or object by kind and
size, a long scalar cut), so every refusal of plan.json and state.json stays a one- or two-line
message whatever the value is. A hand-edited state.json whose live.units was a list printed the whole
list (thousands of characters on one line)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.document.load import SHOWN_CHARS, describe
from hetinfra.document.state import State

values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=400),
                      lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=20), inner,
                                                                                   max_size=12), max_leaves=40)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["allocations", "endpoints", "pulumi", "live", "service", "images"]), values)
def test_a_wrong_value_anywhere_is_shown_bounded(field, value):
    doc = {"state_version": 1, field: value}
    try:
        State.model_validate(doc)
    except ValidationError as exc:
        msg = describe(exc)
        assert "\n" not in msg and len(msg) <= 2 * SHOWN_CHARS + 200, msg


def test_a_section_of_the_wrong_shape_is_named_by_kind_and_size():
    units = [{"unit": f"u{i}", "desired": 3, "live": 2, "notes": ["x" * 50]} for i in range(5)]
    try:
        State.model_validate({"state_version": 1, "live": {"units": units}})
    except ValidationError as exc:
        assert describe(exc) == "live.units is a list of 5 entries: input should be a valid dictionary"
    else:
        raise AssertionError("accepted " + json.dumps(units)[:80])


@settings(max_examples=80, derandomize=True, deadline=None)
@given(st.text(max_size=60))
def test_any_key_of_a_wrong_entry_is_named_on_one_printable_line(key):
    """Property: whatever key a hand-edited file holds (a newline, quotes, a dot, a space, none at
    all), the location names it in one printable, bounded line. `endpoints: {"\\n": null}` printed a
    raw newline inside the location (found by the test above on a random seed)."""
    try:
        State.model_validate({"state_version": 1, "endpoints": {key: None}})
    except ValidationError as exc:
        msg = describe(exc)
        assert msg.isprintable() and len(msg) <= 2 * SHOWN_CHARS + 200, msg
        assert msg.startswith("endpoints.") or msg.startswith("endpoints["), msg
    else:
        raise AssertionError(f"accepted endpoints {key!r}: null")


def test_a_key_that_starts_like_a_type_tag_is_kept_in_the_location():
    """pydantic's branch tags (``str``, ``function-after[...]``) are dropped from a location, a key of
    the file that merely starts like one is not: the old prefix test dropped ``stream``."""
    from hetinfra.errors import dotted
    assert dotted(["endpoints", "stream", 0]) == "endpoints.stream[0]"
    assert dotted(["live", "function-after[check(), union[a,b]]", "str", "units"]) == "live.units"
    assert dotted(["endpoints", "\n"]) == "endpoints['\\n']"


@settings(max_examples=20, deadline=None)
@given(digits=st.integers(101, 6000), line=st.integers(0, 5))
def test_an_integer_of_too_many_digits_is_located_not_pythons_limit(tmp_path_factory, digits, line):
    """A 5000-digit integer in plan.json leaked Python's `use sys.set_int_max_str_digits()` advice; any
    JSON file hetinfra reads refuses an integer over MAX_INT_DIGITS digits at its line and column."""
    import pytest

    from hetinfra.document import load_plan
    from hetinfra.errors import InvalidInputError

    path = tmp_path_factory.mktemp("big") / "plan.json"
    path.write_text("{" + "\n" * line + ' "plan_version": ' + "9" * digits + "}")
    with pytest.raises(InvalidInputError) as exc:
        load_plan(path)
    text = str(exc.value)
    column = 18 + (line == 0)  # after '{' on the first line
    assert f"line {line + 1} column {column}: an integer of {digits:,} digits" in text and "sys." not in text, text
