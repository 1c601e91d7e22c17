"""Signals during a real `hetinfra plan` subprocess: SIGINT exits 130 and SIGTERM 143, after the
staged copy of OUT is removed; OUT is as it was or complete, never half-written, and nothing is
left beside it. Once at a fixed point (inside the staged copy, before the swap: a sitecustomize hook
sends the signal from the artifact writer) and at several fixed delays into a verified plan.

The delays count from the moment the child has installed its stop handlers (read from
/proc/<pid>/status), not from the fork: under load the interpreter's own start-up (site.py, before
any hetinfra code runs and can catch a signal) once took more than 0.4 s, and the default action of
SIGTERM killed the child (-15) before it could exit 143. What hetinfra controls starts at its entry
point, which installs the handlers before importing anything else (test_the_entry_point_...)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import copied_plan

REPO = Path(__file__).resolve().parents[2]
HETINFRA = str(Path(sys.executable).parent / "hetinfra")
SPEC = REPO / "services" / "chat.yaml"
#: the plan the check replans, as the shared plan it copies was made
FLAGS = ("--no-baselines", "--no-verify")


@pytest.fixture(autouse=True)
def _children_start_with_sigint_at_its_default():
    """The `hetinfra plan` children start with SIGINT at its default, as from a terminal. A shell's
    background job (`pytest ... &` in a script, a CI step run that way) starts with SIGINT ignored, a
    child inherits that, and hetinfra keeps a disposition its caller chose (hetinfra.cli.stops): the
    SIGINT cases then exited 0 with OUT replaced, or passed without a signal. A Python handler here
    is reset to the default in a child at exec."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _files(out: Path) -> dict:
    return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def _plan_then_signal(tmp_path: Path, signum: int, shared_plan) -> tuple[int, str, Path]:
    """A real `hetinfra plan` subprocess, sent ``signum`` once it is staging its out dir. The OUT it
    replans is the run's one plan of the same command (tests/conftest.py shared_plan, made in-process:
    what it holds is all the check reads), copied."""
    out = copied_plan(shared_plan(SPEC, *FLAGS), tmp_path / "out")
    before = _files(out)
    assert (out / "plan.json").is_file() and before
    # stop inside the staged copy: a sitecustomize hook sends the signal from the artifact writer. To
    # its own thread (pthread_kill), not the process (os.kill): a process-directed signal may be taken
    # by any thread that does not block it (a solver's or a pool's), whose C handler can then run after
    # the writer has swapped OUT in, so the "fixed point" was not fixed under load (OUT new, exit 130)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import signal, threading\n"
        "import hetinfra.compile.artifacts as a\n"
        "real = a._write_artifacts\n"
        "def slow(out, plan, doc):\n"
        "    written = real(out, plan, doc)\n"
        f"    signal.pthread_kill(threading.get_ident(), {int(signum)})\n"
        "    return written\n"
        "a._write_artifacts = slow\n")
    env = dict(os.environ, PYTHONPATH=str(hook))
    run = subprocess.run([HETINFRA, "plan", str(SPEC), "--out", str(out), *FLAGS],
                         capture_output=True, text=True, timeout=300, env=env)
    assert _files(out) == before  # OUT as it was: the copy was never swapped in
    return run.returncode, run.stderr, out


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_plan_leaves_out_whole_and_no_copy_beside_it(tmp_path, signum, code, shared_plan):
    rc, err, out = _plan_then_signal(tmp_path, signum, shared_plan)
    assert rc == code, err
    assert "Traceback" not in err and "Aborted" not in err
    assert sorted(p.name for p in out.parent.iterdir()) == ["hook", "out"]  # no .out.new.* left


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (the SigCgt mask of /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _wait_for_handlers(proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until hetinfra's stop handlers are in: SIGTERM is caught (SIGINT is caught from the interpreter's
    start, by its KeyboardInterrupt handler; hetinfra installs its three handlers together)."""
    deadline = time.monotonic() + timeout_s
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None, "the plan ended before it installed its stop handlers"
        assert time.monotonic() < deadline, "no stop handler installed in time"
        time.sleep(0.002)


def test_the_entry_point_installs_the_handlers_before_it_imports_the_commands():
    """The window in which a signal is not yet the shell's status is the interpreter's start-up only:
    importing the entry point imports no command module (click, pydantic, the planner)."""
    code = ("import sys, signal\nfrom hetinfra.cli import main\n"
            "print(sorted(m for m in ('click', 'pydantic', 'hetinfra.cli.app') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


needs_proc = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")


@needs_proc
@pytest.mark.parametrize("signum, delay", [(signal.SIGINT, 0.0), (signal.SIGTERM, 0.0), (signal.SIGTERM, 0.4),
                                           (signal.SIGINT, 0.9), (signal.SIGTERM, 1.6)])
def test_a_signal_at_any_time_leaves_out_absent_or_complete(tmp_path, signum, delay):
    """A plan with verification stopped at a fixed delay after its handlers are in place (0: at once,
    while it still imports the commands): whatever it was doing, it exits 0 (done in time) or 128 +
    the signal, and OUT is absent or a whole plan (its plan.json reads)."""
    out = tmp_path / "out"
    proc = subprocess.Popen([HETINFRA, "plan", str(SPEC), "--out", str(out), "--no-baselines"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for_handlers(proc)
    time.sleep(delay)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 128 + signum), err
    assert "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] in ([], ["out"])  # no .out.new.* / .out.old.* copy
    if out.exists():
        plan = json.loads((out / "plan.json").read_text())
        assert (out / "router" / "weights.json").is_file() and plan["allocations"]
