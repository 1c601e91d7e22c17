"""simulate's out folder is written whole or not at all (hetinfra.sim.report.write_outputs through
hetinfra.fileio.atomic_write_texts): a path that is not a regular file refuses both files before either
is written."""

from __future__ import annotations

import os

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.sim.report import write_outputs

DOC = {"models": [], "units": [], "met": True}


@pytest.fixture(autouse=True)
def _plain_svg(monkeypatch):
    """The figure's drawing is not this test's subject (tests/sim/test_plan_sim.py draws real ones)."""
    monkeypatch.setattr("hetinfra.sim.report.render_svg", lambda doc: "<svg xmlns='http://www.w3.org/2000/svg'/>")


@pytest.mark.parametrize("blocked", ["simulation.json", "simulation.svg"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_blocked_output_writes_neither_file(tmp_path, blocked, kind):
    path = tmp_path / blocked
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        write_outputs(DOC, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [blocked]


def test_both_files_are_written_where_nothing_blocks_them(tmp_path):
    js, svg = write_outputs(DOC, tmp_path)
    assert js.read_text().startswith("{") and svg.read_text().lstrip().startswith("<")
