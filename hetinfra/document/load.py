"""Reading plan.json and state.json: one JSON read and one model parse, each failure a 1-2 line
InvalidInputError (exit 2) that names the file and the field, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hetinfra.errors import InvalidInputError
from hetinfra.errors import dotted
from hetinfra.fileio import parse_json, present, read_text

M = TypeVar("M", bound=BaseModel)


def read_json(path: Path, *, what: str, hint: str) -> Any:
    """The JSON value in ``path``; a missing, unreadable or malformed file is an InvalidInputError."""
    if not present(path):
        raise InvalidInputError(f"no {path.name} in {path.parent} ({path} not found)", hint=hint)
    text = read_text(path, what, hint=hint)  # the one reader: a regular file, bounded, UTF-8
    try:
        return parse_json(text, str(path), hint=hint)  # nested at most MAX_JSON_DEPTH, no NaN tokens
    except InvalidInputError as exc:  # "plan.json:1:2 is not valid JSON (...)", as this reader always said
        raise InvalidInputError(exc.message.replace(": not valid JSON", " is not valid JSON", 1), hint=hint) from None


def parse_document(model: type[M], doc: Any, path: Path | str, *, hint: str, context: dict | None = None) -> M:
    """``model`` of ``doc`` (validated with ``context``), or an InvalidInputError naming ``path`` and the
    first wrong field."""
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{path}: (top level) is not a JSON object but {type(doc).__name__}", hint=hint)
    try:
        return model.model_validate(doc, context=context)
    except ValidationError as exc:
        cause = exc.errors(include_url=False)[0].get("ctx", {}).get("error")
        raise InvalidInputError(f"{path}: {describe(exc)}", hint=getattr(cause, "hint", None) or hint) from None


class HintedValueError(ValueError):
    """A validator's error that says how to mend it (the InvalidInputError's hint, not the document's)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def describe(exc: ValidationError) -> str:
    """The first error as ``field.path what is wrong`` (a union's branches report one error)."""
    err = exc.errors(include_url=False)[0]
    where = dotted(err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "is missing"
    elif err["type"] == "extra_forbidden":
        msg = "is not a key of this format (written by another hetinfra version?)"
    elif err["type"] == "too_short" and not err.get("input"):
        msg = f"is empty: it needs at least {err['ctx']['min_length']} entry"
    elif err["type"] != "value_error":
        msg = f"is {shown(err.get('input'))}: {msg[0].lower()}{msg[1:]}"
    return f"{where} {msg}" if where else msg


#: the most characters of a wrong value an error shows: the message stays one or two lines
SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """``value``'s repr as an error names it: a list or object (a whole section in the wrong shape)
    by its kind and size, anything longer than SHOWN_CHARS cut with '...'."""
    if isinstance(value, (list, dict)) and len(repr(value)) > SHOWN_CHARS:
        return f"a {'list' if isinstance(value, list) else 'object'} of {len(value)} entries"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."
