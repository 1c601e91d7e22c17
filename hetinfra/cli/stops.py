"""Stop signals become the shell's exit statuses (SIGINT 130, SIGTERM 143, SIGHUP 129), from the
first moment the ``hetinfra`` entry point runs: :func:`hetinfra.cli.main` installs them before it
imports the command group (~35 ms of imports on a quiet machine, far more under load), so a Ctrl-C
during that import is "interrupted" and exit 130, not a KeyboardInterrupt traceback and exit 1, and
a SIGTERM is exit 143 after the with-blocks unwound, not the default action's kill. This module
imports only the standard library, so the window before the handlers is the interpreter's own
start-up."""

from __future__ import annotations

import _frozen_importlib
import _frozen_importlib_external
import _thread
import atexit
import os
import signal
import sys
import time
from contextlib import contextmanager
from typing import Iterator, NoReturn

#: exit status of a command stopped by a signal: 128 + its number (the shell's convention; 130 for Ctrl-C)
STOPPED_BY = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}

#: exit status of a command whose stdout (or stderr) pipe the reader closed (``hetinfra plan | head -1``):
#: 128 + SIGPIPE, the status a shell reports for a Unix tool that SIGPIPE ended, so ``set -o pipefail``
#: sees the output was cut short as it does for ``cat``. Python ignores SIGPIPE (a write raises
#: BrokenPipeError instead); click turned that into exit 1, hetinfra's "a bug" (:func:`closed_pipe_ends`)
PIPE_CLOSED = 128 + signal.SIGPIPE

#: the file names of the import machinery's frames (importlib._bootstrap and _bootstrap_external:
#: "<frozen importlib._bootstrap>", or their paths where frozen modules are off)
IMPORTLIB = frozenset(f.__code__.co_filename for f in (_frozen_importlib._find_and_load,
                                                       _frozen_importlib_external.spec_from_file_location))
#: how long a stop signal that landed in the import machinery waits before it is sent again
RESEND_S = 0.005

#: the signal that is stopping this process, once one arrived
stopping: list[int] = []


def _stop(signum: int, frame) -> None:
    """SIGINT, SIGTERM and SIGHUP become SystemExit(128 + signum) in the main thread. click turns a
    KeyboardInterrupt into "Aborted!" and exit 1, and Python's default SIGTERM ends the process at
    once; an exception instead unwinds every with-block and finally, so a staged out dir or a lock is
    cleaned up (hetinfra.outdir.staged_dir) before the process exits with the shell's status.

    Not inside the import machinery: raised there, between ``_imp.acquire_lock()`` and its ``try``
    (or a module lock's acquire and its ``with``), the exception leaves that lock held by this
    thread for good, and the next import on another thread (hetinfra.cli.preload's) waits for it
    forever while this one waits for that thread: a stopped `hetinfra plan` hung. There the signal
    is sent again a moment later (:func:`_send_again`), until it lands outside importlib.

    Nor inside a callback that HiGHS's C++ solve makes into Python (Pyomo's HiGHS checks for an
    interrupt that way, many times a second): HiGHS swallowed the exception and reported its solve
    as ended without a plan, so a SIGTERM said "the solver found no plan within time_limit_s=300"
    and blamed the time limit (and an exception thrown through its C++ can leave the solver
    unusable). There the solve is cancelled (it returns at its next interrupt check, as at a time
    limit), the stop is recorded, so an error the cancelled solve leads to is reported as the stop
    (hetinfra.cli.common.fail), and the signal is sent again to land once the solve has returned."""
    if frame is not None and frame.f_code.co_filename in IMPORTLIB:
        _thread.start_new_thread(_send_again, (signum, _thread.get_ident()))
        return
    highs = _highs_calling(frame)
    if highs is not None:
        _record(signum)
        highs.cancelSolve()
        _thread.start_new_thread(_send_again, (signum, _thread.get_ident()))
        return
    signal.signal(signum, signal.SIG_DFL)  # a second Ctrl-C ends the process at once
    _record(signum)
    raise SystemExit(STOPPED_BY[signum])


def _record(signum: int) -> None:
    """The stop is under way: :data:`stopping` says which, and the libraries' loggers are silenced,
    so that the stop is all the command says (Pyomo logged "Constructing component ... failed:
    SystemExit: 143" for a model built when the signal came, and the cancelled solve's status)."""
    if signum not in stopping:
        stopping.append(signum)
    logging = sys.modules.get("logging")  # not loaded: nothing can log
    if logging is not None:
        logging.disable(logging.CRITICAL)


def _highs_calling(frame):
    """The ``highspy.Highs`` whose solve called the Python code of ``frame`` back (its
    ``__internal_callback`` is on the stack, called from C++), or None."""
    while frame is not None:
        if frame.f_code.co_name == "__internal_callback" and frame.f_globals.get("__name__") == "highspy.highs":
            return frame.f_locals.get("user_callback_data")
        frame = frame.f_back
    return None


