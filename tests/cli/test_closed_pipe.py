"""A reader that closes the pipe early (`hetinfra plan SPEC | head -1`) ends the command quietly with
141 (128 + SIGPIPE, as a shell reports for a Unix tool; hetinfra.cli.stops.PIPE_CLOSED). Before,
click turned the BrokenPipeError into exit 1, hetinfra's "a bug", and Rich's consoles did the same.
Run through the real entry point, on a real pipe whose read end is closed before the command starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.cli.stops import PIPE_CLOSED, closed_pipe_ends

REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys\nsys.argv = ['hetinfra', *sys.argv[1:]]\nfrom hetinfra.cli import main\nmain()\n"


def _into_closed_pipe(*args: str, both: bool = False) -> subprocess.CompletedProcess:
    """``hetinfra ARGS`` with stdout (``both``: and stderr) a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-c", ENTRY, *args], stdout=write,
                              stderr=write if both else subprocess.PIPE, cwd=REPO, timeout=300)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [
    ("plan", "services/chat.yaml", "--no-verify", "--no-baselines"),  # the summary: Rich's console
    ("schema", "plan"),  # click.echo
    ("--help",),  # printed while the group's own arguments are read
], ids=" ".join)
def test_a_closed_stdout_pipe_ends_the_command_quietly(args):
    done = _into_closed_pipe(*args)
    assert done.returncode == PIPE_CLOSED == 141, done.stderr
    assert done.stderr == b""


def test_stdout_and_stderr_into_one_closed_pipe():
    assert _into_closed_pipe("plan", "services/chat.yaml", "--no-verify", "--no-baselines", both=True).returncode == 141


def test_another_broken_pipe_is_the_commands_own_error():
    """A socket's or a subprocess's broken pipe is not the reader leaving: it is raised on (here,
    under pytest, stdout and stderr are no closed pipe)."""
    with pytest.raises(BrokenPipeError), closed_pipe_ends():
        raise BrokenPipeError(32, "a socket's")


@settings(max_examples=6, deadline=None, derandomize=True)
@given(args=st.sampled_from([("--version",), ("prices", "--gpu", "H100"), ("prices", "--gpu", "NOPE"),
                             ("prices", "--gpu", "NOPE", "--json")]),
       into=st.sampled_from(["stdout /dev/full", "stderr /dev/full", "stdout closed"]))
def test_output_that_cannot_be_written_is_said_never_a_traceback(args, into):
    """stdout into a full disk (/dev/full: ENOSPC) was an OSError traceback (exit 1) wherever click or
    Rich wrote, stdout closed (`>&-`) an AttributeError at the last flush, and an error that could not
    be printed lost its exit code. Now: the output's failure is said on stderr, exit 2
    (hetinfra.cli.stops.OUTPUT_FAILED); an error keeps its own code."""
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        streams = {"stdout /dev/full": {"stdout": full, "stderr": subprocess.PIPE},
                   "stderr /dev/full": {"stdout": subprocess.PIPE, "stderr": full},
                   "stdout closed": {"stderr": subprocess.PIPE, "preexec_fn": lambda: os.close(1)}}[into]  # `>&-`
        done = subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=REPO, timeout=120, **streams)
    finally:
        os.close(full)
    err = (done.stderr or b"").decode()
    assert "Traceback" not in err, err
    wrote = args[0] == "--version" or args[-1] in ("H100", "--json")  # what prints to stdout
    if "NOPE" in args:
        assert done.returncode == 2 and (into == "stderr /dev/full" or "no offer has gpu 'NOPE'" in err), err
    elif into == "stdout /dev/full" and wrote:
        assert done.returncode == 2 and "cannot write the output to stdout: No space left on device" in err, err
    else:  # stdout closed from the start: Python has no sys.stdout, and click drops what it would print
        assert done.returncode == 0, err
