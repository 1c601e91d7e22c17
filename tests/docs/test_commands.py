"""Every shell command shown in README.md and docs/ runs, and exits as documented (the convention is in
tests/docs/pages.py and docs/writing-docs.md).

Commands run in-process through click's CliRunner, from one scratch folder per test session that
links the repository's `services/` (so `services/chat.yaml` and `out/chat` read as in a checkout),
with a private HOME and cache, no cloud credentials and no `pulumi` on PATH: what a newcomer's
fresh checkout sees (tests/conftest.py newcomer_env). A command that appears on several pages runs
once per session (plans are the expensive part), so the pages share their planned out folders; each
page still plans what it uses before it uses it, so any one page passes on its own. The README's plan
of an example is the one the whole test run shares (tests/conftest.py example_plans, made by the
same command in the same kind of folder): its out folder is copied in, not planned again.

The README's Quick start is checked against .ci/run (which runs its install and the whole suite) and
its printed output against a real run of its `hetinfra plan` (measured seconds aside).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ExamplePlans, checkout_folder, invoke_in, newcomer_env
from tests.docs.pages import REPO, Command, commands, doc_pages

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


@pytest.fixture(scope="session")
def doc_shell(tmp_path_factory, example_plans) -> DocShell:
    return DocShell(tmp_path_factory.mktemp("doc-shell"), example_plans)


def pages_with_commands() -> list[Path]:
    return [page for page in doc_pages() if page.exists() and commands(page)]


@pytest.mark.parametrize("page", pages_with_commands(), ids=lambda p: str(p.relative_to(REPO)))
def test_documented_commands_exit_as_documented(page, doc_shell):
    for command in commands(page):
        if command.text == ci_test_line():
            continue  # the whole suite: .ci/run runs it (test_quick_start_is_what_ci_runs)
        res = doc_shell.run(command)
        assert res.exit_code == command.exit_code, (
            f"{command.where()}: `{command.text}` exited {res.exit_code}, documented "
            f"{command.exit_code}\nstdout: {res.stdout[-1500:]}\nstderr: {res.stderr[-1500:]}")
        shown = shown_json(command)
        if shown is not None:
            assert key_shape(json.loads(res.stdout)) == key_shape(shown), (
                f"{command.where()}: the JSON shown has other keys than `{command.text}` prints:\n{res.stdout}")


def shown_json(command: Command):
    """The document shown after a `--json` command, when what is shown is one whole JSON document."""
    if "--json" not in command.text.split():
        return None
    try:
        return json.loads("\n".join(command.output))
    except ValueError:
        return None


def key_shape(value):
    """A document's keys, nested; a list stands for its first element (values are left out)."""
    if isinstance(value, dict):
        return {key: key_shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [key_shape(value[0])] if value else []
    return None


def quick_start() -> list[Command]:
    found = commands(REPO / "README.md")[:2]
    assert len(found) == 2, "README.md's first block holds the two Quick-start commands"
    return found


def test_quick_start_is_what_ci_runs():
    plan, suite = quick_start()
    assert suite.text == ci_test_line(), "keep README's second Quick-start command and .ci/run's last line identical"
    assert plan.text.startswith(ci_install_prefix() + " && .venv/bin/hetinfra plan ")


def normalized(text: str) -> str:
    """Measured seconds out, whitespace (Rich's padding and line wrapping) collapsed."""
    text = re.sub(r"build \d+\.\d+s \+ solve \d+\.\d+s", "build Xs + solve Xs", text)
    return " ".join(text.split())


def test_quick_start_output_is_real(doc_shell):
    plan, _ = quick_start()
    res = doc_shell.run(plan)
    assert res.exit_code == 0, res.stderr
    shown = "\n".join(plan.output)
    assert normalized(shown) == normalized(res.stdout + res.stderr), (
        "README's Quick-start output differs from a real run: re-capture it\n" + res.stdout + res.stderr)
