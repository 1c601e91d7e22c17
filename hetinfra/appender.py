"""What the one appender (hetinfra.fileio.open_append) hands back: a file a run appends lines to, written
a whole line at a time, that first cuts the line a run stopped in the middle of writing. It imports only
the standard library.

A run appends rows (the gateway's demand log) or lines (replan's log), each ending in a newline. A run
killed while writing (SIGKILL, an OOM kill, a power cut) left its last row cut short, without its
newline, and the next run's first row was written onto it: ``1796690372.000,chat-8b,21796690386.178,
chat-8b,1,5,...``, a row of ten cells that ``replan`` refused, and with it the whole log, until someone
edited the file. And a text file buffered by size wrote a row in two pieces when the buffer filled mid-row:
a second gateway appending to the same log, or ``replan`` reading it meanwhile, saw half a row.

So: :func:`cut_torn_tail` cuts whatever follows a file's last newline before anything is appended (the
file is the appender's own, its first line checked, and its own rows all end in a newline: text after the
last one is a write cut short), and :class:`WholeLines` writes only whole lines with each ``write()``
call of the system (one O_APPEND write lands whole at the file's end), keeping a line's start until its
newline comes (or the file is closed).
"""

from __future__ import annotations

import os

#: what WholeLines holds before it writes its whole lines (the text file's buffer before it)
BUFFER_BYTES = 1 << 16
#: how much of a file's end :func:`cut_torn_tail` reads at a time, looking for its last newline
_STEP = 1 << 16


def _last_newline_end(fd: int, size: int) -> int:
    """The offset just past the last b"\\n" of the file open as ``fd`` (``size`` bytes), 0 if none."""
    end = size
    while end > 0:
        start = max(0, end - _STEP)
        chunk = os.pread(fd, end - start, start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def cut_torn_tail(fd: int) -> str:
    """Cut the text after the last newline of the file open as ``fd`` (a write a stopped run left cut
    short); the text cut ("" when the file ends in a newline or is empty)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return ""
    keep = _last_newline_end(fd, size)
    torn = os.pread(fd, size - keep, keep)
    os.ftruncate(fd, keep)
    return torn.decode("utf-8", errors="replace")




class WholeLines:
    """A text file open to append (``fd``, O_APPEND) that the system is given whole lines only: a
    ``write()`` keeps its text until :meth:`flush` (or BUFFER_BYTES held), which writes every line ended
    so far in one call and keeps the start of an unended one; :meth:`close` writes everything.
    ``torn``: the text :func:`cut_torn_tail` cut when the file was opened ("" for none)."""

    def __init__(self, fd: int, torn: str = ""):
        self._fd: int | None = fd
        self._held: list[bytes] = []
        self._held_bytes = 0
        self.torn = torn

    def torn_note(self, what: str, path) -> str | None:
        """The warning that the text a stopped run left cut short was cut (None where none was)."""
        if not self.torn:
            return None
        shown = self.torn if len(self.torn) <= 40 else self.torn[:37] + "..."
        return (f"{what} {path} ended in a line cut short ({shown!r}, {len(self.torn.encode())} bytes): a run stopped "
                f"while writing it; that line was cut and the new lines follow the last whole one")

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, text: str) -> int:
        data = text.encode("utf-8")
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= BUFFER_BYTES:
            self.flush()
        return len(text)

    def _take(self, whole_lines: bool) -> bytes:
        data = b"".join(self._held)
        cut = data.rfind(b"\n") + 1 if whole_lines else len(data)
        rest = data[cut:]
        self._held, self._held_bytes = ([rest] if rest else []), len(rest)
        return data[:cut]

    def _write(self, data: bytes) -> None:
        """``data`` to the file; what a failed write (a full disk) leaves unwritten is held again, ahead of the
        rest, so that a line the system took in part is ended by the next write, never joined by another."""
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        finally:
            if done < len(data):
                self._held.insert(0, data[done:])
                self._held_bytes += len(data) - done

    def flush(self) -> None:
        if self._fd is None:
            raise ValueError("I/O operation on closed file.")
        self._write(self._take(whole_lines=True))

    def tell(self) -> int:
        """The file's size with what is held: where the next text goes."""
        if self._fd is None:
            raise ValueError("I/O operation on closed file.")
        return os.fstat(self._fd).st_size + self._held_bytes

    def close(self) -> None:
        if self._fd is None:
            return
        fd = self._fd
        try:
            self._write(self._take(whole_lines=False))
        finally:
            self._fd = None
            os.close(fd)

    def __del__(self) -> None:  # as a file object: what is held reaches the file when it is dropped
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer raises nowhere (a full disk, an interpreter shutting down)
            pass

    def __enter__(self) -> "WholeLines":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
