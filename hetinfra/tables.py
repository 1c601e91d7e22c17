"""Every table hetinfra prints goes through :func:`print_table`, at the console's width (hetinfra.errors.
terminal_size, the one reader of the terminal's size). Rich fits a table wider than its console by
cutting cells to "…" and, short of room, by dropping columns to nothing: at 80 columns `simulate`
printed its classes as ``in<=250,o…`` (three rows of that one name), at 40 every figure as ``3…``,
and at 20 the plan summary's model and place columns vanished. Here a table that does not fit wraps
its cells instead (``fold``: a long name breaks across lines, nothing is cut); one whose figures
cannot fit even so is printed as records, one ``column: value`` line each, so every cell is shown
whole on any terminal of at least MIN_COLUMNS."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["print_table"]

#: the narrowest a column of words may fold to; a table that needs narrower is printed as records
FOLD_MIN = 6
#: wider than any table: a measurement's room (Rich clamps what it measures to the room it is given)
_ROOM = 10**6


def _characters(text: str) -> Counter:
    return Counter(c for c in text if not c.isspace())


def _whole(console: "Console", table: "Table") -> bool:
    """Whether Rich draws ``table`` at the console's width with every character of its cells and
    headers (a cell cut to "…" or a column dropped to nothing loses some)."""
    from rich.text import Text

    cells = [c.header for c in table.columns] + [x for c in table.columns for x in c.cells]
    wanted = _characters(" ".join(console.render_str(x).plain if isinstance(x, str) else x.plain
                                  if isinstance(x, Text) else "" for x in cells))
    drawn = _characters("".join(seg.text for line in console.render_lines(table, console.options, pad=False)
                                for seg in line))
    return not wanted - drawn


def _foldable(console: "Console", table: "Table") -> bool:
    """Whether ``table`` fits the console with each column of words at least FOLD_MIN wide (or its widest
    cell, if narrower) and each column of figures (``no_wrap``) whole: folding narrower gave columns
    one character wide, whole but unreadable."""
    from rich.measure import Measurement

    room = console.options.update(max_width=_ROOM)
    widest = [max([Measurement.get(console, room, x).maximum for x in (c.header, *c.cells)] + [0])
              for c in table.columns]
    overhead = Measurement.get(console, room, table).maximum - sum(widest)  # borders and padding
    return overhead + sum(w if c.no_wrap else min(w, FOLD_MIN) for c, w in zip(table.columns, widest)) \
        <= console.width


def print_table(console: "Console", table: "Table") -> None:
    """``table`` on ``console``: as it is where it fits; else with every cell folding where it is too
    long (no "…"), where Rich can then draw every cell whole; else as records."""
    from rich.measure import Measurement

    if Measurement.get(console, console.options.update(max_width=_ROOM), table).maximum <= console.width:
        console.print(table)
        return
    for c in table.columns:
        c.overflow = "fold"  # a word longer than its column breaks across lines, never "…"
    if _foldable(console, table) and _whole(console, table):
        console.print(table)
    else:
        _records(console, table)


def _records(console: "Console", table: "Table") -> None:
    """One ``header: value`` line per cell, rows apart, under the table's title and over its caption."""
    from rich.text import Text

    def text(cell) -> Text:
        t = console.render_str(cell) if isinstance(cell, str) else cell.copy() if isinstance(cell, Text) else \
            Text(str(cell))
        return Text(" ").join(t.split("\n")) if "\n" in t.plain else t  # a stacked cell on one line

    if table.title:
        console.print(text(table.title), style="italic")
    columns = [(text(c.header).plain, list(c.cells)) for c in table.columns]
    for row in range(table.row_count):
        for k, (head, cells) in enumerate(columns):
            line = Text("- " if k == 0 else "  ")
            line.append(f"{head}: " if head else "", style="bold")
            line.append_text(text(cells[row]))
            console.print(line, overflow="fold")
    if table.caption:
        console.print(text(table.caption), style="dim")
