"""Unit-bearing values, parsed in one place.

Durations accept a number (taken in the field's unit, milliseconds for ``*_ms``) or a string with
a unit: ``"120ms"``, ``"2s"``, ``"2 s"``. Anything else is a clear validation error.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|sec|seconds|min|m)?\s*\Z")
_TO_MS = {None: 1.0, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "seconds": 1000.0, "min": 60000.0, "m": 60000.0}

#: bound of free-scale numbers (shares, weights, accuracy scores, penalties)
MAX_SCALE = 1e12

_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMbBtT])?\s*\Z")
_SCALE = {None: 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_ms(value: object) -> float:
    """Milliseconds from ``120``, ``"120ms"`` or ``"0.12s"``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 120 (ms) or '2s', got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _TO_MS[m.group(2)]
    raise ValueError(f"expected a duration such as 120 (milliseconds), '120ms' or '2s', got {value!r}")


def parse_count(value: object) -> float:
    """A count from ``8030000000``, ``8.03e9`` or ``"8.03B"`` (k, M, B, T suffixes)."""
    if isinstance(value, bool):
        raise ValueError("expected a count such as 7e9 or '7B', got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _COUNT.match(value)
        if m:
            suffix = m.group(2).lower() if m.group(2) else None
            return float(m.group(1)) * _SCALE[suffix]
    raise ValueError(f"expected a count such as 7000000000, 7e9 or '7B', got {value!r}")


def _parsed(parse, **bounds: float):
    """A float read by ``parse`` (a number, or a string such as '3s' or '7B') within ``bounds`` (pydantic's
    gt, ge, lt, le). json_schema_input_type: the published schema accepts what the loader accepts, so an
    editor does not flag a valid spec, and states the bounds on its number (a bound on the field itself
    was checked but left out of the schema, or written there as pydantic's own 'gt'/'le' keys)."""
    number = Annotated[float, Field(**bounds)] if bounds else float
    return Annotated[float, Field(**bounds), BeforeValidator(parse, json_schema_input_type=number | str)]


def milliseconds(**bounds: float):
    """A duration in milliseconds: 250, or '250ms', '2s' (see :func:`parse_ms`), within ``bounds``."""
    return _parsed(parse_ms, **bounds)


def count(**bounds: float):
    """A count: 7000000000, 7e9 or '7B' (see :func:`parse_count`), within ``bounds``."""
    return _parsed(parse_count, **bounds)

