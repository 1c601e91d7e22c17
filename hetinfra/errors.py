"""hetinfra's own exception classes, caught once at the CLI edge.

Every user-facing failure is one of these; its message is one or two lines that say
what is wrong, where, and how to fix it. The class fixes the process exit code. Also the one way
text reaches a terminal: :func:`shown`, :func:`markup_escaped` and the consoles of :func:`console`.
"""

from __future__ import annotations

import re
from typing import Iterable


def shown(text: str) -> str:
    """``text`` as a terminal may show it: every character that does not print (an escape sequence's
    ESC, a carriage return, a bidi override, a zero-width space), newlines aside, written as its
    Python escape. Errors and warnings quote what files hold (a CSV cell, a state.json URL), and an
    escape sequence there reached the terminal as is: the one way both are printed."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\n" else ascii(ch)[1:-1] for ch in text)


def markup_escaped(text: str) -> str:
    """``text`` (:func:`shown`) as a Rich console prints it as written: Rich reads '[/]' or '[bold]' as
    markup, so a CSV cell, a file name or a warning quoting one was restyled or, with '[/]', a
    MarkupError traceback. Every string from a file that a Rich console prints goes through it."""
    from rich.markup import escape  # Rich: a dependency of every command that prints tables

    return escape(shown(text))


#: the narrowest and widest a console draws at. Rich took COLUMNS as it stood: COLUMNS=0 on a terminal
#: printed nothing at all (exit 0), COLUMNS=3 a few characters a line, and a COLUMNS or LINES that
#: Rich's isdigit() passes and int() refuses ('²', a superscript) was a ValueError traceback in every
#: command that prints a table. A terminal of MIN_COLUMNS or more is drawn at its width (COLUMNS=20 drew
#: 40 columns, each line wrapped by the terminal in two); tables that do not fit it fold or become
#: records (hetinfra.tables.print_table). Below MIN_COLUMNS, the floor: MIN_COLUMNS
MIN_COLUMNS, MAX_COLUMNS = 20, 1000
MAX_LINES = 10_000


def terminal_size() -> tuple[int, int]:
    """(columns, lines) a console draws at: COLUMNS and LINES where they are whole numbers in ASCII
    digits above 0 (as Rich and shutil read them), else the terminal's (stdout's, stderr's or stdin's),
    else 80 x 25; the columns within [MIN_COLUMNS, MAX_COLUMNS], the lines within [1, MAX_LINES]."""
    import os
    import re

    def number(name: str) -> int:  # csvtext.whole_number's reading (csvtext imports this module)
        text = os.environ.get(name, "").strip()
        return int(text) if re.fullmatch(r"[0-9]{1,7}", text) else 0

    columns, lines = number("COLUMNS"), number("LINES")
    for fd in (1, 2, 0):
        if columns and lines:
            break
        try:
            size = os.get_terminal_size(fd)
        except (OSError, ValueError):
            continue
        columns, lines = columns or size.columns, lines or size.lines
    return min(max(columns or 80, MIN_COLUMNS), MAX_COLUMNS), min(max(lines or 25, 1), MAX_LINES)


def console(*, stderr: bool = False, pipe_width: int | None = None, **kwargs):
    """A Rich console of :func:`terminal_size` (given a size, Rich never reads COLUMNS or LINES itself),
    ``pipe_width`` columns wide where its stream is no terminal (a table in a log does not wrap).
    Every console hetinfra prints through is made here (tests/test_errors.py holds the tree to it)."""
    from rich.console import Console  # Rich: a dependency of every command that prints tables

    width, height = terminal_size()
    out = Console(stderr=stderr, width=width, height=height, **kwargs)
    if pipe_width and not out.is_terminal:
        out = Console(stderr=stderr, width=pipe_width, height=height, **kwargs)
    return out


def closest(value: str, choices, cutoff: float = 0.5) -> str | None:
    """The choice closest to a mistyped ``value`` (for "did you mean" hints), or None. A choice that
    differs only in case comes first: by edit distance alone 'l4' was nearer 'T4' than 'L4', and
    'h100' nearer 'V100' than 'H100'."""
    import difflib

    choices = list(choices)
    folded = [c for c in choices if isinstance(c, str) and c.casefold() == str(value).casefold()]
    if folded:
        return folded[0]
    found = difflib.get_close_matches(value, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(value: str, choices) -> str:
    """"did you mean 'x'?" or, with nothing close, the first known names."""
    close = closest(value, choices)
    return f"did you mean '{close}'?" if close else f"known: {', '.join(sorted(choices)[:12])}"


#: pydantic's location parts that name a validator or a union branch, not a key of the file:
#: ``function-after[...]``, ``union[...]``, ``tagged-union[...]``, ``list[int]``, and the bare type tags
_BRANCH_PART = re.compile(r"[a-z][a-z-]*\[.*\]|(function|lax|constrained)-[a-z-]+|str|int|float|bool|none|dict|list",
                          re.DOTALL)
#: a key shown bare after a dot; any other key (a control character, a space, a dot, quotes, empty)
#: is shown as ``['...']`` with Python's escapes, so a location stays one line and reads unambiguously
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
#: the most characters of one key a location shows (a hand-edited file may hold any key)
SHOWN_KEY_CHARS = 40


def dotted(loc: Iterable) -> str:
    """pydantic's error location as every reader of a file names a field: ``allocations[0].count``, a key
    that is not a plain name as ``endpoints['\\n']``. Only branch tags pydantic adds are dropped:
    a file's key that merely starts like one (``stream``, ``integrity``) is kept."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _BRANCH_PART.fullmatch(str(part)):
            continue
        elif _PLAIN_KEY.fullmatch(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{str(part)[:SHOWN_KEY_CHARS]!r}]"
    return out



