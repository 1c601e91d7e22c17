"""Every path flag and argument refuses an empty string (click reads '' as the current directory:
`replan --state ''` re-planned against whatever the shell's folder held)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from hetinfra.cli import cli
from hetinfra.cli.common import OutDir, UserPath

CLI = Path(__file__).resolve().parents[2] / "hetinfra" / "cli"


def every_command(cmd=cli, names=()) -> list[tuple[list[str], click.Command]]:
    """(command path, command) of every command, groups included (test_number_flags reads it too)."""
    out = [(list(names), cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += every_command(sub, [*names, name])
    return out


def _path_params():
    """(command path, parameter) of every UserPath parameter of every command."""
    return [(names, p) for names, cmd in every_command() for p in cmd.params if isinstance(p.type, UserPath)]


PARAMS = _path_params()


def test_no_command_takes_a_path_but_through_userpath():
    assert len(PARAMS) >= 20
    for f in CLI.glob("*.py"):
        assert "click.Path(" not in f.read_text() or f.name == "common.py", f.name


def _command(names):
    cmd = cli
    for n in names:
        cmd = cmd.commands[n]
    return cmd


def _line(names: list[str], param: click.Parameter, value: str) -> list[str]:
    """The command line that gives ``param`` ``value`` first (an option first on the line; an argument
    with the others set to a placeholder), so that what refuses it is UserPath, not a missing argument."""
    arguments = [p for p in _command(names).params if isinstance(p, click.Argument)]
    if isinstance(param, click.Argument):
        return [*names, *(value if a is param else "x" for a in arguments)]
    return [*names, param.opts[0], value, *("x" for a in arguments if a.required)]


@pytest.mark.parametrize("names, param", PARAMS, ids=[f"{' '.join(n)} {p.name}" for n, p in PARAMS])
def test_an_empty_path_is_exit_2(names, param):
    """The empty value is read first (an option first on the line; an argument with the others set to a
    placeholder), so what refuses it is UserPath, not a missing argument."""
    res = CliRunner().invoke(cli, _line(names, param, ""))
    assert res.exit_code == 2 and "is empty: give a path" in res.output, res.output


#: paths no file can have: a name over NAME_MAX (255 bytes), in any place of the path
UNUSABLE = ["y" * 300, "x/" + "y" * 300 + "/z", "y" * 300 + ".yaml"]


@pytest.mark.parametrize("names, param", PARAMS, ids=[f"{' '.join(n)} {p.name}" for n, p in PARAMS])
@pytest.mark.parametrize("unusable", UNUSABLE, ids=["name", "nested", "file"])
def test_a_path_no_file_can_have_is_exit_2_naming_why(names, param, unusable):
    """Path.exists raises on a name over 255 bytes (os.stat's ENAMETOOLONG): `plan --out`, `status`,
    `apply`, `destroy`, `profile` and `replan --state` each ended in that traceback."""
    res = CliRunner().invoke(cli, _line(names, param, unusable))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "File name too long" in res.output or "does not exist" in res.output, res.output  # click's exists=True


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.sampled_from(PARAMS), st.sampled_from(["{loop}", "{loop}/x", "{loop}/x.yaml"]))
def test_property_a_symlink_loop_on_any_path_is_exit_2_naming_it(tmp_path_factory, named, shape):
    """A loop of symbolic links where a path flag or argument looks (the path itself or a folder above
    it): `plan --out LOOP` was a RuntimeError traceback (pathlib's resolve), the flags click checks for
    existence called it "does not exist". hetinfra.envpaths.path_problem follows the links, naming the loop."""
    names, param = named
    base = tmp_path_factory.mktemp("loop")
    (base / "a").symlink_to(base / "b")
    (base / "b").symlink_to(base / "a")
    args = _line(names, param, shape.format(loop=base / "a"))
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (args, res.output)
    assert "Too many levels of symbolic links" in res.output, (args, res.output)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.sampled_from(PARAMS), st.integers(0x80, 0xFF), st.sampled_from(["{b}", "d{b}/x", "s{b}.yaml"]))
def test_property_a_path_that_is_not_utf8_is_exit_2_naming_it(named, byte, shape):
    """A file name of bytes that are not UTF-8 reaches Python as a surrogate ('\\udcff'): `plan` of a
    spec so named was a UnicodeEncodeError traceback (its path hashed for plan.json's service_id), an
    OUT so named was written and printed as '?'. path_problem refuses it for every path parameter."""
    names, param = named
    value = shape.format(b=bytes([byte]).decode("utf-8", "surrogateescape"))
    res = CliRunner().invoke(cli, _line(names, param, value))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert f"is not UTF-8 text (byte 0x{byte:02x})" in res.output, res.output


#: every command that reads an OUT folder, as called on one (PLACEHOLDER: where the folder goes)
OUT_READERS = [["status", "OUT"], ["status", "OUT", "--json"], ["status", "OUT", "--no-refresh"],
               ["destroy", "OUT", "--yes"], ["apply", "OUT", "--yes"], ["profile", "OUT", "--launch", "--dry-run"]]


@pytest.mark.parametrize("args", OUT_READERS, ids=" ".join)
def test_a_missing_out_folder_is_invalid_input(args, tmp_path):
    """A mistyped OUT is exit 2 with what to give, never "nothing deployed" and exit 0 (status did)."""
    missing = tmp_path / "does-not-exist"
    res = CliRunner().invoke(cli, [str(missing) if a == "OUT" else a for a in args])
    assert res.exit_code == 2, res.output
    assert f"{missing}: no such directory" in res.output and "hetinfra plan SPEC --out DIR" in res.output
    assert "nothing deployed" not in res.output
    if "--json" in args:  # stdout holds the error document (hetinfra.cli.common.json_usage_error)
        assert '"exit_code": 2' in res.output


def test_an_out_folder_without_state_is_nothing_deployed(tmp_path):
    res = CliRunner().invoke(cli, ["status", str(tmp_path)])
    assert res.exit_code == 0 and "nothing deployed (no state.json)" in res.output


def test_every_out_folder_argument_is_an_outdir():
    """The arguments named for an OUT folder all use OutDir (the one place a missing one is refused)."""
    named = [(names, p) for names, cmd in every_command() for p in cmd.params
             if isinstance(p, click.Argument) and p.name in ("out", "plan_dir")]
    assert len(named) >= 4
    assert all(isinstance(p.type, OutDir) for _, p in named), [(n, p.name) for n, p in named]


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.sampled_from(PARAMS))
def test_property_a_dash_on_any_path_is_exit_2_saying_it_is_no_stream(named):
    """'-' is standard input or output to many programs; click reads it as a name where ``allow_dash`` is not
    set (none of hetinfra's paths sets it): `plan SPEC --out -` made a folder named '-', `profile-import --out -`
    a file, and `status -` said "no such directory". UserPath refuses it, with the spelling of a path so named."""
    names, param = named
    res = CliRunner().invoke(cli, _line(names, param, "-"))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "'-' is not standard input or output here" in res.output and "./-" in res.output, res.output
