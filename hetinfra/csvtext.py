"""CSV text, split one way (it imports only hetinfra.errors): :func:`csv_lines` and :func:`csv_records`
split every CSV text hetinfra reads (a BOM dropped, records numbered by the line they start on, a
column named twice refused); :func:`looks_like_header` is the one test of whether a CSV's first row
is a header; :func:`torn_last_row` finds a last row a stopped writer left cut short. Files are read by
hetinfra.fileio.read_text."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Iterator

from hetinfra.errors import InvalidInputError

__all__ = ["BOM", "PLAIN_NUMBER", "WIDTH_HINT", "check_width", "comma_items", "csv_header", "csv_lines", "csv_records", "is_plain_number",
           "looks_like_header", "number_cell", "plain_float", "torn_last_row", "whole_number", "width_problem"]


#: a number as a CSV cell writes one: ASCII digits with an optional sign, decimal point and exponent
#: (Python's float() also reads '1_000', Unicode digits such as '١٢' and 'infinity', which no
#: spreadsheet writes and which read silently as something else: '1_0' was 10)
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


#: a whole number as text writes one: ASCII digits only
_WHOLE = re.compile(r"[0-9]+")


def whole_number(text: str) -> int | None:
    """The int ``text`` writes in ASCII digits (no sign, space or underscore), else None: the one reading of
    a count, a port, a length or a process id from text another program wrote. ``str.isdigit()`` is true of
    '²' and '٣' too: int() refused the first (a ValueError traceback where a Pulumi state's group size, an
    Azure image version or a folder beside OUT held one) and read the second as 3."""
    return int(text) if isinstance(text, str) and _WHOLE.fullmatch(text) else None


def is_plain_number(cell: str) -> bool:
    """Whether ``cell`` (stripped by the caller) is a number as :data:`PLAIN_NUMBER` writes one."""
    return PLAIN_NUMBER.fullmatch(cell) is not None


def plain_float(cell: str) -> float:
    """The finite number ``cell`` (stripped by the caller) writes as :data:`PLAIN_NUMBER` writes one, else
    a ValueError: the reading of a number in a price feed's CSV (an offers file given as ``--feeds PATH``,
    the SkyPilot catalog, AWS's price list), whose readers drop the row or refuse the file. They read cells
    with float(): '1_0' was an offer at $10/h, '٣' one at $3/h, and a GPU count of 'inf' an OverflowError
    that failed the whole catalog."""
    if not is_plain_number(cell):
        raise ValueError(f"{cell[:40]!r} is not a number as a CSV writes one (ASCII digits, point, exponent)")
    value = float(cell)
    if not math.isfinite(value):
        raise ValueError(f"{cell[:40]!r} is past the largest number")
    return value


def number_cell(raw: str | None, *, where: str, column: str, lo: float, hi: float,
                whole: bool = False) -> float | None:
    """A CSV cell as a finite number in [lo, hi] (None when empty), or an InvalidInputError naming
    ``where`` (file:line) and the column: the one parser of every number read from a user's CSV."""
    raw = (raw or "").strip()
    if raw == "":
        return None
    if not is_plain_number(raw):
        raise InvalidInputError(f"{where}: column '{column}' is {raw[:40]!r}, not a number",
                                hint="write it with ASCII digits, an optional sign, point and exponent (1500, 0.25, 1e-3)")
    value = float(raw)
    if value != value or not lo <= value <= hi or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise InvalidInputError(f"{where}: column '{column}' must be {kind} in [{lo:g}, {hi:g}], got {raw[:40]!r}")
    return value

def looks_like_header(row: list[str]) -> bool:
    """Whether the first row of a headerless-or-not CSV is a header: no cell of it reads as a number.
    (A first row ``512.0,128`` or ``1e3,64`` is data; one number among names is a broken row, which
    the caller's parser then reports by its line.)"""
    cells = [c.strip() for c in row if c.strip()]
    return bool(cells) and not any(is_plain_number(c) for c in cells)


def comma_items(text: str | None, name: str, *, keep_empty: bool = False) -> tuple[str, ...]:
    """The items of a comma-separated value (a flag such as ``--rates 1,2,4``, ``--source aws,gcp``,
    ``--feeds live:aws,gcp``, or a variable such as ``HETINFRA_AWS_REGIONS``), each stripped: the one
    splitter of them all. A blank value has no items (its reader says what that means); an empty item
    among others (``aws,,gcp``, ``1,2,``) is an InvalidInputError naming ``name`` and the item's place:
    it was dropped silently, where a value meant there was likely lost (``512,,2048`` for three sizes).
    ``keep_empty``: empty items are returned as such, for ``HETINFRA_API_KEY`` alone, whose reader skips
    them: a secrets file often ends the value in a separator and a newline (``alice:k1,k2,\\r\\n``), an
    empty item there names no key and no client (each key is checked where it is read), so skipping it
    changes no authentication; in a flag or a feed variable it may be a value lost while editing."""
    if not (text or "").strip():
        return ()
    items = tuple(v.strip() for v in text.split(","))
    empty = [k for k, v in enumerate(items, start=1) if not v]
    if empty and not keep_empty:
        kept, sep = ",".join(v for v in items if v)[:60], " " if name.startswith("-") else "="
        raise InvalidInputError(f"{name}{sep}{text.strip()[:60]!r}: item {empty[0]} of {len(items)} is empty "
                                "(two commas together, or one at an end)",
                                hint="put one comma between items and none at the ends" + (
                                    f", e.g. {name}{sep}{kept}" if kept else ""))
    return items


#: a byte-order mark: a spreadsheet saving "CSV UTF-8" writes one at the start
BOM = "\ufeff"


