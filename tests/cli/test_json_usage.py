"""``--json`` keeps its promise when click itself refuses a flag or an argument (a usage error,
exit 2, raised before the command runs): stdout holds the one JSON error document every other
failure prints (docs/reference/json-outputs.md), click's usage text stays on stderr."""

from __future__ import annotations

import click
import pytest

from hetinfra.cli.app import cli
from tests.fuzz.conftest import strict_json

#: click types that refuse the value below (a number, a range, a choice)
VALUED = (click.types.IntParamType, click.types.FloatParamType, click.Choice)
BAD_VALUE = "not-a-value"


def json_commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    """(command path, command) of every command of the group, nested ones too, that has --json."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from json_commands(command, (*path, name))
        elif any("--json" in p.opts for p in command.params if isinstance(p, click.Option)):
            yield (*path, name), command


def bad_option(command: click.Command) -> list[str]:
    """A refused value for the command's first typed option, else an option it does not have."""
    for p in command.params:
        if isinstance(p, click.Option) and not p.is_flag and p.nargs == 1 and isinstance(p.type, VALUED):
            return [f"{p.opts[0]}={BAD_VALUE}"]
    return ["--no-such-option"]


def placeholders(command: click.Command) -> list[str]:
    """A value for each positional argument (after the bad option, which click checks first)."""
    return [f"arg{i}" for i, p in enumerate(command.params) if isinstance(p, click.Argument)
            for _ in range(max(p.nargs, 1))]


COMMANDS = list(json_commands())


def test_every_json_command_is_found():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"plan", "simulate", "replan", "prices", "estimate", "apply", "destroy", "feeds list"} <= names


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
@pytest.mark.parametrize("how", ["bad value", "unknown option"])
def test_a_usage_error_under_json_prints_the_error_document(run_cli, path, command, how):
    bad = bad_option(command) if how == "bad value" else ["--no-such-option"]
    code, out, err = run_cli(*path, "--json", *bad, *placeholders(command))
    assert code == 2, err
    doc = strict_json(out)  # the whole of stdout: exactly one document
    assert doc["exit_code"] == 2 and doc["error"]["exit_code"] == 2
    assert doc["error"]["type"] == "InvalidInputError"
    option = bad[0].split("=")[0]
    assert option in doc["error"]["message"] and f"'hetinfra {' '.join(path)} -h'" in doc["error"]["hint"]
    assert f" {' '.join(path)} [OPTIONS]" in err and option in err  # click's text, as without --json


@pytest.mark.parametrize("path,command", COMMANDS[:2], ids=[" ".join(p) for p, _ in COMMANDS[:2]])
def test_without_json_a_usage_error_prints_nothing_on_stdout(run_cli, path, command):
    code, out, err = run_cli(*path, *bad_option(command), *placeholders(command))
    assert code == 2 and out == "" and "Usage:" in err


def test_json_after_the_double_dash_is_an_argument_not_the_flag(run_cli):
    code, out, err = run_cli("plan", "--max-age-h=-1", "--", "--json")
    assert code == 2 and out == ""


def test_the_entry_point_prints_it_too(monkeypatch, capsys):
    """hetinfra.cli.app.main, where the installed command runs click, goes through the same group."""
    import gc

    from hetinfra.cli import app

    before = gc.get_threshold()
    monkeypatch.setattr("sys.argv", ["hetinfra", "prices", "--json", "--limit", "0"])
    try:
        with pytest.raises(SystemExit) as done:
            app.main()
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    captured = capsys.readouterr()
    assert done.value.code == 2
    assert "'--limit'" in strict_json(captured.out)["error"]["message"]
    assert "prices [OPTIONS]" in captured.err  # click's usage text (the program name comes from argv)
