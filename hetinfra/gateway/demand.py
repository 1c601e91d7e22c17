"""The gateway's append-only demand log: one CSV row per answered request, in the format
``hetinfra replan --demand-log`` reads (hetinfra.replan.demand_log), never request contents::

    timestamp,model,input_tokens,output_tokens,region,class,completion_tokens,status

``output_tokens`` is the request's output budget (max_tokens, or the gateway's default for the
model): the size the gateway routed by, so re-planning from the log plans the classes the gateway
will route to, at their upper edges (conservative: a request never generates more). The tokens it
really generated are in ``completion_tokens`` (an extra column the planner ignores; empty when the
backend did not say). ``region`` is the client's origin: the ``x-hetinfra-origin`` header a global
front door set, else the gateway's ``--region`` (empty when neither).

Rows go through the one appender (hetinfra.fileio.open_append): whole rows per write, and a row a
gateway stopped mid-write left cut short (no newline) is cut, with a warning, when the next one opens
the log (its first row was written onto it: a row of ten cells replan refused, with the whole log).

The file is rotated by size: ``demand.csv`` -> ``demand.csv.1`` -> ... -> ``demand.csv.K``
(the oldest dropped); each file starts with the header. :func:`read_all` joins them, oldest first,
each through the one safe reader (hetinfra.fileio.read_text: a regular file only, so a named pipe
planted as a rotation cannot hang the gateway's ``GET /demand.csv`` or ``replan``; UTF-8; at most
MAX_LOG_BYTES for all of them together), and refuses a rotation whose header is not this writer's
(its rows would be read under the wrong column names), leaving out a file's last row cut short
(hetinfra.csvtext.torn_last_row), which joined the next file's first row.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from hetinfra.csvtext import torn_last_row
from hetinfra.errors import InvalidInputError, shown
from hetinfra.fileio import open_append, read_text
from hetinfra.spec.demand import DEMAND_LOG_COLUMNS, MAX_LOG_BYTES

HEADER = ",".join(DEMAND_LOG_COLUMNS + ("class", "completion_tokens", "status")) + "\n"


def is_header(line: str) -> bool:
    """Whether ``line`` (a file's first) is the demand log's header: the file is a demand log."""
    return line.strip() == HEADER.strip()


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n\r') else text


class DemandLog:
    def __init__(self, path: str | Path, *, region: str = "", max_bytes: int = 64 << 20, keep: int = 5):
        self.path = Path(path)
        self.region = _csv_field(region)
        self.max_bytes = max_bytes
        self.keep = keep
        self._fh = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
        except OSError as exc:
            raise InvalidInputError(f"cannot write the demand log {self.path}: {exc.strerror or exc}",
                                    hint="pass a writable --demand-log, or --no-demand-log") from None

    def _open(self) -> None:
        self._fh = open_append(self.path, "the demand log", hint="pass a regular file as --demand-log, or --no-demand-log",
                               ours=is_header)  # OUT/plan.json given as the log: refused, not appended to
        torn = self._fh.torn_note("the demand log", self.path)
        if torn:  # its last row was cut short by a gateway stopped mid-write: the next row no longer joins it
            logging.getLogger("hetinfra.gateway").warning(shown(torn))
        new = self._fh.tell() == 0
        if new:
            self._fh.write(HEADER)
        self._size = self._fh.tell()

    def record(self, model: str, input_tokens: int, output_tokens: int, cls: str,
               completion_tokens: int | None, status: int, when: float | None = None, region: str | None = None) -> None:
        """``region``: the client's origin when a front door named it (else the gateway's region)."""
        where = self.region if region is None else _csv_field(region)
        row = (f"{(when or time.time()):.3f},{_csv_field(model)},{input_tokens},{output_tokens},{where},"
               f"{_csv_field(cls)},{'' if completion_tokens is None else completion_tokens},{status}\n")
        self._fh.write(row)
        self._size += len(row)
        if self._size >= self.max_bytes:
            self.rotate()

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def rotate(self) -> None:
        self._fh.close()
        for k in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{k}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{k + 1}"))
        if self.keep > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
        self._open()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_all(path: str | Path, keep: int = 100, *, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The current file and its rotations as one CSV text (one header, oldest rows first). A rotation
    that is not a regular file, not UTF-8, headed otherwise, or past ``max_bytes`` in all is an
    InvalidInputError naming it; a missing one is skipped (rotation has not reached it)."""
    p = Path(path)
    files = [p.with_name(f"{p.name}.{k}") for k in range(keep, 0, -1)] + [p]
    out, left = [HEADER], max_bytes
    for f in files:
        if not os.path.lexists(f):
            continue
        text = read_text(f, "demand log", max_bytes=left,
                         hint="the gateway writes its demand log and rotations as plain files; move this one aside")
        left -= len(text.encode("utf-8"))
        lines = torn_last_row(text)[0].splitlines(keepends=True)  # a last row cut short is left out
        if lines and not is_header(lines[0]):
            raise InvalidInputError(f"demand log {f}:1: header {lines[0].strip()[:120]!r} is not the gateway's "
                                    f"{HEADER.strip()!r}", hint="move this rotation aside, or re-join it by hand")
        # every row ends in its newline: a whole last row without one never joins the next file's first
        out.extend(line if line.endswith("\n") else line + "\n" for line in lines[1:] if line.strip())
    return "".join(out)
