"""Load ``service.yaml`` into a :class:`ServiceSpec`, turning every problem into a located error.

A pydantic error location (``models.0.slo.tpot_ms``) is mapped back to the YAML line it came from,
and unknown keys get a did-you-mean from the model's field names.
"""

from __future__ import annotations

import math
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hetinfra.csvtext import is_plain_number
from hetinfra.errors import InvalidInputError, closest, dotted, real_keys, union_errors
from hetinfra.fileio import read_text
from hetinfra.spec.adapters import check_adapters
from hetinfra.spec.models import ServiceSpec
from hetinfra.yamltext import compose_and_load, yaml_problem

#: the largest spec file read (1 MiB; the examples are a few KiB)
MAX_SPEC_BYTES = 1 << 20

Loc = tuple[Any, ...]


def _marks(node: yaml.Node, loc: Loc, out: dict[Loc, tuple[int, int]], written: dict[Loc, str]) -> None:
    """Record the 1-based (line, column) of every key/item path in the YAML node tree, and in
    ``written`` each scalar value as the file spells it (``0.10``, which YAML reads as 0.1)."""
    out.setdefault(loc, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.ScalarNode):
        written[loc] = node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = loc + (_key(key),)
            out[sub] = (key.start_mark.line + 1, key.start_mark.column + 1)
            written[(KEY,) + sub] = key.value
            _marks(value, sub, out, written)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _marks(item, loc + (i,), out, written)


#: ``written``'s entries of how a key is spelled: ``(KEY, *path)``
KEY = object()


def _key(node: yaml.Node) -> Any:
    """A mapping key as the loaded data holds it, so an error about it finds its line: text, else the value
    YAML reads (``1:`` the integer 1, ``on:`` True; ``null:``, ``1.5:`` and a date as pydantic's location
    writes them, 'None', '1.5', 'datetime.date(2026, 1, 1)').
    Such a key had been looked for under its text, and the error put at the mapping's first key
    (``s.yaml:3:1: [1]: Keys should be strings`` of a ``1:`` at line 30)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:str":
        return node.value
    try:
        value = yaml.SafeLoader("").construct_object(node)
    except yaml.YAMLError:
        return node.value
    return value if isinstance(value, int) else repr(value)  # pydantic's location holds other keys as repr()


def _unquoted_text_hint(err: dict, loc: Loc, written: dict[Loc, str]) -> str:
    """Where a text field got a YAML number or boolean (``vllm_version: 0.10`` reads as 0.1, ``stack:
    no`` as false), say so and show the quoted value: the number YAML made of it is not what the user
    wrote."""
    value = err.get("input")
    if err["type"] != "string_type" or not isinstance(value, (bool, int, float)):
        return ""
    spelled = written.get(loc, str(value))
    kind = "a boolean" if isinstance(value, bool) else "a number"
    return f"; YAML reads the unquoted {spelled} as {kind} ({value!r}): quote it, e.g. \"{spelled}\""


def _yaml_number(text: str) -> str | None:
    """How to write ``text`` so that YAML 1.1 reads it as a number, where Python reads it as a finite
    one and YAML does not (``1e3``, ``1E-2``: YAML 1.1's exponent form needs a dot and a signed
    exponent, as in ``1.0e+3``); else None."""
    if not text.isascii():  # float() reads other scripts' digits; YAML and every CSV reader do not
        return None
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        return None
    if not math.isfinite(value) or not isinstance(compose_and_load(text, "<value>")[1], str):
        return None
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    mantissa, _, exponent = repr(value).partition("e")
    if not exponent:
        return mantissa
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent if exponent[0] in '+-' else '+' + exponent}"


#: the YAML 1.1 number forms hetinfra.yamltext reads as text (NUMBER_FORMS): a leading 0, base 60
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+(?:\.[0-9_]*)?\Z")
_BASE_60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?\Z")


def _unquoted_number_hint(err: dict) -> str:
    """Where a number field got text that reads as a number everywhere but in YAML 1.1 (``rate_rps:
    1e3`` is the string '1e3'), say so and show a spelling YAML reads as that number."""
    value = err.get("input")
    if err["type"] not in ("float_type", "int_type") or not isinstance(value, str):
        return ""
    text = value.strip()
    if _BASE_60.match(text):
        return (f"; {value} is text here: YAML 1.1 would read it in base 60 ({yaml.safe_load(text)!r}), not as "
                "written: write the number you mean")
    if not text.isascii():
        plain = "".join(str(unicodedata.decimal(c, c)) for c in text)
        if not is_plain_number(plain):
            return ""
        return (f"; {value} is written with digits of another script, which YAML reads as text: write "
                f"{_yaml_number(plain) or plain}")
    spelled = _yaml_number(text)
    if spelled is None:
        return ""
    if _LEADING_ZERO.match(text):
        return f"; {value} is text here (a leading 0 reads as octal in YAML 1.1, 014 as 12): write {spelled}"
    return (f"; YAML 1.1 reads {value} as text, not a number (an exponent needs a dot and a sign there): "
            f"write {spelled}")


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at ``loc`` (for did-you-mean)."""
    model: Any = ServiceSpec
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        model = _inner_model(fields[part].annotation)
        if model is None:
            return None
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


