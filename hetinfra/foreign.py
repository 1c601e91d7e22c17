"""Whose a file is, by its first line: the guard of a file a flag names to append to or replace
(hetinfra.fileio.open_append, a profile CSV's ``--out``). It imports only hetinfra.errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from hetinfra.errors import InvalidInputError

#: the most of a file's first line :func:`refuse_foreign` reads to tell whose the file is
FIRST_LINE_BYTES = 4096


def first_line(path: str | Path) -> str | None:
    """The first line of the regular file ``path`` (at most FIRST_LINE_BYTES, a BOM dropped, bytes that
    are not UTF-8 replaced), or None where there is no file, it is empty or it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there since: no wait
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, FIRST_LINE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head:
        return None
    return head.decode("utf-8", errors="replace").removeprefix("\ufeff").split("\n", 1)[0].rstrip("\r")


def refuse_foreign(path: str | Path, what: str, ours: Callable[[str], bool], *, doing: str = "replaced",
                   hint: str | None = None) -> None:
    """InvalidInputError naming ``what`` where ``path`` holds another file: its first line fails ``ours``
    (the check of what hetinfra writes there: a header, a prefix). The one guard of a file a flag names
    to append to or replace (hetinfra.fileio.open_append, a profile CSV's ``--out``): `replan --log-file
    OUT/plan.json` appended its log to the plan, `gateway --demand-log OUT/plan.json` its rows, and
    `profile-import r1.json r2.json --out r2.json` replaced a measurement with the CSV. A missing or
    empty file is anyone's; a folder, FIFO or device is left to the writer's own check."""
    line = first_line(path)
    if line is None or ours(line):
        return
    shown_line = line if len(line) <= 60 else line[:57] + "..."
    raise InvalidInputError(f"{what} {path} holds another file (its first line is {shown_line!r}): it is not {doing}",
                            hint=hint or "give a path of its own (a new file), or move that file aside")
