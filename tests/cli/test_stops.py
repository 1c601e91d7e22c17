"""A stop signal inside the import machinery (hetinfra.cli.stops._stop): taken once the main thread
is out of it, so it never leaves an import lock held for the preloader's thread to wait on forever."""

from __future__ import annotations

import _imp
import signal
import subprocess
import sys
import threading
import time

import pytest

from hetinfra.cli import stops


def _importlib_frame(tmp_path, monkeypatch):
    """A frame of importlib's _get_module_lock (where the global import lock is held), from a real import."""
    (tmp_path / "stops_probe_mod.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def watch(frame, _event, _arg):
        if not seen and frame.f_code.co_name == "_get_module_lock":
            seen.append(frame)

    sys.setprofile(watch)
    try:
        import stops_probe_mod  # noqa: F401
    finally:
        sys.setprofile(None)
    assert seen
    return seen[0]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_a_stop_inside_the_import_machinery_is_taken_once_out_of_it(tmp_path, monkeypatch):
    # Raised where _get_module_lock has just taken the global import lock, SystemExit left it held for
    # good: the preloader's next import waited for it while the main thread waited for the preloader
    # (a verified `hetinfra plan` sent SIGINT at 0.39 s hung; gdb: the side thread in _imp.acquire_lock)
    frame = _importlib_frame(tmp_path, monkeypatch)
    monkeypatch.setattr(stops, "stopping", [])
    before = signal.signal(signal.SIGINT, stops._stop)
    try:
        _imp.acquire_lock()  # as there, when the interpreter runs the handler
        try:
            stops._stop(signal.SIGINT, frame)
        except SystemExit:
            pytest.fail("the stop was raised inside importlib, holding its lock")
        finally:
            _imp.release_lock()
        assert stops.stopping == [] and signal.getsignal(signal.SIGINT) is stops._stop
        with pytest.raises(SystemExit) as stopped:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # the signal again, a moment later, out here
                time.sleep(0.001)
        assert stopped.value.code == 130 and stops.stopping == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_stop_signal_after_the_command_ended_leaves_its_status(tmp_path):
    """Once the command is done (atexit: stops._hold_stops), a stop signal sent to the process changes
    nothing, whichever thread takes it: blocked in the main thread and ignored in every other one
    (OpenBLAS's threads took it and the default action, restored by finalisation, ended a finished
    `hetinfra plan` with -15 in 5 of 40 SIGTERMs near its end). A caller's own handler stays."""
    code = (
        "import os, signal, sys, threading, time\n"
        "from hetinfra.cli import stops\n"
        "mine = lambda *_: None\n"
        "signal.signal(signal.SIGHUP, mine)\n"
        "stops.install_signal_exits(['hetinfra', 'plan'])\n"
        "other = threading.Thread(target=time.sleep, args=(0.1,))\n"
        "other.start()\n"
        "stops._hold_stops()\n"
        "assert signal.getsignal(signal.SIGHUP) is mine\n"
        "os.kill(os.getpid(), signal.SIGTERM)  # the main thread blocks it: the other thread takes it\n"
        "other.join()\n"
        "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr


def test_the_entry_point_ends_without_teardown_as_the_interpreter_would(tmp_path):
    """hetinfra.cli.main ends through stops.finish: the command's status and its whole stdout (a pipe,
    flushed), the atexit callbacks run (a temporary directory's finalizer removes it) and a non-daemon
    thread is joined, as Python's own exit does them; what is skipped is the modules' teardown."""
    left = tmp_path / "left"
    code = (
        "import atexit, sys, tempfile, threading, time\n"
        f"kept = tempfile.TemporaryDirectory(dir={str(tmp_path)!r})\n"
        f"atexit.register(lambda: open({str(left)!r}, 'w').write(kept.name))\n"
        "threading.Thread(target=lambda: (time.sleep(0.05), print('thread done'))).start()\n"
        "sys.argv = ['hetinfra', '--version']\n"
        "from hetinfra.cli import main\n"
        "main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "hetinfra, version" in done.stdout and "thread done" in done.stdout
    removed = left.read_text()  # the atexit callback ran, after the finalizer (registered later, run first)
    assert removed and not (tmp_path / removed).exists() and not list(tmp_path.glob("tmp*"))


@pytest.mark.parametrize("code, status, said", [(3, 3, ""), (None, 0, ""), ("a message", 1, "a message")])
def test_finish_exits_with_systemexits_status(code, status, said):
    script = f"import sys\nfrom hetinfra.cli.stops import finish\nprint('out')\nfinish({code!r})\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (status, "out\n", said)
