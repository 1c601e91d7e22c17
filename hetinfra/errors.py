"""hetinfra's own exception classes, caught once at the CLI edge.

Every user-facing failure is one of these; its message is one or two lines that say
what is wrong, where, and how to fix it. The class fixes the process exit code.
"""

from __future__ import annotations

import re
from typing import Iterable


def closest(value: str, choices, cutoff: float = 0.5) -> str | None:
    """The choice closest to a mistyped ``value`` (for "did you mean" hints), or None."""
    import difflib

    found = difflib.get_close_matches(value, list(choices), n=1, cutoff=cutoff)
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



def real_keys(loc: Iterable) -> tuple:
    """pydantic's error location without the validator and union-branch tags it adds: the keys and
    indices of the file itself (what a spec's line lookup and ``dotted`` read)."""
    return tuple(p for p in loc if isinstance(p, int) or not _BRANCH_PART.fullmatch(str(p)))


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
