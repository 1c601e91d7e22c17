"""Tables on any terminal (hetinfra.tables.print_table, at hetinfra.errors.terminal_size's width): every
cell is printed whole, folded or as records, and no line is wider than the console. Rich cut cells to
"…" (at 80 columns `simulate` printed three classes as ``in<=250,o…``) and dropped columns to nothing
(at 20 the plan summary's model and place); COLUMNS=20 drew 40 columns, which a 20-column terminal
wraps line by line."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from hetinfra.errors import MIN_COLUMNS
from tests.plan.golden_plans import EXAMPLES, filled_golden

WORD = st.text(alphabet="abcdefxyz0123456789.-_|<=,%/", min_size=1, max_size=30)
CELL = st.lists(WORD, min_size=1, max_size=3).map(" ".join)


def _shown(text: str) -> Counter:
    """The characters of printed text that a cell may hold (no spaces, box lines, bullets or colons)."""
    return Counter(c for c in text if not c.isspace() and not "\u2500" <= c <= "\u257f" and c not in "-:")


def _printed(width: int, draw) -> str:
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    with console.capture() as captured:
        draw(console)
    return captured.get()


@settings(max_examples=60)
@given(width=st.integers(MIN_COLUMNS, 160), headers=st.lists(WORD, min_size=1, max_size=9), data=st.data())
def test_every_cell_is_printed_whole_within_the_width(width, headers, data):
    from hetinfra.tables import print_table

    rows = data.draw(st.lists(st.lists(CELL, min_size=len(headers), max_size=len(headers)), min_size=1, max_size=4))
    no_wrap = data.draw(st.lists(st.booleans(), min_size=len(headers), max_size=len(headers)))
    table = Table(title="t")
    for h, nw in zip(headers, no_wrap):
        table.add_column(h, no_wrap=nw)
    for r in rows:
        table.add_row(*r)
    out = _printed(width, lambda c: print_table(c, table))
    assert all(cell_len(line) <= width for line in out.splitlines()), out
    assert "…" not in out
    assert not _shown(" ".join(headers + [c for r in rows for c in r])) - _shown(out), out


@settings(max_examples=30)
@given(name=st.sampled_from(EXAMPLES), width=st.integers(MIN_COLUMNS, 140))
def test_the_plan_summary_shows_every_allocation_within_the_width(name, width):
    """Each allocation's model, count and $/h are in `plan`'s summary at any width of MIN_COLUMNS or more."""
    from hetinfra.document import Plan
    from hetinfra.plan.summary import render_summary

    plan = Plan.model_validate(filled_golden(name))
    out = _printed(width, lambda c: render_summary(plan, c))
    assert "…" not in out.split("Allocations", 1)[1].split("\n\n")[0]
    figures = " ".join(f"{a.model} {a.count} {a.cost_usd_per_hour:.2f}" for a in plan.allocations)
    assert not _shown(figures) - _shown(out)
    assert all(cell_len(line) <= width for line in out.splitlines()), out


@pytest.mark.parametrize("columns", ["20", "25", "39"])
def test_a_narrow_terminal_is_drawn_at_its_width(monkeypatch, columns):
    from hetinfra.errors import terminal_size

    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_size()[0] == int(columns)


def test_a_table_that_would_fold_to_slivers_is_printed_as_records():
    """Nine columns at 40: folding kept every character in columns one wide (``T``/``T``/``F``/``T`` down
    a header); such a table is printed as records."""
    from hetinfra.tables import print_table

    table = Table(title="chat-8b")
    for h in ("class", "n", "TTFT p50", "p99", "TPOT p50", "p99", "attain", "req/s", "met"):
        table.add_column(h)
    table.add_row("in<=250,out<=100", "3628", "52.7", "172", "34.0", "46.7", "1.000", "2.39", "yes")
    out = _printed(40, lambda c: print_table(c, table))
    assert "┃" not in out and "- class: in<=250,out<=100" in out and "  TTFT p50: 52.7" in out, out


def test_every_module_that_builds_a_table_prints_it_through_print_table():
    """A module that makes a Rich Table prints it with hetinfra.tables.print_table (which folds or makes
    records where it does not fit), never with console.print alone."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    bare = []
    for p in sorted((root / "hetinfra").rglob("*.py")):
        text = p.read_text()
        if re.search(r"\bTable\((title|show|box|\"|\))", text) or "Table.grid(" in text:
            if "print_table" not in text and p.name != "tables.py":
                bare.append(str(p.relative_to(root)))
    assert bare == []
