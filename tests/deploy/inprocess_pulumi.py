"""Run the recording ``pulumi`` stand-in (fake_pulumi.py) inside the test process.

Why: an apply, status or replan runs the CLI 10-30 times, and each run of the stand-in as a
subprocess costs a Python start-up (~0.2 s on these machines), which made the deploy and replan
tests most of the suite's time. What those tests check is hetinfra's use of the Automation API and
what the stand-in's cloud holds, not process spawning, so by default the stand-in's code runs
in-process with exactly the argv, working folder, environment and stdin the CLI would get, and its
output and exit code come back through the Automation API's own CommandResult/CommandError.

The real binary boundary (an executable ``pulumi`` on PATH, spawned by the Automation API and by
``pulumi_driver._cli`` with secrets on stdin) stays covered by the tests marked
``@pytest.mark.pulumi_subprocess`` (tests/deploy/conftest.py): they get the executable only.

The stand-in's globals (sys.argv, os.environ, the working folder, sys.path, stdin/stdout/stderr)
are saved and restored around each call; hetinfra runs the CLI from one thread at a time.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

FAKE = Path(__file__).with_name("fake_pulumi.py")
_CODE = compile(FAKE.read_text(), str(FAKE), "exec")


def run_stand_in(args: list[str], cwd: str, env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    """Run fake_pulumi.py as ``pulumi *args`` would run in ``cwd`` with ``env``; returns
    (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_env, saved_cwd, saved_stdin, saved_path = sys.argv, dict(os.environ), os.getcwd(), sys.stdin, \
        list(sys.path)
    try:
        sys.argv = ["pulumi", *args]
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.stdin = io.StringIO(stdin or "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(_CODE, {"__name__": "__main__", "__file__": str(FAKE)})
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
    return code, out.getvalue(), err.getvalue()


def patch_in_process(monkeypatch, exe: Path) -> None:
    """Make the Automation API's PulumiCommand.run and pulumi_driver's direct CLI calls run the
    stand-in at ``exe`` in-process (see the module docstring)."""
    from pulumi.automation import _cmd

    from hetinfra.deploy import pulumi_driver

    def command_run(self, args, cwd, additional_env, on_output=None, on_error=None):
        args = list(args)
        if "--non-interactive" not in args:  # as PulumiCommand.run does
            args.insert(0, "--non-interactive")
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        code, stdout, stderr = run_stand_in(args, cwd, env)
        for text, callback in ((stdout, on_output), (stderr, on_error)):
            if callback:
                for line in text.splitlines():
                    callback(line.rstrip())
        result = _cmd.CommandResult(stdout=stdout.rstrip("\n"), stderr=stderr.rstrip("\n"), code=code)
        if code != 0:
            raise _cmd.create_command_error(result)
        return result

    real_run = subprocess.run

    def subprocess_run(cmd, *a, input=None, cwd=None, env=None, **kw):
        if not (isinstance(cmd, list) and cmd and str(cmd[0]) in ("pulumi", str(exe))):
            return real_run(cmd, *a, input=input, cwd=cwd, env=env, **kw)
        text = kw.get("text") or kw.get("universal_newlines") or kw.get("encoding")
        if isinstance(input, bytes):
            input = input.decode()
        code, stdout, stderr = run_stand_in([str(c) for c in cmd[1:]], str(cwd or os.getcwd()),
                                            dict(env if env is not None else os.environ), input)
        if not text:  # as subprocess.run returns without text=True
            stdout, stderr = stdout.encode(), stderr.encode()
        return subprocess.CompletedProcess(cmd, code, stdout, stderr)

    monkeypatch.setattr(_cmd.PulumiCommand, "run", command_run)
    monkeypatch.setattr(pulumi_driver.subprocess, "run", subprocess_run)
