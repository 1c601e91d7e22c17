"""LoRA adapters in the spec: ``adapters:`` entries, each naming the base model it runs on.

An adapter is a small set of low-rank weights that vLLM serves beside its base model (``--lora-modules
name=source``); a request reaches it by naming it in the OpenAI ``model`` field. Its demand is either
a share of its base's demand (``share: 0.2`` takes a fifth of the base's requests, the rest stay with
the base) or a rate of its own (``rate_rps: 3`` adds to the base's); its request sizes are the base's.
An optional residency rule (``regions:``) lists the only regions whose units may hold it.

Checks that need the whole spec (the base exists, names are unique across models and adapters, the
regions can be reached) run after validation in :func:`check_adapters`, so that each error points at
the adapter's own line (``service.yaml:41:7``): exit 2 for a wrong entry, exit 3 for an adapter that
no unit may hold.
"""

from __future__ import annotations

from typing import Callable

from pydantic import Field, field_validator, model_validator

from hetinfra.errors import InfeasibleError, InvalidInputError, did_you_mean
from hetinfra.facts import LORA_RANKS  # vLLM's --max-lora-rank choices
from hetinfra.spec.base import ADAPTER_KEY_SEP, ResourceWord, ShellArg, ShellChecked, Strict, key_part

__all__ = ["ADAPTER_KEY_SEP", "MAX_ADAPTERS", "adapter_of", "base_class", "MAX_LORA_RANK", "LORA_RANKS", "AdapterDemand", "AdapterSpec", "adapters_of",
           "check_adapters", "slot_rank"]

#: ADAPTER_KEY_SEP (hetinfra.spec.base) joins a class name and an adapter name into the adapter's class
#: (``"chat~sql"``: class chat of adapter sql)


def adapter_of(class_name: str) -> str | None:
    """The adapter a class carries (``"chat~sql"`` -> ``"sql"``), None for a base class."""
    return class_name.split(ADAPTER_KEY_SEP, 1)[1] if ADAPTER_KEY_SEP in class_name else None


def base_class(name: str) -> str:
    """The spec's class an adapter's class was split from (``"chat~sql"`` -> ``"chat"``); a base class itself."""
    return name.split(ADAPTER_KEY_SEP, 1)[0]


#: the largest rank an engine allows: an adapter above it cannot be loaded by vLLM
MAX_LORA_RANK = LORA_RANKS[-1]
#: most adapters one spec may list (S-LoRA serves thousands; a plan of 1000 stays solvable)
MAX_ADAPTERS = 1000


def slot_rank(rank: int) -> int:
    """The ``--max-lora-rank`` an engine needs to hold an adapter of ``rank``: the smallest vLLM allows."""
    return min(r for r in LORA_RANKS if r >= rank)


class AdapterDemand(Strict):
    """An adapter's traffic: exactly one of a share of its base's demand or a rate of its own."""

    share: float | None = Field(None, gt=0, le=1, description="Fraction of the base model's requests that name "
                                                             "this adapter (the base keeps the rest).")
    rate_rps: float | None = Field(None, ge=1e-3, le=1e6, description="Requests per second of its own, on top of "
                                                                      "the base model's demand.")

    @model_validator(mode="after")
    def _one(self) -> "AdapterDemand":
        if (self.share is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of share (a fraction of the base's demand) or rate_rps")
        return self


class AdapterSpec(ShellChecked):
    """One LoRA adapter served beside a base model."""

    name: ShellArg = Field(description="The OpenAI `model` a request names to reach the adapter (vLLM --lora-modules "
                                       "name; no '=', '~' or '@'); unique across models and adapters.")
    base: str = Field(max_length=128, description="The `name` of the model (in `models`) the adapter was trained on.")
    source: ShellArg = Field(description="What vLLM loads: a Hugging Face repo id or a path.")
    rank: int = Field(16, ge=1, description=f"The adapter's LoRA rank (at most {MAX_LORA_RANK}, vLLM's largest "
                                            "--max-lora-rank).")
    demand: AdapterDemand = Field(description="Its traffic: {share: f} of the base's demand or {rate_rps: r}.")
    regions: list[ResourceWord] | None = Field(
        None, min_length=1, max_length=1000, description="Residency: the only regions whose units may hold the "
                                                         "adapter (unset: any region the base may use).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if "=" in v:  # vLLM splits --lora-modules name=source at the first '='
            raise ValueError(f"adapter name {v!r} may not contain '=' (vLLM reads --lora-modules name=source)")
        return key_part(v, "adapter name")  # 'a@eu-west-1' would read as another adapter's origin flow

    @field_validator("rank")
    @classmethod
    def _rank(cls, v: int) -> int:
        if v > MAX_LORA_RANK:
            raise ValueError(f"rank {v} is above {MAX_LORA_RANK}, the largest --max-lora-rank vLLM allows; "
                             "use an adapter of a smaller rank")
        return v


def adapters_of(spec, base: str) -> list[AdapterSpec]:
    """The adapters whose base is the model named ``base``, in spec order."""
    return [a for a in spec.adapters if a.base == base]


def check_adapters(spec, locate: Callable[..., str]) -> None:
    """Whole-spec checks of ``spec.adapters``; each error names the adapter's ``file:line:col``.

    Exit 2: the base is not a model of the spec, a name repeats (another adapter's or a model's), a
    base's adapter shares sum above 1. Exit 3: the adapter's residency regions leave no region the
    spec allows (no unit may hold it).
    """
    models = {m.name for m in spec.models}
    seen: dict[str, int] = {}
    for i, a in enumerate(spec.adapters):
        if a.base not in models:
            raise InvalidInputError(f"{locate('adapters', i, 'base')}: adapter {a.name!r}: base {a.base!r} is not a "
                                    f"model of this spec; {did_you_mean(a.base, models)}",
                                    hint="name one of `models[].name` as the adapter's base")
        if a.name in models or a.name in seen:
            other = "a model" if a.name in models else f"adapters[{seen[a.name]}]"
            raise InvalidInputError(f"{locate('adapters', i, 'name')}: adapter name {a.name!r} is already used by "
                                    f"{other}; requests name adapters in the OpenAI `model` field, so names "
                                    "must be unique", hint="rename one of them")
        seen[a.name] = i
        _check_residency(spec, a, locate("adapters", i, "regions"))
    for base in sorted(models):
        total = sum(a.demand.share or 0.0 for a in adapters_of(spec, base))
        if total > 1 + 1e-9:
            first = next(i for i, a in enumerate(spec.adapters) if a.base == base and a.demand.share)
            raise InvalidInputError(f"{locate('adapters', first, 'demand')}: the adapters of {base!r} take shares "
                                    f"summing to {total:.3g} of its demand, more than 1",
                                    hint="lower the shares, or give some adapters a rate_rps of their own")


def _check_residency(spec, adapter: AdapterSpec, at: str) -> None:
    allowed = spec.infrastructure.regions
    if adapter.regions is None or allowed is None:
        return
    if not set(adapter.regions) & set(allowed):
        raise InfeasibleError(f"{at}: adapter {adapter.name!r} may be held only in {', '.join(adapter.regions)}, "
                              f"none of which infrastructure.regions allows; no unit may hold it",
                              hint="add one of its regions to infrastructure.regions, or widen its `regions`")
