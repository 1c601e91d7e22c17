"""An invariant of plan.json that spans its sections: every unit's vLLM engine starts and takes
every request routed to it (issue 21). A --max-model-len above the KV cache of one engine
(``allocations[].kv_cache_tokens``) and vLLM refuses to start; one below the largest class routed to
the unit (``routing``, ``models[].classes``) and it refuses those requests. :class:`Plan` checks it
on every parse (exit 2 naming the unit), so apply's preflight needs no check of its own."""

from __future__ import annotations

from hetinfra.document.allocation import Allocation, Routing
from hetinfra.document.sections import ModelEntry


def length_problems(models: list[ModelEntry], allocations: list[Allocation], routing: Routing) -> list[str]:
    """One line per unit vLLM would refuse to start or that would refuse routed requests (plan.json's
    ``models``, ``allocations`` and ``routing``); units without a max_model_len (older plans) are not
    checked, nor the KV cache where it is unknown."""
    sizes = {m.name: {c.name: c.input_tokens + c.output_tokens for c in m.classes} for m in models}
    out = []
    for a in allocations:
        length, name = a.max_model_len, a.deployment_unit or a.unit
        if length is None:
            continue
        if a.kv_cache_tokens is not None and length > a.kv_cache_tokens:
            out.append(f"unit {name}: --max-model-len {length} exceeds its KV cache of {a.kv_cache_tokens} tokens "
                       "(vLLM would not start)")
        classes = sizes.get(a.model, {})
        routed = [classes[c] for c, shares in routing.get(a.model, {}).items() if c in classes
                  for s in shares if s.unit == a.unit and float(s.rps or 0) > 0]
        if routed and max(routed) > length:
            out.append(f"unit {name}: --max-model-len {length} is below the {max(routed)} tokens of a class "
                       "routed to it")
    return out
