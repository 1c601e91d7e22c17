"""Every number flag is a FiniteFloat, and its help states its range as a reader can use it: never
click's ``x<=None`` for a flag that takes any finite number (``simulate --load`` showed it)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from hetinfra.cli import cli
from hetinfra.cli.common import FiniteFloat
from tests.cli.test_path_flags import every_command


COMMANDS = every_command()


def test_every_float_flag_is_finite_float():
    floats = [(names, p.name) for names, cmd in COMMANDS for p in cmd.params
              if isinstance(p.type, click.types.FloatParamType) and not isinstance(p.type, FiniteFloat)]
    assert floats == []


@pytest.mark.parametrize("names", [names for names, _cmd in COMMANDS], ids=lambda n: " ".join(n) or "hetinfra")
def test_help_never_shows_an_absent_bound(names):
    result = CliRunner().invoke(cli, [*names, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "None]" not in result.output and "None;" not in result.output and "<=None" not in result.output


def test_an_unbounded_number_shows_no_range_and_a_bounded_one_its_bounds():
    assert FiniteFloat()._describe_range() == ""
    assert FiniteFloat(min=0.5)._describe_range() == "x>=0.5"
    assert FiniteFloat(min=1, max=2)._describe_range() == "1<=x<=2"

