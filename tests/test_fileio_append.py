"""The one appender (hetinfra.fileio.open_append): the gateway's demand log and replan's log append
only to a regular file. Anything else there (a FIFO, a device, a folder, a socket, a link to one) is
refused at once with the path named: open() of a FIFO waited for a reader, so `gateway --demand-log
FIFO` hung before serving and `replan --log-file FIFO` after its run; /dev/null was taken as a log."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from tests.fuzz.conftest import budget

KINDS = ("fifo", "folder", "device", "socket", "link to a fifo", "link to a folder")


def _make(tmp: Path, kind: str, name: str) -> Path:
    path = tmp / name
    if kind in ("fifo", "link to a fifo"):
        os.mkfifo(tmp / f"{name}.target" if kind.startswith("link") else path)
    elif kind in ("folder", "link to a folder"):
        (tmp / f"{name}.target" if kind.startswith("link") else path).mkdir()
    elif kind == "device":
        return Path("/dev/null")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    if kind.startswith("link"):
        path.symlink_to(f"{name}.target")
    return path


def _within(fn, path: Path, seconds: float = 2.0):
    """fn() run in a thread: (finished, what it raised or returned). A thread blocked in open() of a
    FIFO is released by opening the FIFO for reading once the time is up."""
    box: dict = {}

    def go():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            box["value"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    finished = not t.is_alive()
    if not finished:
        fd = os.open(os.path.realpath(path), os.O_RDONLY | os.O_NONBLOCK)
        t.join(5)
        os.close(fd)
    return finished, box.get("value")


def _demand_log(path: Path):
    from hetinfra.gateway.demand import DemandLog

    return DemandLog(path)


def _replan_log(path: Path):
    import click

    from hetinfra.cli.replan import RunLog

    said: list[str] = []
    orig, click.echo = click.echo, lambda text="", **kw: said.append(str(text))
    try:
        RunLog(path, "=== header", lambda *_: None, False).flush("summary")
    finally:
        click.echo = orig
    said = [s for s in said if "cut short" not in s]  # the warning that a line a stopped run left was cut
    if not said:
        return "appended"  # no refusal said
    return InvalidInputError(said[0])


WRITERS = {"gateway demand log": _demand_log, "replan log": _replan_log}


@settings(max_examples=30, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # no shrinking: a blocked open costs 2 s
@given(kind=st.sampled_from(KINDS), writer=st.sampled_from(sorted(WRITERS)),
       name=st.text(st.sampled_from("abcxyz-_.0123456789"), min_size=1, max_size=12).filter(lambda n: n not in (".", "..")))
def test_an_appender_refuses_anything_but_a_regular_file_at_once(tmp_path_factory, kind, writer, name):
    tmp = tmp_path_factory.mktemp("append")
    path = _make(tmp, kind, name)
    finished, got = _within(lambda: WRITERS[writer](path), path)
    assert finished, f"{writer} blocked on {kind} {path}"
    assert isinstance(got, InvalidInputError), f"{writer} took {kind} {path}: {got!r}"
    assert "not a regular file" in got.message and str(path) in got.message


def test_the_writers_append_to_a_regular_file(tmp_path):
    from hetinfra.gateway.demand import HEADER, DemandLog

    path = tmp_path / "demand.csv"
    log = DemandLog(path)
    log.record("m", 10, 20, "c", 20, 200, when=1.0)
    log.close()
    log = DemandLog(path)  # a log with rows: appended to, no second header
    log.record("m", 11, 21, "c", 21, 200, when=2.0)
    log.close()
    assert path.read_text().count(HEADER) == 1 and path.read_text().count("\n") == 3
    (tmp_path / "replan.log").write_text("=== first\n")  # a log of an earlier run (another file: round 15's test)
    assert _replan_log(tmp_path / "replan.log") == "appended"
    assert (tmp_path / "replan.log").read_text() == "=== first\n=== header\nsummary\n"


def test_open_append_creates_and_appends(tmp_path):
    from hetinfra.fileio import open_append

    with open_append(tmp_path / "a.log", "the log") as fh:
        fh.write("one\n")
    with open_append(tmp_path / "a.log", "the log") as fh:
        assert fh.tell() == len("one\n")
        fh.write("two\n")
    assert (tmp_path / "a.log").read_text() == "one\ntwo\n"


# ---- a line a stopped run left cut short; whole lines per write (hetinfra.appender) -----------------------
row_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1, max_size=30)


def _appended(path: Path, lines: list[str], *, ours) -> None:
    from hetinfra.fileio import open_append

    fh = open_append(path, "the log", ours=ours)
    try:
        for line in lines:
            fh.write(line + "\n")
    finally:
        fh.close()


@budget(120)
@given(kept=st.lists(row_text, max_size=4), torn=row_text, new=st.lists(row_text, min_size=1, max_size=3),
       writer=st.sampled_from(sorted(WRITERS)))
def test_property_a_line_cut_short_is_cut_before_appending(tmp_path_factory, kept, torn, new, writer):
    """A log whose last line a stopped run left without its newline: the next run's lines follow the last
    whole line, each on a line of its own (the old appender wrote its first line onto the cut one:
    ``...,chat-8b,21796690386.178,chat-8b,...``, a row replan refused, and the log with it)."""
    from hetinfra.gateway.demand import HEADER, DemandLog

    path = tmp_path_factory.mktemp("torn") / ("demand.csv" if writer == "gateway demand log" else "replan.log")
    head = HEADER if writer == "gateway demand log" else "=== an earlier run\n"
    path.write_text(head + "".join(line + "\n" for line in kept) + torn, encoding="utf-8")
    if writer == "gateway demand log":
        log = DemandLog(path)
        for k, _ in enumerate(new):
            log.record("m", k, k, "c", None, 200, when=1.0)
        log.close()
        added = [f"1.000,m,{k},{k},,c,,200" for k in range(len(new))]
    else:
        assert _replan_log(path) == "appended"
        added = ["=== header", "summary"]
    assert path.read_text(encoding="utf-8").split("\n") == [head.rstrip("\n"), *kept, *added, ""]


@budget(120)
@given(pieces=st.lists(st.text(st.sampled_from("ab,\n"), min_size=1, max_size=200), min_size=1, max_size=12),
       flush_after=st.sets(st.integers(0, 11)))
def test_property_the_file_holds_whole_lines_after_every_flush(tmp_path_factory, pieces, flush_after):
    """Whatever text a writer gives and whenever it flushes, the file ends at a line's end: a reader of the
    live file (replan on the gateway's log) or a second writer never meets half a line; close() writes all."""
    from hetinfra.fileio import open_append

    path = tmp_path_factory.mktemp("whole") / "a.log"
    with open_append(path, "the log") as fh:
        for k, piece in enumerate(pieces):
            fh.write(piece)
            if k in flush_after:
                fh.flush()
                text = path.read_text()
                assert text == "" or text.endswith("\n"), text[-40:]
                assert text == "".join(pieces[:k + 1])[:len(text)]
    assert path.read_text() == "".join(pieces)


def test_a_large_write_reaches_the_file_in_whole_lines(tmp_path):
    """Past the held bytes a write goes out at once, up to its last whole line (a 64 KiB text buffer wrote
    its own 64 KiB, cutting a row)."""
    from hetinfra.appender import BUFFER_BYTES
    from hetinfra.fileio import open_append

    row = "1714564800.000,chat-8b,512,128,us-east-1,c,100,200\n"
    with open_append(tmp_path / "d.csv", "the log") as fh:
        while fh.tell() <= BUFFER_BYTES + 1000:
            fh.write(row[:20])
            fh.write(row[20:])
        text = (tmp_path / "d.csv").read_text()
        assert text and text.endswith("\n") and len(text) % len(row) == 0


def test_the_demand_log_warns_of_the_row_it_cut(tmp_path, caplog):
    from hetinfra.gateway.demand import HEADER, DemandLog

    path = tmp_path / "demand.csv"
    path.write_text(HEADER + "1.000,m,1,1,,c,,200\n1.500,m,2")
    with caplog.at_level("WARNING", logger="hetinfra.gateway"):
        DemandLog(path).close()
    assert "ended in a line cut short ('1.500,m,2', 9 bytes)" in caplog.text
    assert path.read_text() == HEADER + "1.000,m,1,1,,c,,200\n"


def test_a_write_the_disk_takes_in_part_is_ended_by_the_next(tmp_path, monkeypatch):
    """A full disk took half a line: what it left is written first next time, so the line ends whole."""
    import hetinfra.appender as appender
    from hetinfra.fileio import open_append

    real, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:5]))  # part of the first line
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(appender.os, "write", write)
    fh = open_append(tmp_path / "a.log", "the log")
    fh.write("first line\nsecond line\n")
    try:
        fh.flush()
    except OSError:
        pass
    fh.write("third\n")
    fh.close()
    assert (tmp_path / "a.log").read_text() == "first line\nsecond line\nthird\n"