#: what YAML reads a key that is not text as, by its Python type
_KINDS = {"int": "a number", "float": "a number", "bool": "true or false", "str": "null", "NoneType": "null",
          "date": "a date", "datetime": "a time", "bytes": "binary data"}


def _fmt_loc(loc: Loc) -> str:
    return dotted(loc) or "(top level)"


#: the longest error line about a spec value: a value or key of 5,000 characters was printed whole
MAX_LINE = 300


def _clipped(line: str) -> str:
    """``line`` within MAX_LINE characters: its start (where, which field) and its end (the rule, the
    fix) kept, the middle (a long value or key) left out and counted."""
    if len(line) <= MAX_LINE:
        return line
    head, tail = MAX_LINE * 2 // 3, MAX_LINE // 4
    return f"{line[:head]}...({len(line) - head - tail} characters)...{line[-tail:]}"


def _describe(err: dict, marks: dict[Loc, tuple[int, int]], where: str, written: dict[Loc, str]) -> str:
    return _clipped(_described(err, marks, where, written))


def _described(err: dict, marks: dict[Loc, tuple[int, int]], where: str, written: dict[Loc, str]) -> str:
    # pydantic puts union/validator tags in the location; keep only real keys and indices.
    loc = real_keys(err["loc"], ServiceSpec)
    line = None
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in marks:
            line = marks[loc[:cut]]
            break
    at = f"{where}:{line[0]}:{line[1]}" if line else where
    field = _fmt_loc(loc)
    if err["type"] == "extra_forbidden":
        parent, key = loc[:-1], str(loc[-1])
        model = _model_at(parent)
        names = list(model.model_fields) if model else []
        close = closest(key, names, cutoff=0.6)
        hint = f"did you mean '{close}'?" if close else (f"allowed keys: {', '.join(names)}" if names else "")
        return f"{at}: unknown field '{field}'" + (f"; {hint}" if hint else "")
    if err["type"] == "missing":
        return f"{at}: missing required field '{field}'"
    if err["type"] == "invalid_key":
        spelled = written.get((KEY,) + tuple(loc), str(loc[-1]) if loc else "")
        kind = type(err["input"] if "input" in err else loc[-1]).__name__ if loc else "not text"
        return (f"{at}: {_fmt_loc(loc[:-1])}: the key {spelled} is read as {_KINDS.get(kind, kind)}, not text; "
                f"quote it ('{spelled}':) or correct it")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    hint = _unquoted_text_hint(err, loc, written) or _unquoted_number_hint(err)  # they show the input
    if not hint and "input" in err and err["type"] != "value_error" and not isinstance(err["input"], (dict, list)):
        msg = f"{msg} (got {err['input']!r})"
    return f"{at}: {field}: {msg}{hint}"


class SpecLocator:
    """Maps a spec path such as ``("models", 0, "model")`` to ``file:line:col`` for later errors."""

    def __init__(self, where: str, marks: dict[Loc, tuple[int, int]]):
        self.where, self.marks = where, marks

    def __call__(self, *loc) -> str:
        for cut in range(len(loc), -1, -1):
            if tuple(loc[:cut]) in self.marks:
                line, col = self.marks[tuple(loc[:cut])]
                return f"{self.where}:{line}:{col}"
        return self.where


def parse_spec_text(text: str, where: str = "<spec>") -> ServiceSpec:
    """Validate YAML text into a ServiceSpec; raises InvalidInputError with file:line:col."""
    return parse_spec_located(text, where)[0]


def parse_spec_located(text: str, where: str = "<spec>") -> tuple[ServiceSpec, SpecLocator]:
    if len(text) > MAX_SPEC_BYTES:
        raise InvalidInputError(f"{where}: the spec is {len(text)} characters, more than the {MAX_SPEC_BYTES} allowed")
    try:
        node, data = compose_and_load(text, where)
    except yaml.YAMLError as exc:
        raise InvalidInputError(yaml_problem(exc, where, text), hint="check indentation and quoting on that line"
                                if isinstance(exc, yaml.MarkedYAMLError) else None) from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}: the spec must be a YAML mapping (name:, models:, ...), "
                                f"got {type(data).__name__}")
    marks: dict[Loc, tuple[int, int]] = {}
    written: dict[Loc, str] = {}
    if node is not None:
        _marks(node, (), marks, written)
    try:
        spec = ServiceSpec.model_validate(data)
    except ValidationError as exc:
        # Unknown keys first: a typo usually also causes the "missing" error of the intended key.
        errors = sorted(union_errors(exc.errors(include_url=False), ServiceSpec),
                        key=lambda e: e["type"] != "extra_forbidden")
        lines = [_describe(e, marks, where, written) for e in errors[:3]]
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise InvalidInputError("\n".join(lines) + more) from None
    locate = SpecLocator(where, marks)
    check_adapters(spec, locate)
    return spec, locate


def load_spec(path: str | Path) -> tuple[ServiceSpec, str, SpecLocator]:
    """Read and validate a spec file: (spec, its text, a locator for later errors)."""
    p = Path(path)
    text = read_text(p, "spec file", max_bytes=MAX_SPEC_BYTES,
                     hint="pass the path of a service YAML, e.g. services/chat.yaml")
    spec, locate = parse_spec_located(text, str(p))
    from hetinfra.spec.files import check_spec_files

    check_spec_files(spec, p.parent, locate)  # a path that can never be read: exit 2 at its line
    return spec, text, locate
