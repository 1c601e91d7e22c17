"""Stop signals become the shell's exit statuses (SIGINT 130, SIGTERM 143, SIGHUP 129), from the
first moment the ``hetinfra`` entry point runs: :func:`hetinfra.cli.main` installs them before it
imports the command group (~35 ms of imports on a quiet machine, far more under load), so a Ctrl-C
during that import is "interrupted" and exit 130, not a KeyboardInterrupt traceback and exit 1, and
a SIGTERM is exit 143 after the with-blocks unwound, not the default action's kill. This module
imports only the standard library, so the window before the handlers is the interpreter's own
start-up."""

from __future__ import annotations

import atexit
import signal
import sys

#: exit status of a command stopped by a signal: 128 + its number (the shell's convention; 130 for Ctrl-C)
STOPPED_BY = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}

#: the signal that is stopping this process, once one arrived
stopping: list[int] = []


def _stop(signum: int, _frame) -> None:
    """SIGINT, SIGTERM and SIGHUP become SystemExit(128 + signum) in the main thread. click turns a
    KeyboardInterrupt into "Aborted!" and exit 1, and Python's default SIGTERM ends the process at
    once; an exception instead unwinds every with-block and finally, so a staged out dir or a lock is
    cleaned up (hetinfra.fileio.staged_dir) before the process exits with the shell's status."""
    signal.signal(signum, signal.SIG_DFL)  # a second Ctrl-C ends the process at once
    stopping.append(signum)
    raise SystemExit(STOPPED_BY[signum])


def install_signal_exits(argv: list[str]) -> None:
    """:func:`_stop` for the stop signals, except under ``gateway``: uvicorn shuts the server down
    gracefully on them itself (and then re-raises the signal)."""
    if argv[1:2] == ["gateway"]:
        return
    for signum in STOPPED_BY:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):  # not one a caller chose
            signal.signal(signum, _stop)
    if signal.getsignal(signal.SIGTERM) is _stop:
        atexit.unregister(_hold_stops)  # once per process, however often main() runs in it
        atexit.register(_hold_stops)


def stopped_status() -> int | None:
    """The exit status of the stop signal that arrived (saying so on stderr), or None if none did."""
    if not stopping:
        return None
    signum = stopping[0]
    sys.stderr.write(("interrupted" if signum == signal.SIGINT else f"stopped by signal {signum}") + "\n")
    return STOPPED_BY[signum]



def _hold_stops() -> None:
    """Registered with atexit by :func:`install_signal_exits`: while the interpreter finalises, the
    stop signals are held (blocked). CPython's finalisation restores the default handlers after the
    atexit callbacks, so a signal landing there would otherwise end a completed command by the
    signal (status -n); held, it is never delivered and the command's status stands. Not at the
    end of ``main()``: a caller in the same process (a test running the CLI in-process) would then
    hand the blocked mask to every process it starts."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOPPED_BY))