def real_keys(loc: Iterable, root=None) -> tuple:
    """pydantic's error location without the validator and union-branch tags it adds: the keys and
    indices of the file itself (what a spec's line lookup and ``dotted`` read). With ``root`` (the
    document's pydantic model) a union member's class name (``ArchitectureSpec``) goes too."""
    loc = _without_model_tags(tuple(loc), root) if root is not None else tuple(loc)
    return tuple(p for p in loc if isinstance(p, int) or not _BRANCH_PART.fullmatch(str(p)))


def _members(annotation) -> list:
    """The types ``annotation`` may hold: a union's members, Annotated and None unwrapped."""
    import types
    from typing import Annotated, Union, get_args, get_origin

    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _members(a)]
    return [] if annotation is type(None) else [annotation]


def _is_model(t) -> bool:
    return isinstance(t, type) and hasattr(t, "model_fields")


def _without_model_tags(loc: tuple, root) -> tuple:
    """``loc`` less the parts pydantic adds for a union member that is a model (its class name), found
    by walking ``root``'s fields along ``loc``: a file's key of the same spelling is kept."""
    from typing import get_args, get_origin

    out, current = [], [root]
    for part in loc:
        members = [m for a in current for m in _members(a)]
        models = {m.__name__: m for m in members if _is_model(m)}
        if len(members) > 1 and part in models:
            current = [models[part]]
            continue
        out.append(part)
        after = []
        for m in members:
            if _is_model(m):
                field = m.model_fields.get(part) if isinstance(part, str) else None
                after += [field.annotation] if field is not None else []
            elif get_origin(m) in (list, tuple, set, frozenset) and isinstance(part, int):
                after += list(get_args(m)[:1])
            elif get_origin(m) is dict:
                after += list(get_args(m)[1:2])
        current = after
    return tuple(out)


#: what a union branch that refused the input's type wanted, by pydantic's error type
_WANTED = {"model_type": "a mapping", "model_attributes_type": "a mapping", "dict_type": "a mapping",
           "string_type": "a string", "float_type": "a number", "int_type": "a whole number",
           "bool_type": "a boolean", "list_type": "a list", "int_from_float": "a whole number"}


def _branch_at(loc: tuple, root) -> int | None:
    """The index of the first union-branch tag in ``loc`` (a model's class name or a _BRANCH_PART tag)."""
    keep = _without_model_tags(loc, root)
    for k, part in enumerate(loc):
        if k >= len(keep) or keep[k] != part or (isinstance(part, str) and _BRANCH_PART.fullmatch(part)):
            return k
    return None


def union_errors(errors: list[dict], root) -> list[dict]:
    """pydantic's ``errors`` of a document of model ``root`` with each union's noise gone. A union
    reports every member's error: for a block missing a key, the block's error and also "Input should
    be a valid string" from a file-path member. Where some member accepted the input's type (its error
    lies deeper, or is about the value), the members that only refused the type are dropped; where
    every member refused the type, one error says what the union takes (``expected a mapping or a
    string``)."""
    groups: dict[tuple, list[tuple[int, dict]]] = {}
    for i, err in enumerate(errors):
        loc = tuple(err["loc"])
        k = _branch_at(loc, root)
        if k is not None:
            groups.setdefault(loc[:k], []).append((i, err))
    drop, merged = set(), {}
    for prefix, members in groups.items():
        k = len(prefix)
        if len({tuple(e["loc"])[k] for _, e in members}) < 2:
            continue  # one branch: a validator's tag, not a union's
        refused = [(i, e) for i, e in members if len(e["loc"]) == k + 1 and e["type"] in _WANTED]
        drop.update(i for i, _ in refused)
        if len(refused) == len(members):
            wanted = list(dict.fromkeys(_WANTED[e["type"]] for _, e in refused))
            merged[refused[0][0]] = {"type": "union_type", "loc": prefix, "msg": f"expected {' or '.join(wanted)}",
                                     "input": refused[0][1].get("input")}
    return [merged.get(i, e) for i, e in enumerate(errors) if i not in drop or i in merged]


class HetinfraError(Exception):
    """Base class. ``exit_code`` is the process exit status the CLI returns."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InvalidInputError(HetinfraError):
    """The spec, an offers/profiles file or a CLI argument is wrong (exit 2)."""

    exit_code = 2


class WriteError(InvalidInputError, OSError):
    """A file hetinfra writes could not be written: a full disk or quota, a read-only or unwritable folder
    (exit 2, naming the file and the system's reason). An OSError too (with its errno, strerror and
    filename), so a caller that says it in its own words (`plan --out`: "nothing was changed there")
    still does; where none does, the CLI edge prints it (a full disk was an OSError traceback in
    `profile-import --out`, `replan`, `apply` and `status`)."""

    @classmethod
    def of(cls, exc: OSError, path) -> "WriteError":
        error = cls(f"cannot write {path}: {exc.strerror or exc}",
                    hint="free space on its disk, or make the folder writable (or choose another place)")
        error.errno, error.strerror, error.filename = exc.errno, exc.strerror, exc.filename or str(path)
        return error


class InfeasibleError(HetinfraError):
    """No plan satisfies the spec; the message names what to relax (exit 3)."""

    exit_code = 3


class FeedError(HetinfraError):
    """A price/availability feed or a cloud provider failed (exit 4)."""

    exit_code = 4


class ProviderError(FeedError):
    """Pulumi, SkyPilot or a cloud is missing, not logged in, or failed during a deploy (exit 4)."""


class SolverError(HetinfraError):
    """The solver returned something we cannot trust (exit 1: a bug, not user error)."""

    exit_code = 1
