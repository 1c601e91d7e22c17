"""The one way hetinfra runs another program under a time limit (``vllm bench serve`` for `profile`,
``gcloud``/``az`` for tokens, ``sky launch`` for `profile --launch`): in a process group of its own,
and the whole group stopped when the time is up or hetinfra itself stops (a signal, an error).

subprocess.run kills only the process it started: a wrapper (``--vllm-cmd 'uv run vllm'``, a shell
script, gcloud's launcher) left its children running after `profile`'s --timeout or a Ctrl-C, and a
child that held the output pipe made run() wait for it past the limit. Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

__all__ = ["run_group", "stop_group"]

#: how long the group has to go after SIGTERM before SIGKILL
GRACE_S = 3.0


def run_group(argv: list[str], *, timeout: float | None, input: str | bytes | None = None,
              **popen: Any) -> subprocess.CompletedProcess:
    """``argv`` run as subprocess.run runs it (``popen``: stdout, stderr, stdin, text, env, cwd), in a
    new session; TimeoutExpired after ``timeout`` s, as run() raises it. On the timeout or any
    exception (KeyboardInterrupt and the stop signals' exits included), every process of the group
    is stopped (:func:`stop_group`) before it propagates."""
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    proc = subprocess.Popen(argv, start_new_session=True, **popen)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        stop_group(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False once no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_group(proc: subprocess.Popen, grace_s: float | None = None) -> None:
    """SIGTERM to every process of ``proc``'s group (its id is ``proc``'s: start_new_session), SIGKILL to
    what is left after ``grace_s`` (default :data:`GRACE_S`); ``proc`` reaped and its pipes closed."""
    grace_s = GRACE_S if grace_s is None else grace_s
    pgid = proc.pid
    if _signal_group(pgid, signal.SIGTERM):
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            proc.poll()  # reap the leader, or the group never empties
            if not _signal_group(pgid, 0):
                break
            time.sleep(0.05)
        else:
            _signal_group(pgid, signal.SIGKILL)
    try:
        proc.communicate(timeout=grace_s)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        proc.kill()
        proc.wait()
