"""hetinfra.errors: the "did you mean" hint every reader of names gives (GPUs, clouds, regions, keys)."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from hetinfra.catalog.gpus import GPUS
from hetinfra.errors import closest, did_you_mean


def test_a_name_in_another_case_is_the_suggestion():
    """By edit distance alone 'l4' was nearer 'T4' and 'h100' nearer 'V100'."""
    assert did_you_mean("l4", sorted(GPUS)) == "did you mean 'L4'?"
    assert did_you_mean("h100", sorted(GPUS)) == "did you mean 'H100'?"
    assert did_you_mean("a100-80gb", sorted(GPUS)) == "did you mean 'A100-80GB'?"


#: names as they are written here: GPUs, clouds, regions, keys
NAME = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=12)


@given(st.lists(NAME, min_size=1, max_size=20), st.data())
def test_any_choice_typed_in_another_case_is_found(choices, data):
    choice = data.draw(st.sampled_from(choices))
    typed = data.draw(st.sampled_from([choice.lower(), choice.upper(), choice.swapcase()]))
    assert closest(typed, choices).casefold() == choice.casefold()
