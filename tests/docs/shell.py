"""Running the documented commands as a newcomer runs them (tests/docs/test_commands.py, and
tools/gen_docs.py --outputs, which refreshes the pages' shown output from these runs)."""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ExamplePlans, checkout_folder, invoke_in, newcomer_env
from tests.docs.pages import REPO, Command

CLI_NAMES = {"hetinfra", ".venv/bin/hetinfra"}
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def ci_test_line() -> str:
    """The command .ci/run runs (its last line): the README's second Quick-start command."""
    return (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]


def ci_install_prefix() -> str:
    """.ci/run's venv and install steps, which the first Quick-start command shares (without the test extra)."""
    return ci_test_line().split(" && .venv/bin/python -m pytest")[0].replace(".[test]", ".").replace("'.'", ".")


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def printed(self) -> str:
        """What a terminal shows: stdout, then stderr (the pages show them together)."""
        return self.stdout + self.stderr


class DocShell:
    """Runs documented commands in-process in one scratch folder, each distinct command once. A
    command that is the README's plan of an example (`hetinfra plan services/<name>.yaml --out
    out/<name>`, run the same way, by tests/conftest.py ExamplePlans) takes that run's out folder and
    output instead of planning the example again."""

    def __init__(self, root: Path, examples: ExamplePlans):
        self.root = checkout_folder(root)
        self.examples = examples
        self.env = newcomer_env(root, root / "cache")
        self.done: dict[str, Result] = {}  # by command, so pages share their plans

    def run(self, command: Command) -> Result:
        args = self.argv(command)
        key = " ".join(["hetinfra" if arg in CLI_NAMES else arg for arg in args])  # README's .venv/bin/hetinfra too
        if key not in self.done:
            self.done[key] = self._example_plan(args) or self._invoke(command, args)
        return self.done[key]

    def _example_plan(self, args: list[str]) -> Result | None:
        """The session's run of this command when it is an example's plan into a folder not written yet."""
        name = next((n for n in self.examples.names() if args[1:] == self.examples.command(n)), None)
        if name is None or (self.root / "out" / name).exists():
            return None
        shutil.copytree(self.examples[name][0], self.root / "out" / name, symlinks=True)
        return Result(*self.examples.output(name))

    def _invoke(self, command: Command, args: list[str]) -> Result:
        env = self.env.copy()
        while args and ASSIGNMENT.match(args[0]):
            name, _, value = args.pop(0).partition("=")
            env[name] = value
        if "--target" in args and args[args.index("--target") + 1:][:1] != ["pulumi"]:
            pytest.fail(f"{command.where()}: SkyPilot targets are not run here (SkyPilot's SDK would start its "
                        f"API server in the background): {command.text}")
        if not args or args[0] not in CLI_NAMES:
            pytest.fail(f"{command.where()}: only `hetinfra ...` commands (with VAR=value before them) run "
                        f"in the docs' tests; show other shell in a ```text block: {command.text}")
        res = invoke_in(self.root, args[1:], env)
        return Result(res.exit_code, res.stdout, res.stderr)

    @staticmethod
    def argv(command: Command) -> list[str]:
        text = command.text
        if text.startswith("python3 -m venv"):  # the Quick start: .ci/run's install, then the command
            prefix, _, text = text.rpartition(" && ")
            assert prefix == ci_install_prefix(), f"{command.where()}: install steps differ from .ci/run's"
        if re.search(r"[|;<>`]|&&|\$\(", text):
            pytest.fail(f"{command.where()}: pipes, redirections and command lists are not run; "
                        f"show one hetinfra command per `$ ` line: {text}")
        return shlex.split(text, comments=True)
