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
