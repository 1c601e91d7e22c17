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

What each command prints is compared with what the page shows after it (tests/docs/outputs.py: an
excerpt, in order, timing figures and paths aside); tools/gen_docs.py --outputs refreshes the pages.
The README's Quick start is checked against .ci/run (which runs its install and the whole suite) and
its printed output, whole, against a real run of its `hetinfra plan` (measured seconds aside).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.docs.outputs import drift
from tests.docs.pages import REPO, Command, commands, doc_pages
from tests.docs.shell import DocShell, ci_install_prefix, ci_test_line


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
        drifted = drift(command.output, res.printed(), doc_shell.root)
        assert drifted is None, drifted.message(command.where(), command.text)


def test_a_figure_that_drifted_fails(doc_shell, tmp_path):
    """A planted drift: the README's Quick start showing another saving than the run prints (the
    "49% where the run shows 63.1%" of issue 34) and the cron guide another cost."""
    readme = (REPO / "README.md").read_text()
    plan = next(line for line in readme.splitlines() if line.startswith("│ L4 "))
    planted = tmp_path / "README.md"
    planted.write_text(readme.replace(plan, re.sub(r"\d+\.\d%", "49.0%", plan)))
    command = commands(planted)[0]
    found = drift(command.output, doc_shell.run(command).printed(), doc_shell.root)
    assert found is not None and "49.0%" in found.shown and found.nearest.strip() == plan.strip()
    cron = (REPO / "docs" / "guides" / "cron-replan.md").read_text().replace("nothing differs; $", "nothing differs; $1")
    (tmp_path / "cron.md").write_text(cron)
    replan = next(c for c in commands(tmp_path / "cron.md") if c.text.startswith("hetinfra replan"))
    for earlier in commands(tmp_path / "cron.md"):  # the plan it reads first
        if earlier is replan:
            break
        doc_shell.run(earlier)
    assert drift(replan.output, doc_shell.run(replan).printed(), doc_shell.root) is not None


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
