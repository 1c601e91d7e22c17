"""The typed shape of one ``vllm bench serve --save-result`` object: what profile-import accepts.

A result file comes from another program (any vLLM version, or hand-edited), so every key we read
is typed here, once, and each failure is an InvalidInputError naming ``file: key`` (exit 2): a
string for a count, a list of lists for ``input_lens``, ``1e308`` tokens, ``max_concurrency: [1]``
or ``true`` for a rate never reach ``int()``, ``max()`` or a set. Latency statistics
(``<stat>_ttft_ms``) are read on demand by :meth:`hetinfra.perf.bench_import.BenchPoint.latency`
(NaN allowed there: vLLM writes it when no request completed).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from hetinfra.errors import InvalidInputError, dotted

RESULT_HINT = "expected the JSON that `vllm bench serve --save-result` writes"
#: the most tokens one request of a result may have (as for the profiles CSV)
MAX_TOKENS = 10_000_000
#: the most requests a run may count (a benchmark sends thousands)
MAX_COUNT = 10**12


def _where(info: ValidationInfo) -> str:
    return (info.context or {}).get("where", "result")


def number(v: object, where: str, key: str, *, allow_nan: bool = False) -> float:
    """A JSON number (never a bool or a string), finite unless ``allow_nan``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidInputError(f"{where}: key '{key}' must be a number, got {json.dumps(v)[:40]}", hint=RESULT_HINT)
    if not allow_nan and not math.isfinite(v):
        raise InvalidInputError(f"{where}: key '{key}' must be finite, got {v}", hint=RESULT_HINT)
    return float(v)


def count(v: object, where: str, key: str, low: int = 0) -> int:
    n = number(v, where, key)
    if n < low or n > MAX_COUNT or n != int(n):
        raise InvalidInputError(f"{where}: key '{key}' must be a count (integer >= {low}), got {v}", hint=RESULT_HINT)
    return int(n)


def tokens(v: object, where: str, key: str) -> int:
    """A request size: a whole number 1..MAX_TOKENS; ``--metadata`` saves it as a string."""
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise InvalidInputError(f"{where}: key '{key}' must be a token count, got {v!r}"[:160]) from None
    n = number(v, where, key)
    if not 1 <= n <= MAX_TOKENS or n != int(n):
        raise InvalidInputError(f"{where}: key '{key}' must be a whole number of tokens in 1..{MAX_TOKENS}, got {v}")
    return int(n)


def _typed(kind):
    """A BeforeValidator that runs ``kind(value, where, key)`` (the key is the field's name)."""
    return BeforeValidator(lambda v, info: kind(v, _where(info), info.field_name))


def _model_id(v: object, info: ValidationInfo) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidInputError(f"{_where(info)}: key 'model_id' must be a non-empty string", hint="or pass --model")
    return v.strip()


def _rate(v: object, info: ValidationInfo) -> float:
    if v == "inf" or (isinstance(v, float) and v == math.inf):
        return math.inf  # --request-rate inf: a burst, skipped by the caller
    rate = number(v, _where(info), "request_rate")
    if rate <= 0:
        raise InvalidInputError(f"{_where(info)}: key 'request_rate' must be > 0, got {v}")
    return rate


def _throughput(v: object, info: ValidationInfo) -> float:
    thr = number(v, _where(info), "request_throughput")
    if thr < 0:
        raise InvalidInputError(f"{_where(info)}: key 'request_throughput' must be >= 0, got {thr}")
    return thr


def _lens(v: object, info: ValidationInfo) -> list[int] | None:
    """``input_lens``/``output_lens`` (``--save-detailed``): token counts per request, 0 allowed."""
    if v is None:
        return None
    if not isinstance(v, list):
        raise InvalidInputError(f"{_where(info)}: key '{info.field_name}' must be a list of token counts")
    return [count(x, _where(info), info.field_name) for x in v]


def _total(v: object, info: ValidationInfo) -> float | None:
    return None if v is None else max(0.0, number(v, _where(info), info.field_name))


def _concurrency(v: object, info: ValidationInfo) -> int | None:
    return None if v is None else count(v, _where(info), "max_concurrency", low=1)


class BenchResult(BaseModel):
    """The keys of a result object profile-import reads; the rest (latency statistics) stays in ``extra``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model_id: Annotated[str, BeforeValidator(_model_id)]
    request_rate: Annotated[float, BeforeValidator(_rate)]
    completed: Annotated[int, _typed(count)]
    failed: Annotated[int, _typed(count)] = 0
    request_throughput: Annotated[float, BeforeValidator(_throughput)]
    random_input_len: Annotated[Optional[int], _typed(tokens)] = None
    random_output_len: Annotated[Optional[int], _typed(tokens)] = None
    input_lens: Annotated[Optional[list[int]], BeforeValidator(_lens)] = None
    output_lens: Annotated[Optional[list[int]], BeforeValidator(_lens)] = None
    total_input_tokens: Annotated[Optional[float], BeforeValidator(_total)] = None
    total_output_tokens: Annotated[Optional[float], BeforeValidator(_total)] = None
    max_concurrency: Annotated[Optional[int], BeforeValidator(_concurrency)] = None


def parse_bench_result(obj: Any, where: str) -> BenchResult:
    """``obj`` as a :class:`BenchResult`, or an InvalidInputError naming ``where`` and the key."""
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where}: expected a JSON object, got {type(obj).__name__}", hint=RESULT_HINT)
    try:
        return BenchResult.model_validate(obj, context={"where": where})
    except ValidationError as exc:  # only "missing" is left to pydantic: every type check raises our own error
        err = exc.errors(include_url=False)[0]
        key = dotted(err["loc"])
        what = "missing" if err["type"] == "missing" else err["msg"]
        raise InvalidInputError(f"{where}: key '{key}' {what}", hint=RESULT_HINT) from None
