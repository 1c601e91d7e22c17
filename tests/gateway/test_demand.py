"""hetinfra.gateway.demand.read_all: the one joiner of the demand log and its rotations reads each file
through the one safe reader (hetinfra.fileio.read_text). A planted FIFO, a huge file, bytes that are
not UTF-8 or a rotation with another header fail with an InvalidInputError naming the file, never a
hang, a MemoryError or rows read under the wrong column names."""

from __future__ import annotations

import os
import threading

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.gateway.demand import HEADER, DemandLog, read_all

ROW = "1790000000.000,chat,100,50,,c,40,200\n"


def _log(tmp_path, rotations: int = 2):
    path = tmp_path / "demand.csv"
    for k in range(rotations, 0, -1):
        path.with_name(f"demand.csv.{k}").write_text(HEADER + ROW)
    path.write_text(HEADER + ROW)
    return path


def _read_with_deadline(path, **kw):
    """read_all on a thread with a deadline: a hang is a failure of the test, not of the suite."""
    box: dict = {}

    def run():
        try:
            box["text"] = read_all(path, keep=5, **kw)
        except Exception as exc:  # noqa: BLE001 - the test inspects what came out
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "read_all hung on a planted file"
    return box


def test_the_rotations_join_oldest_first_under_one_header(tmp_path):
    path = _log(tmp_path, 2)
    text = read_all(path, keep=5)
    assert text.count(HEADER) == 1 and text.count(ROW) == 3


@pytest.mark.parametrize("which", ["demand.csv", "demand.csv.1", "demand.csv.2"])
@pytest.mark.parametrize("plant", ["fifo", "huge", "not-utf8", "other-header", "directory"])
def test_a_planted_file_fails_cleanly_naming_it(tmp_path, which, plant):
    path = _log(tmp_path, 2)
    target = tmp_path / which
    target.unlink()
    limit = {}
    if plant == "fifo":
        os.mkfifo(target)  # no writer: a plain open() would block forever
    elif plant == "huge":
        target.write_text(HEADER + ROW * 2000)
        limit = {"max_bytes": 20_000}  # the bound over all rotations together, small for the test
    elif plant == "not-utf8":
        target.write_bytes(HEADER.encode() + b"\xff\xfe,chat\n")
    elif plant == "other-header":
        target.write_text("timestamp,model,output_tokens,input_tokens,region\n" + ROW)
    else:
        target.mkdir()
    box = _read_with_deadline(path, **limit)
    assert isinstance(box.get("error"), InvalidInputError), box
    assert which in str(box["error"])


def test_the_writer_and_the_joiner_agree_on_the_header(tmp_path):
    log = DemandLog(tmp_path / "d.csv", max_bytes=400, keep=2)
    for i in range(30):
        log.record("chat", 10 + i, 5, "c", None, 200, when=1_790_000_000 + i)
    log.close()
    text = read_all(tmp_path / "d.csv", keep=2)
    assert text.startswith(HEADER) and text.count("\n") > 1
