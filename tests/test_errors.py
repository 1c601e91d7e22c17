"""hetinfra.errors: the "did you mean" hint every reader of names gives (GPUs, clouds, regions, keys)."""

from __future__ import annotations

import string
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.catalog.gpus import GPUS
from hetinfra.errors import MAX_COLUMNS, MIN_COLUMNS, closest, did_you_mean


def test_a_name_in_another_case_is_the_suggestion():
    """By edit distance alone 'l4' was nearer 'T4' and 'h100' nearer 'V100'."""
    assert did_you_mean("l4", sorted(GPUS)) == "did you mean 'L4'?"
    assert did_you_mean("h100", sorted(GPUS)) == "did you mean 'H100'?"
    assert did_you_mean("a100-80gb", sorted(GPUS)) == "did you mean 'A100-80GB'?"


#: names as they are written here: GPUs, clouds, regions, keys
NAME = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=12)


@given(st.lists(NAME, min_size=1, max_size=20), st.data())
def test_any_choice_typed_in_another_case_is_found(choices, data):
    choice = data.draw(st.sampled_from(choices))
    typed = data.draw(st.sampled_from([choice.lower(), choice.upper(), choice.swapcase()]))
    assert closest(typed, choices).casefold() == choice.casefold()


#: what COLUMNS and LINES may hold: numbers in any script ('²', '٣'), 0, huge, text, nothing
SIZES = st.one_of(st.integers(0, 10**12).map(str), st.sampled_from(["²", "٣", "१२०", " 90 ", "-5", "1e3", ""]),
                  st.text(max_size=6))
CELL = "p5.48xlarge-us-east-1"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=SIZES, lines=SIZES, terminal=st.booleans())
def test_every_console_draws_a_table_whatever_the_terminal_size_variables_hold(monkeypatch, columns, lines, terminal):
    """Rich took COLUMNS and LINES as they stood: COLUMNS=0 on a terminal printed nothing (exit 0),
    COLUMNS=3 a few characters a line, and '²' (Rich's isdigit() passes it, int() does not) was a
    ValueError traceback in every command that prints a table, on a terminal or not. The consoles of
    `plan`, `simulate`, `status`, `prices` and `feeds` are drawn at least MIN_COLUMNS wide."""
    from rich.table import Table

    from hetinfra.cli.common import summary_console
    from hetinfra.cli.feeds import _console
    from hetinfra.tables import print_table

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("LINES", lines)
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")  # Rich's own switch: the stream is taken as a terminal
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    for make in (summary_console, _console):
        out = make()
        assert MIN_COLUMNS <= out.width <= MAX_COLUMNS
        table = Table("instance type", "$/h")
        table.add_row(CELL, "98.32")
        with out.capture() as captured:
            print_table(out, table)  # the one printer of tables: a cell too long for the width folds
        assert not Counter(CELL) - Counter(captured.get())  # every character of it: none cut to "…"


def test_no_module_makes_a_console_of_its_own():
    """Every Rich console comes from hetinfra.errors.console (which gives Rich its size)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    own = [f"{p.relative_to(root)}:{n}" for folder in ("hetinfra", "price_feeds", "solver", "stacks")
           for p in sorted((root / folder).rglob("*.py"))
           for n, line in enumerate(p.read_text().splitlines(), 1)
           if re.search(r"\bConsole\(", line) and not line.lstrip().startswith("#")
           and p != root / "hetinfra" / "errors.py"]
    assert own == []
