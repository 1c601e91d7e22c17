"""The rules a model architecture obeys, in one place: the spec's ``architecture:`` block
(``hetinfra.spec.models.ArchitectureSpec``) and a Hugging Face ``config.json`` (``hetinfra.catalog.hf``)
both go through :func:`size_problem` and :func:`arch_problem`, and the built-in catalog obeys them
(tests/catalog/test_architecture.py). A module of the shared base: spec and catalog, which use no
other stage, both read it. An architecture that breaks one is refused (exit 2) naming the
field as its source spells it (``kv_heads`` in a spec, ``num_key_value_heads`` in a config.json).

What real models allow, and so what is not a rule: heads x head_dim need not equal hidden_size (Gemma
7B: 16 x 256 over 3072; Qwen3-30B-A3B: 32 x 128 over 2048; GLM-4.5-Air: 96 x 128 over 4096), only stay
within :data:`HEAD_SPAN` of it; a dense config may carry ``num_experts: 0``. What every model obeys:
whole positive sizes; KV heads dividing the query heads (each KV head serves a whole group; vLLM
refuses anything else); at most as many experts per token as experts; no more active parameters than
parameters; and at least layers x hidden_size^2 parameters (every layer's attention output and MLP
matrices each hold about that many or more).

This module imports nothing of hetinfra.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Mapping

__all__ = ["SIZE_BOUNDS", "MAX_PARAMS", "HEAD_SPAN", "size_bounds", "size_problem", "count_problem", "arch_problem",
           "tp_problem"]

#: field -> (least, most) whole value it may take; the spec's schema states the same bounds
SIZE_BOUNDS: dict[str, tuple[int, int]] = {
    "layers": (1, 1024),
    "hidden_size": (1, 1_000_000),
    "heads": (1, 65536),
    "kv_heads": (1, 65536),
    "head_dim": (1, 65536),
    "vocab_size": (1, 10_000_000),
    "max_context": (1, 100_000_000),
    "intermediate_size": (1, 10_000_000),
    "lora_rank": (1, 1_000_000),  # MLA's compressed ranks and rope/nope head dims
    "experts": (0, 65536),  # 0: a dense model's config may say so
    "experts_per_tok": (0, 65536),
    "shared_experts": (0, 65536),
    "dense_layers": (0, 1024),  # MoE models' leading dense layers (first_k_dense_replace)
}
#: most parameters a model may have (100 trillion)
MAX_PARAMS = 1e14
#: heads x head_dim stays within this factor of hidden_size (real models: 0.76x Gemma 3 27B to 3x GLM-4.5-Air)
HEAD_SPAN = 8


def size_bounds(field: str) -> dict[str, int]:
    """``field``'s bounds as pydantic's Field takes them (``ge``, ``le``): the spec states the same range."""
    least, most = SIZE_BOUNDS[field]
    return {"ge": least, "le": most}


def size_problem(value: object, field: str) -> str | None:
    """Why ``value`` is not a whole number within ``SIZE_BOUNDS[field]`` (None: it is), as the words
    that follow the field's name: ``is 0: must be at least 1``."""
    least, most = SIZE_BOUNDS[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "text" if isinstance(value, str) else "a boolean" if isinstance(value, bool) else type(value).__name__
        return f"is {value!r:.40} ({kind}): must be a whole number from {least} to {most}"
    if not math.isfinite(value) or value != int(value):
        return f"is {value!r}: must be a whole number from {least} to {most}"
    if not least <= value <= most:  # 1e300 shown as such, not as its 301 digits
        return f"is {int(value) if abs(value) < 1e15 else format(value, 'g')}: must be {'at least' if value < least else 'at most'} {least if value < least else most}"
    return None


def count_problem(value: object) -> str | None:
    """Why ``value`` is not a parameter count (finite, > 0, at most MAX_PARAMS); None when it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"is {value!r:.40}: must be a finite number of parameters"
    if not 0 < value <= MAX_PARAMS:
        return f"is {value:g}: must be more than 0 and at most {MAX_PARAMS:g}"
    return None


def arch_problem(a: Mapping[str, object], names: Mapping[str, str] | None = None) -> str | None:
    """The first rule the architecture ``a`` breaks, as one line naming its fields (None: it obeys
    them all). ``a`` holds this module's field names (those of SIZE_BOUNDS, ``params``,
    ``active_params``); a missing or None value is not checked. ``names``: how the source spells a
    field (a config.json's ``num_key_value_heads`` for ``kv_heads``)."""
    def n(field: str) -> str:
        return (names or {}).get(field, field)

    for field in SIZE_BOUNDS:
        if a.get(field) is not None and (why := size_problem(a[field], field)):
            return f"{n(field)} {why}"
    for field in ("params", "active_params"):
        if a.get(field) is not None and (why := count_problem(a[field])):
            return f"{n(field)} {why}"
    return _consistency(SimpleNamespace(**{f: a.get(f) for f in (*SIZE_BOUNDS, "params", "active_params")}), n)


def _consistency(a: SimpleNamespace, n) -> str | None:
    """The rules between fields, on values each of which is already in its range (None: not given)."""
    if a.heads and a.kv_heads and (a.kv_heads > a.heads or a.heads % a.kv_heads):
        return (f"{n('kv_heads')} {a.kv_heads} must divide {n('heads')} {a.heads}"
                + (" (there cannot be more KV heads than query heads)" if a.kv_heads > a.heads else
                   " (each KV head serves a whole group of query heads)"))
    if a.heads and a.head_dim and a.hidden_size and \
            not a.hidden_size / HEAD_SPAN <= a.heads * a.head_dim <= a.hidden_size * HEAD_SPAN:
        return (f"{n('heads')} x {n('head_dim')} ({a.heads} x {a.head_dim} = {a.heads * a.head_dim}) must be "
                f"within {HEAD_SPAN}x of {n('hidden_size')} {a.hidden_size} (real models span 0.75x to 3x)")
    if a.experts_per_tok and a.experts_per_tok > (a.experts or 0):
        return f"{n('experts_per_tok')} {a.experts_per_tok} must be at most {n('experts')} {a.experts or 0}"
    if a.layers and (a.dense_layers or 0) > a.layers:
        return f"{n('dense_layers')} {a.dense_layers} must be at most {n('layers')} {a.layers}"
    if a.params and a.active_params and a.active_params > a.params:
        return f"{n('active_params')} {a.active_params:g} must be at most {n('params')} {a.params:g}"
    if a.params and a.layers and a.hidden_size and a.params < a.layers * a.hidden_size ** 2:
        return (f"{n('params')} {a.params:g} is fewer than {n('layers')} x {n('hidden_size')}^2 = "
                f"{a.layers * a.hidden_size ** 2:g}, the least a model of that shape holds")
    return None


def tp_problem(name: str, heads: int, kv_heads: int | None, tp: int) -> str | None:
    """Why vLLM cannot shard ``name``'s attention over ``tp`` GPUs (None: it can). Its attention layers
    assert that tp divides the query heads, and that tp divides the KV heads where there are at least
    tp of them, else that the KV heads divide tp (each then replicated on tp / kv_heads GPUs): phi-4's
    40 query heads split 4 or 8 ways, its 10 KV heads do not, and vLLM stops at start-up there."""
    if heads % tp:
        return f"{name}'s {heads} attention heads are not divisible by tp={tp}"
    if kv_heads and kv_heads >= tp and kv_heads % tp:
        return f"{name}'s {kv_heads} KV heads are not divisible by tp={tp}"
    if kv_heads and kv_heads < tp and tp % kv_heads:
        return f"tp={tp} is not a multiple of {name}'s {kv_heads} KV heads"
    return None
