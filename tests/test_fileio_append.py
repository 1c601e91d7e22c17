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
