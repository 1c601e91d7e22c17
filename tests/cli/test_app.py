"""The ``hetinfra`` entry point (hetinfra.cli.app.main)."""

from __future__ import annotations

import gc

import pytest

from hetinfra.cli import app


def test_main_collects_cycles_less_often_and_still_runs_the_command(monkeypatch, capsys):
    before = gc.get_threshold()
    monkeypatch.setattr("sys.argv", ["hetinfra", "--version"])
    try:
        with pytest.raises(SystemExit) as done:
            app.main()
        assert done.value.code == 0 and "hetinfra" in capsys.readouterr().out
        assert gc.get_threshold() == (app.GC_GEN0_THRESHOLD, *before[1:])
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0  # what the command made is skipped by the exit's collection
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_a_command_invoked_alone_keeps_its_short_help_option():
    """click keeps a command's help option from its first use: a command a test invokes alone, before
    hetinfra.cli.app is imported (tests/perf's profile and profile-import did), must still answer -h,
    or the generated CLI reference would depend on which test ran first. So every command declares
    its help options itself (hetinfra.cli.common.COMMAND_SETTINGS); checked in a fresh interpreter
    that imports each command's own module, never the app."""
    import subprocess
    import sys

    from hetinfra.cli.app import cli

    def every(group, prefix=""):  # the nested ones too (feeds refresh, feeds list)
        for name, command in group.commands.items():
            yield prefix + name, command
            yield from every(command, f"{prefix}{name} ") if hasattr(command, "commands") else ()

    found = {name: (command.callback.__module__, command.callback.__name__) for name, command in every(cli)}
    script = "\n".join(["import importlib, sys", "from click.testing import CliRunner", "bad = []"] + [
        f"c = getattr(importlib.import_module({mod!r}), {fn!r}); "  # the decorated name holds the command
        f"r = CliRunner().invoke(c, ['-h']); bad += [] if r.exit_code == 0 and '-h, --help' in r.output else [{name!r}]"
        for name, (mod, fn) in sorted(found.items())] + [
        "assert 'hetinfra.cli.app' not in sys.modules, 'the app was imported'", "print(bad)"])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]" and len(found) >= 15


def test_running_the_cli_in_process_leaves_the_signal_mask_alone():
    """The stop signals are held only while the interpreter finalises (an atexit callback): a caller
    running the CLI in its own process (these tests) must not hand blocked SIGINT/SIGTERM to every
    process it starts afterwards (a node script's engines then ignored SIGTERM and the test hung)."""
    import signal

    import pytest

    with pytest.raises(SystemExit):
        _run_main_with(["hetinfra", "--help"])
    assert not {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _run_main_with(argv):
    import sys

    from hetinfra.cli.app import main

    old = sys.argv
    sys.argv = argv
    try:
        main()
    finally:
        sys.argv = old


def test_the_entry_point_keeps_numpys_blas_to_one_thread_unless_the_user_says_otherwise():
    """hetinfra.cli.main sets OPENBLAS_NUM_THREADS=1 before anything loads numpy (its pool's spinning
    thread took a core from the solve and the simulator); a value the user set is kept. numpy is
    loaded at exit here, after the command set the variable, as `plan` loads it in its solve.
    ``python -m hetinfra.cli`` goes through the same entry point."""
    import os
    import subprocess
    import sys

    code = ("import atexit, os, sys\n"
            "def report():\n"
            "    import numpy  # noqa: F401\n"
            "    print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))\n"
            "atexit.register(report)\n"
            "sys.argv = ['hetinfra', '--version']\n")
    console = code + "from hetinfra.cli import main\nmain()\n"
    module = code + "import runpy\nrunpy.run_module('hetinfra.cli', run_name='__main__')\n"  # python -m hetinfra.cli
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for launch, given, expected in ((console, None, "1"), (console, "2", "2"), (module, None, "1")):
        run_env = env if given is None else {**env, "OPENBLAS_NUM_THREADS": given}
        done = subprocess.run([sys.executable, "-c", launch], capture_output=True, text=True, timeout=60, env=run_env)
        assert done.returncode == 0, done.stderr
        value, threads = done.stdout.split()[-2:]
        assert value == expected
        if given is None and os.path.isdir("/proc/self/task"):
            assert threads == "1"  # numpy loaded, and no BLAS thread beside the main one