def csv_lines(text: str, name: str) -> Iterator[tuple[int, list[str]]]:
    """(line where the record starts, cells) of every record of the CSV ``text`` (``name`` names it
    in errors), blank lines included as ``[]``: the one way every CSV is split (offers, caps,
    profiles, datasets, demand logs, catalogs, our data files; split otherwise only: the AWS price
    list, hundreds of MB filtered line by line, and price_feeds.skypilot_catalog, which tools import
    without hetinfra and which drops a BOM itself). A BOM at the start is dropped (read_text drops a
    file's; a text from a feed or a package may hold one, and the first column would be
    ``\ufeffcloud``); a record the csv module cannot split is an exit-2 error at its line."""
    reader = csv.reader(io.StringIO(text.removeprefix(BOM), newline=""))
    end = 0
    try:
        for cells in reader:
            yield end + 1, cells  # a quoted cell may span lines: the record starts after the last one
            end = reader.line_num
    except csv.Error as exc:
        raise InvalidInputError(f"{name}:{reader.line_num}: not a CSV row ({exc})",
                                hint="save the file as CSV (comma-separated, quotes closed)") from None


def _spelling(column: str) -> str:
    """A column name as a reader compares spellings: lowercase, words joined by '_'."""
    return re.sub(r"[\s_-]+", "_", column.strip().lower())


def csv_header(cells: list[str], name: str, line: int = 1, known: tuple[str, ...] = ()) -> list[str]:
    """The column names of a header row, stripped; a name given twice is refused (a reader keyed by
    name would take one of the two cells, silently), and so is a name spelled otherwise than one of
    ``known``, the reader's columns (``Statistic``, ``max rps``, ``Region``: a reader that ignores
    columns it does not know dropped it silently, one that needs it said it was missing). Empty
    names are left to the readers."""
    names = [c.strip() for c in cells]
    first: dict[str, int] = {}
    spelled = {_spelling(c): c for c in known}
    for k, column in enumerate(names, start=1):
        if column and column in first:
            raise InvalidInputError(f"{name}:{line}: column '{column[:40]}' appears twice (columns {first[column]} "
                                    f"and {k})", hint="remove or rename one of them: only one can be read")
        first.setdefault(column, k)
        meant = spelled.get(_spelling(column))
        if meant is not None and column != meant:
            raise InvalidInputError(f"{name}:{line}: column {k} is named {column[:40]!r}, not {meant!r}",
                                    hint=f"rename it {meant}: column names are lowercase, words joined by '_'")
    return names


def width_problem(cells: list[str], header: list[str]) -> str | None:
    """What is wrong with a row holding a non-empty cell past the header's columns, or None. A comma
    inside a number (``4,5`` for 4.5, ``1,024`` for 1024) splits its cell in two, the row's cells
    shift, and the last one fell off the end unread, silently (a profile's max_rps ``4,5`` read as
    4). Empty cells past the header are the trailing commas a spreadsheet writes: kept."""
    extra = [k for k in range(len(header), len(cells)) if cells[k].strip()]
    if not extra:
        return None
    return (f"{len(cells)} cells, the header has {len(header)} (the last '{header[-1][:40] if header else ''}'): "
            f"cell {extra[0] + 1} {cells[extra[0]][:40]!r} has no column")


#: the fix of a row :func:`width_problem` refuses
WIDTH_HINT = "a comma inside a value splits it (write 4.5, not 4,5; 1024, not 1,024): remove it or quote the cell"


def check_width(cells: list[str], header: list[str], name: str, line: int) -> None:
    """An InvalidInputError at ``name:line`` where :func:`width_problem` finds one."""
    problem = width_problem(cells, header)
    if problem:
        raise InvalidInputError(f"{name}:{line}: {problem}", hint=WIDTH_HINT)


def csv_records(text: str, name: str, *, wide: str = "refuse",
                known: tuple[str, ...] = ()) -> tuple[list[str], Iterator[tuple[int, dict]]]:
    """The header of the CSV ``text`` (:func:`csv_header`; [] when empty) and its records as (line,
    row), blank lines skipped, each row as csv.DictReader gives it: name -> cell, None for a cell
    the row lacks. ``known``: the reader's columns (:func:`csv_header`). A row with a non-empty cell
    past the header's width is refused at its line (:func:`width_problem`); with ``wide="keep"`` (a
    reader that drops bad rows itself) the row holds the problem's text under the key None."""
    lines = csv_lines(text, name)
    first = next(lines, None)
    header = csv_header(first[1], name, first[0], known) if first is not None else []

    def rows() -> Iterator[tuple[int, dict]]:
        for line, cells in lines:
            if not cells:
                continue
            problem = width_problem(cells, header)
            if problem and wide == "refuse":
                raise InvalidInputError(f"{name}:{line}: {problem}", hint=WIDTH_HINT)
            row: dict = dict(zip(header, cells))
            if problem:
                row[None] = problem
            for column in header[len(cells):]:
                row.setdefault(column, None)
            yield line, row

    return header, rows()


def torn_last_row(text: str) -> tuple[str, str | None]:
    """``text`` without a last row cut short, and the row cut (None when there is none). A last line
    without its newline holding fewer cells than the header is the row a writer was writing when it
    stopped (a gateway killed, a flush in progress while this reads the live file): hetinfra's
    appenders write whole rows, each ending in a newline, as wide as the header. The demand log's readers (replan's, the
    gateway's join of its rotations) leave it out: it was refused, and the whole log with it
    (``demand.csv:3002: 3 fields, the header has 8``), or joined to the next file's first row."""
    start = text.rfind("\n") + 1
    if not text or text.endswith("\n") or start == 0:
        return text, None
    header = next(csv.reader([text[:text.find("\n")].rstrip("\r")]), [])
    last = next(csv.reader([text[start:]]), [])
    if len(last) >= len(header):
        return text, None
    return text[:start], text[start:]
