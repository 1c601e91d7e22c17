"""Every number flag is a FiniteFloat, and its help states its range as a reader can use it: never
click's ``x<=None`` for a flag that takes any finite number (``simulate --load`` showed it)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

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



def _numbers(cmd):
    """(flag, type) of each number parameter of ``cmd``: an int or float flag, and each number type
    a list flag converts its items with (profile --inputs/--outputs/--rates)."""
    for p in cmd.params:
        if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)):
            yield p.opts[0] if p.opts else p.name, p.type
        kind = getattr(p.callback, "__closure__", None) and next(
            (c.cell_contents for c in p.callback.__closure__ if isinstance(c.cell_contents, click.ParamType)), None)
        if kind is not None:
            yield p.opts[0], kind


def test_every_number_flag_has_an_upper_bound():
    """A number flag with no upper bound took any size: `gateway --demand-log-keep 10**20` hung the
    gateway at its first rotation and at GET /admin/demand.csv (a loop over 10**20 rotations), and
    `profile --inputs 99999999999999999999` reached vllm bench serve. Every one states its bound."""
    unbounded = [(" ".join(names), flag) for names, cmd in COMMANDS for flag, kind in _numbers(cmd)
                 if getattr(kind, "max", None) is None]
    assert unbounded == []


def test_the_bounds_are_those_of_the_fields_the_flags_feed():
    from hetinfra.cli import common
    from hetinfra.perf.profiles import RANGES
    from hetinfra.spec import models
    from hetinfra.spec.models import ServiceSpec

    assert common.MAX_TOKENS == models.MAX_TOKENS == RANGES["input_tokens"][1] == RANGES["output_tokens"][1]
    assert common.MAX_PARALLEL == RANGES["tp"][1] == RANGES["pp"][1]
    assert (common.MAX_TTFT_MS, common.MAX_TPOT_MS) == (models.MAX_TTFT_MS, models.MAX_TPOT_MS)
    budget = next(m.le for m in ServiceSpec.model_fields["budget_usd_per_hour"].metadata if hasattr(m, "le"))
    assert (common.MAX_RATE_RPS, common.MAX_BUDGET_USD_H) == (models.MAX_RATE_RPS, budget)


@pytest.mark.parametrize("args", [
    ["gateway", "OUT", "--demand-log-keep", "99999999999999999999"],
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--input", "1e30", "--output", "1"],
    ["profile", "--endpoint", "http://x", "--model", "m", "--gpu", "L4", "--tp", "1", "--inputs", "128,10000001"],
    ["profile", "--endpoint", "http://x", "--model", "m", "--gpu", "L4", "--tp", "1", "--rates", "1,inf"],
    ["simulate", "OUT", "--seed", str(2**64)],
])
def test_a_number_past_its_bound_is_refused_at_the_flag(tmp_path, args):
    (tmp_path / "plan.json").write_text("{}")
    args = [str(tmp_path) if a == "OUT" else a for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Invalid value for" in result.output, result.output


NUMBER_FLAGS = [(" ".join(names), flag, kind) for names, cmd in COMMANDS for flag, kind in _numbers(cmd)]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_every_number_flag_refuses_what_lies_past_its_bound(data):
    """Any command's any number flag, given a number past its upper bound (as written on a command
    line: digits, an exponent, a float), refuses it: no flag passes a size it cannot serve."""
    command, flag, kind = data.draw(st.sampled_from(NUMBER_FLAGS))
    top = getattr(kind, "max", None)
    top = 1e200 if top is None else top  # unbounded: any size passes, the property fails
    past = data.draw(st.one_of(st.integers(int(top) + 1, int(top) * 10 ** 6 + 10 ** 6).map(str),
                               st.floats(top * 1.001 + 1, 1e300).map(repr)))
    with pytest.raises(click.BadParameter):
        kind.convert(past, None, None)


def test_every_integer_flag_is_whole_range():
    from hetinfra.cli.common import WholeRange

    ints = [(names, p.name) for names, cmd in COMMANDS for p in cmd.params
            if isinstance(p.type, click.types.IntParamType) and not isinstance(p.type, WholeRange)]
    assert ints == []


#: numbers as int() and float() read them and no CSV cell or spec value may write them
NOT_AS_WRITTEN = ["1_0", "1_000", "٣", "１２", "²", " 5", "5 ", "\t7", "0x10", "١.٥"]


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_property_every_number_flag_takes_ascii_digits_only(data):
    """int() and float() read '1_0' as 10, Unicode digits ('٣', '１２') as numbers and spaces around one;
    every CSV reader and the spec refuse them (hetinfra.csvtext.PLAIN_NUMBER), and each number flag of
    each command, the items of a list flag too, took them: `prices --limit 1_0` listed 10 offers."""
    command, flag, kind = data.draw(st.sampled_from(NUMBER_FLAGS))
    text = data.draw(st.sampled_from(NOT_AS_WRITTEN))
    with pytest.raises(click.BadParameter, match="ASCII digits|not a number|not a valid"):
        kind.convert(text, None, None)
    assert kind.convert("1", None, None) in (1, 1.0) or getattr(kind, "min", 0) > 1
