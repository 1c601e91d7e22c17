"""A dataset CSV's first row is a header only when none of its cells reads as a number
(hetinfra.csvtext.looks_like_header): ``512.0,128`` or ``1e3,64`` on line 1 is a request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.demand import histogram_from_dataset
from hetinfra.spec.models import DatasetSizes

DS = DatasetSizes(path="d.csv", input_edges=[0, 10_000], output_edges=[0, 10_000])


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9999), st.integers(0, 9999), st.sampled_from(["{}", "{}.0", "{:e}"])),
                min_size=1, max_size=6), st.booleans())
def test_property_every_data_row_counts_the_first_too(rows, header):
    def cell(n, fmt):
        return fmt.format(float(n)) if fmt == "{:e}" else fmt.format(n)

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        lines = (["input_tokens,output_tokens"] if header else []) + [f"{cell(i, f)},{cell(o, f)}" for i, o, f in rows]
        Path(d, "d.csv").write_text("\n".join(lines) + "\n")
        assert histogram_from_dataset(DS, Path(d)) == [[float(len(rows))]]


def test_a_first_row_with_a_number_among_names_is_a_located_error(tmp_path):
    (tmp_path / "d.csv").write_text("512,many\n1,2\n")
    with pytest.raises(InvalidInputError, match="d.csv:1: column 'output_tokens'"):
        histogram_from_dataset(DS, tmp_path)
