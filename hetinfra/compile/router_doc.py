"""The typed router/weights.json (``router_version`` 1; the format is described in
hetinfra.compile.router): what the gateway reads, validated once with a clear error naming the file
and the field. Keys the gateway does not use are allowed (the file is hand-editable and grows), but
every key it does use has its type and range checked: a tampered weights.json is exit 2 with
``weights.json: models.chat.classes.c1.weights.u1: ...``, never a traceback or a NaN weight."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetinfra.errors import InvalidInputError, dotted

#: the largest token edge a class may have (as the spec's MAX_TOKENS)
MAX_TOKENS = 10_000_000
Weight = Annotated[float, Field(ge=0, le=1e12)]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class ClassWeights(_Doc):
    input_tokens: int = Field(ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(ge=0, le=MAX_TOKENS)
    weights: dict[str, Weight] = {}


class EndpointShare(_Doc):
    share: Weight | None = None


class ModelWeights(_Doc):
    classes: dict[str, ClassWeights] = {}
    endpoints: dict[str, EndpointShare] = {}
    default_max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)


class RouterWeights(_Doc):
    router_version: Literal[1]
    service: str | None = None
    models: dict[str, ModelWeights] = {}


def parse_weights(doc: object, where: str) -> RouterWeights:
    """Validate a decoded weights document; InvalidInputError names ``where`` and the first bad field."""
    try:
        return RouterWeights.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = dotted(err["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidInputError(f"{where}: {field}: {err['msg']}{more}",
                                hint="router/weights.json is written by `hetinfra plan`; plan again or fix that "
                                     "field") from None
