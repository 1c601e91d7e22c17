"""OUT/.replan.lock is a regular file replan creates; whatever else sits at that path (a folder, a
FIFO, a link, which a run would follow out of OUT) is exit 2 naming it, never a traceback, and the
holder a locked run names is read whatever bytes the file holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.replan.safe import LOCK, replan_lock

NODES = {
    "folder": lambda p: p.mkdir(),
    "fifo": lambda p: os.mkfifo(p),
    "dangling link": lambda p: p.symlink_to(p.parent / "nowhere" / "x"),
    "link to a file": lambda p: p.symlink_to(Path(__file__)),
    "link to a folder": lambda p: p.symlink_to(p.parent),
}


@pytest.mark.parametrize("node", sorted(NODES))
def test_anything_but_a_regular_file_at_the_lock_is_refused_naming_it(tmp_path, node):
    NODES[node](tmp_path / LOCK)
    with pytest.raises(InvalidInputError, match=f"replan lock {tmp_path / LOCK}"):
        with replan_lock(tmp_path):
            pass


def test_a_lock_file_of_any_bytes_is_taken_and_rewritten(tmp_path):
    (tmp_path / LOCK).write_bytes(b"\xff\xfe\x00garbage")
    with replan_lock(tmp_path):
        assert (tmp_path / LOCK).read_text().startswith(f"pid {os.getpid()} since ")
