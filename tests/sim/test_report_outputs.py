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


def test_a_full_disk_leaves_no_out_folder_behind(tmp_path, monkeypatch):
    """`simulate --out D` with D missing: a write that fails (ENOSPC) leaves no D, empty or not
    (write_outputs made D itself before atomic_write_texts, which removes only the folders it made)."""
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(InvalidInputError, match="cannot write the simulation"):
        write_outputs(DOC, tmp_path / "new" / "D")
    assert list(tmp_path.iterdir()) == []
