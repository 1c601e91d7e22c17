"""The pieces every plan.json / state.json model shares: the strict base class, the number type that
keeps JSON's ints as ints (so a round trip is byte-identical), and the string rules of values that
reach a shell, a command line or a resource name."""

from __future__ import annotations

import math
import re
from typing import Annotated, Iterable, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, WithJsonSchema

from hetinfra import PLAN_VERSION
from hetinfra.facts import MAX_PRICE_USD_PER_HOUR  # the most $/h of one instance (Price)
from hetinfra.facts import MAX_GPUS  # the most replicas, instances or engines one allocation may count
# the one rule of a string that reaches a shell, shared with the spec's loader (issue 36: plan.json
# never refuses what the spec accepted)
from hetinfra.spec.base import LOOSE_KEYS, PROSE_KEYS, QUOTE_META, SHELL_META, word_problem  # noqa: F401
from hetinfra.spec.models import MAX_CONTEXT, MAX_LAYERS, MAX_TOKENS

#: identifiers that end up in commands, scripts and resource names (a service id, a model source)
IDENT = re.compile(r"^[A-Za-z0-9._:/@+=,-]+$")


class Doc(BaseModel):
    """A section of plan.json or state.json: unknown keys are an error (the file is written by hetinfra;
    a key this version does not know means another version wrote it), types are not coerced ("2" is not
    a count), and the parsed document is read-only."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


def _finite(v: int | float) -> int | float:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


def _plan_version(v: int) -> int:
    if v != PLAN_VERSION:
        raise ValueError(f"{v!r}: this hetinfra reads plan_version {PLAN_VERSION} (plan again with this "
                         "hetinfra: `hetinfra plan SPEC --out OUT`)")
    return v


#: plan.json's ``plan_version``, as every reader of a plan (the document, the simulator) accepts it
PlanVersion = Annotated[StrictInt, AfterValidator(_plan_version)]


#: a JSON number, kept as written: 50 stays 50 and 50.0 stays 50.0 (plan.json's bytes round-trip)
Number = Annotated[Union[StrictInt, StrictFloat], AfterValidator(_finite), WithJsonSchema({"type": "number"})]

#: JSON Schema's name for each bound
_SCHEMA_BOUND = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def bounded(**bounds: float):
    """A :data:`Number` within ``bounds`` (pydantic's ge, le, gt, lt), which its JSON Schema states too
    (a bound given on the field itself is checked but lost from the schema: Number's schema replaces it)."""
    return Annotated[Union[StrictInt, StrictFloat], AfterValidator(_finite), Field(**bounds),
                     WithJsonSchema({"type": "number", **{_SCHEMA_BOUND[k]: v for k, v in bounds.items()}})]


#: a rate, a price, a time, a load: a Number >= 0
NonNegative = bounded(ge=0)
#: $/h of one instance, node or stage: a Number from 0 to an offer's bound (a price of 1e300 in a
#: hand-edited state.json was printed by `status` as the fleet's cost)
Price = bounded(ge=0, le=MAX_PRICE_USD_PER_HOUR)
#: a share of requests or of demand: a Number in [0, 1]
Fraction = bounded(ge=0, le=1)
#: a bandwidth, a size: a Number > 0
Positive = bounded(gt=0)

# Upper bounds of the counts that size a reader's memory or loops (the simulator builds one replica
# per ``count`` and one engine per ``engines_per_instance``; apply and the stacks make one resource per
# instance). Each is at the limit of what ``hetinfra plan`` plans (no realistic plan comes near it);
# a hand-edited ``count: 1000000000`` is refused at load (exit 2, naming the field) instead of
# simulating for minutes in tens of GB. They stop the unbounded case only: at about 24 KB a
# replica, the simulator still needs tens of GB for a plan at MAX_GPUS replicas.

#: the most GPUs one instance (node) may hold, and so the most engines on it or tensor-parallel ranks
#: of one engine: the largest cloud instance holds 16 (GCP a2-megagpu-16g), a GB200 NVL72 rack 72
MAX_NODE_GPUS = 1024
#: the most pipeline stages or nodes of one replica, or layers of one stage: a stage holds at least
#: one layer, and the spec's architectures have at most this many (hetinfra.spec.models.MAX_LAYERS)
MAX_STAGES = MAX_LAYERS


def int_in(lo: int = 1, hi: int | None = MAX_GPUS):
    """A JSON integer in [lo, hi] (strict: 2.0, "2" and true are no counts; hi None: no upper bound),
    its bounds in the schema."""
    return Annotated[StrictInt, Field(ge=lo, le=hi)]


#: replicas, instances or engines of one allocation (an absent optional one stays absent)
Replicas = int_in()
#: GPUs of one node, engines on it, tensor-parallel ranks of one engine
NodeGpus = int_in(hi=MAX_NODE_GPUS)
#: pipeline stages or nodes of one replica, layers of one stage
Stages = int_in(hi=MAX_STAGES)
#: a request's tokens (a class's input or output): the spec's bound, so a plan never refuses what it accepted
Tokens = int_in(hi=MAX_TOKENS)
#: vLLM --max-model-len: at most the longest context an architecture may state
ModelLen = int_in(hi=MAX_CONTEXT)


#: the sections apply turns into scripts, commands and names (PROSE_KEYS in them are not checked;
#: LOOSE_KEYS, internal keys and key files, only for quoting)
SHELL_SECTIONS = ("allocations", "models", "deploy", "routing")


def _strings(doc, key: str = "") -> Iterable[tuple[str, str]]:
    """(dotted key, string) of every string in ``doc``, dict keys included, prose values left out."""
    if isinstance(doc, str):
        yield key, doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield f"{key}.{k}" if key else str(k), str(k)
            if str(k) in PROSE_KEYS:
                continue
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _strings(v, f"{key}[{i}]")


def shell_safety_error(doc: dict) -> str | None:
    """The first string in the shell-bound sections that a shell could act on, as ``key: why``; None
    when there is none. Class names and routing keys may hold '<', '=' and ','; no string may hold a
    control character, quoting or expansion."""
    for section in SHELL_SECTIONS:
        for key, s in _strings(doc.get(section), section):
            leaf = re.sub(r"\[[0-9]+\]$", "", key.rsplit(".", 1)[-1])
            loose = leaf in LOOSE_KEYS or section == "routing" or ".classes[" in key or key.endswith(".classes")
            why = word_problem(s, loose=loose)
            if why:
                return f"{key} {s!r} {why}"
    return None