def _send_again(signum: int, thread: int) -> None:
    """``signum`` to ``thread`` (the main thread) after RESEND_S, from a thread of its own: raised by
    the handler itself (signal.raise_signal, _thread.interrupt_main) it would be handled at once, in
    the handler, while the main thread is still inside the import machinery."""
    time.sleep(RESEND_S)
    signal.pthread_kill(thread, signum)


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
    hand the blocked mask to every process it starts.

    A mask is the calling thread's only: a signal sent to the process is then taken by another
    thread that does not block it (OpenBLAS's, started with numpy), and the default action there
    ended the process all the same (5 of 40 SIGTERMs near the end of `hetinfra plan --no-verify`
    exited -15). So they are also ignored, for every thread: finalisation restores the default
    action only where a handler of Python's is installed, never where the signal is ignored."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOPPED_BY))
    for signum in STOPPED_BY:
        if signal.getsignal(signum) is _stop:  # ours; a caller's own handler stays
            signal.signal(signum, signal.SIG_IGN)


@contextmanager
def closed_pipe_ends() -> Iterator[None]:
    """A write to a stdout or stderr pipe whose reader is gone ends the command quietly with
    :data:`PIPE_CLOSED`, as Python's documentation recommends (its "Note on SIGPIPE"): the rest of the
    output goes to /dev/null, so the flushes on the way out do not fail again. Any other broken pipe
    (a socket, a subprocess's stdin) is the command's own error and goes on.

    Rich's consoles (the summary's tables, the progress bars) catch their own BrokenPipeError: they
    point stdout at /dev/null and raise SystemExit(1) while handling it (``Console.on_broken_pipe``);
    that exit is this one too."""
    try:
        yield
    except BrokenPipeError:
        if not widowed_outputs():
            raise
        _quiet_exit()
    except SystemExit as stop:
        if stop.code != 1 or not isinstance(stop.__context__, BrokenPipeError):
            raise
        _quiet_exit()
    except OSError as exc:  # stdout or stderr into a full disk or /dev/full (ENOSPC), a quota, EIO
        fd = _failed_output(exc)
        if fd is None:
            raise
        _output_failed_exit(exc, fd)


#: the exit of a command whose output could not be written (as a folder it could not write: exit 2)
OUTPUT_FAILED = 2


def _failed_output(exc: OSError) -> int | None:
    """The output (1: stdout, 2: stderr) whose write raised ``exc``, or None for another file's: the
    frame that wrote (click.echo's ``file``, a Rich console's ``self.file``) holds a stream on that
    file descriptor. A failed write drops what it could not write, so the stream cannot be asked again."""
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return next((fd for fd in (1, 2) for frame in frames[-3:] for v in frame.f_locals.values() if _on_fd(v, fd)),
                None)


def _on_fd(obj, fd: int) -> bool:
    """Whether ``obj`` (or the stream it writes to, ``.file``) is a stream on file descriptor ``fd``."""
    for stream in (obj, getattr(obj, "file", None)):
        try:
            if callable(getattr(stream, "fileno", None)) and stream.fileno() == fd:
                return True
        except (OSError, ValueError):  # io.UnsupportedOperation is both; a closed stream, ValueError
            continue
    return False


def _output_failed_exit(exc: OSError, fd: int = 1) -> NoReturn:
    """Two lines on stderr for output that could not be written (a traceback before, exit 1; a
    failure at the last flush was exit 120 without a word), then :data:`OUTPUT_FAILED`, the failed
    output pointed at /dev/null so that the flushes on the way out do not fail again."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    try:
        if fd == 1:
            sys.stderr.write(f"error: cannot write the output to stdout: {exc.strerror or exc}\n"
                             "  hint: stdout goes to a full disk or a closed file: free space there, or send it "
                             "elsewhere\n")
            sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass  # stderr fails too (or is closed): the status says it
    sys.exit(OUTPUT_FAILED)


def _quiet_exit() -> NoReturn:
    """Exit :data:`PIPE_CLOSED`, the widowed outputs pointed at /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in widowed_outputs():
        os.dup2(null, fd)
    os.close(null)
    sys.exit(PIPE_CLOSED)


def widowed_outputs() -> list[int]:
    """The file descriptors of stdout and stderr that are pipes (or sockets) whose reader has gone:
    the write end of such a pipe polls as an error (POLLERR; POLLHUP for a socket)."""
    import select
    import stat

    closed = []
    for fd in (1, 2):
        try:
            kind = os.fstat(fd).st_mode
        except OSError:
            continue
        if not (stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind)):
            continue
        poller = select.poll()
        poller.register(fd, 0)  # errors and hang-ups are always reported
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
            closed.append(fd)
    return closed


def finish(code) -> NoReturn:
    """End the ``hetinfra`` process with SystemExit's ``code`` as the interpreter would, less its
    teardown: the threads Python waits for are joined, the atexit callbacks run (:func:`_hold_stops`,
    weakref finalizers such as a temporary directory's, concurrent.futures' joins), stdout and stderr
    are flushed (a failed stdout flush is status 120, as Python's), then ``os._exit``. What is
    skipped is unloading the modules and freeing every object the command made, memory the OS takes
    back anyway: 16 ms after a verified plan of Mélange V1 on a quiet machine, 2.7% of the bare solve
    the front door is measured against (benchmarks/bench_scale.py --front). Only the console entry
    point (:func:`hetinfra.cli.main`) calls it: a caller running the CLI in its own process (the
    tests) keeps its interpreter."""
    import threading

    if code is None or isinstance(code, int):
        status = code or 0
    else:  # as Python prints a SystemExit that carries a message
        sys.stderr.write(f"{code}\n")
        status = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    try:
        if sys.stdout is not None:  # None: started with stdout closed (`hetinfra ... >&-`)
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left before the last of the output (closed_pipe_ends)
        status = status or PIPE_CLOSED
    except OSError as exc:  # the last of the output into a full disk: said, as closed_pipe_ends says it
        try:
            _output_failed_exit(exc)
        except SystemExit:
            status = status or OUTPUT_FAILED
    except ValueError:
        status = status or 120
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)
