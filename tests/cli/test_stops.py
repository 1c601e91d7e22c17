"""A stop signal inside the import machinery (hetinfra.cli.stops._stop): taken once the main thread
is out of it, so it never leaves an import lock held for the preloader's thread to wait on forever."""

from __future__ import annotations

import _imp
import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hetinfra.cli import stops


@pytest.fixture(autouse=True)
def _logging_back():
    """A stop silences the libraries' loggers (stops._record): in this process only for the test."""
    yield
    logging.disable(logging.NOTSET)


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


#: the entry point, with every HiGHS solve's interrupt checks (the callbacks its C++ makes into
#: Python; Pyomo's HiGHS subscribes them) sending the process a SIGTERM at the first one: the signal
#: lands inside a callback, as a real one does many times a second during a Pyomo solve
SIGNAL_IN_HIGHS = (
    "import os, signal, sys\n"
    "import highspy\n"
    "made, sent = highspy.Highs.__init__, []\n"
    "def init(self):\n"
    "    made(self)\n"
    "    def once(_event):\n"
    "        if not sent:\n"
    "            sent.append(1)\n"
    "            os.kill(os.getpid(), signal.SIGTERM)\n"
    "    self.cbSimplexInterrupt.subscribe(once)\n"
    "    self.cbMipInterrupt.subscribe(once)\n"
    "highspy.Highs.__init__ = init\n"
    "sys.argv = ['hetinfra', *sys.argv[1:]]\n"
    "from hetinfra.cli import main\n"
    "main()\n")


@pytest.mark.parametrize("spec", ["benchmarks/specs/lora-origins.yaml",  # LoRA adapters: solved through Pyomo
                                  "services/chat.yaml"])  # the direct path
def test_a_stop_inside_a_highs_callback_is_the_stop(spec):
    """It said "error: the solver found no plan within time_limit_s=300 and max_nodes=2000" (Pyomo's
    HiGHS swallowed the SystemExit raised in its callback) and only then "stopped by signal 15"; raised
    through the direct path's C++, the next call into that solver ended the process with SIGSEGV."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_HIGHS, "plan", spec, "--no-baselines"],
                          capture_output=True, text=True, cwd=repo, timeout=300)
    assert (done.returncode, done.stderr) == (143, "stopped by signal 15\n"), done.stderr


def test_an_error_after_a_stop_is_reported_as_the_stop(monkeypatch, capsys):
    """The one place errors become output (hetinfra.cli.common.fail): once a stop arrived, the error is
    what it left behind (a cancelled solve's "no plan"), so the command exits as stopped, silent here
    (hetinfra.cli.app.main says "stopped by signal 15")."""
    from hetinfra.cli.common import fail
    from hetinfra.errors import InfeasibleError

    monkeypatch.setattr(stops, "stopping", [signal.SIGTERM])
    with pytest.raises(SystemExit) as stopped:
        fail(InfeasibleError("the solver found no plan within time_limit_s=300"), as_json=True)
    assert stopped.value.code == 143 and capsys.readouterr() == ("", "")
