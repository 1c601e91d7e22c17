"""LoRA adapters in the LiteLLM config: each adapter a ``model_name`` of its own, deployed on the units
that hold it (vLLM serves it under its name, ``--lora-modules name=source``), weighted by the holders'
shares of the base model's requests."""

from __future__ import annotations

__all__ = ["adapter_deployments", "adapter_holders", "unit_adapter_fields"]


def adapter_deployments(shares: dict[tuple[str, str], float], adapters: dict[str, tuple[str, list[str]]],
                        endpoints: dict[str, list[str]]) -> list[dict]:
    """LiteLLM ``model_list`` entries of the adapters (adapter -> (base, holding units)); ``shares``:
    (model, unit) -> the unit's share of the model's requests."""
    out = []
    for name, (base, holders) in sorted(adapters.items()):
        for unit in sorted(holders):
            urls = endpoints.get(unit) or [f"http://{unit}:{{port}}/v1"]
            share = shares.get((base, unit), 0.0)
            for i, url in enumerate(urls):
                out.append({"model_name": name, "litellm_params": {
                    "model": f"hosted_vllm/{name}", "api_base": url, "api_key": "os.environ/VLLM_API_KEY",
                    "weight": max(1, round(share * 1000 / max(1, len(urls))))},
                    "model_info": {"id": f"{unit}-{name}-{i}", "hetinfra_unit": unit, "hetinfra_base": base}})
    return out


def unit_adapters(alloc) -> "tuple[tuple[Adapter, ...], int] | None":
    """(every held adapter, the GPU slots) of a plan allocation's LoRA adapters (plan.json
    ``allocations[].adapters``); None for a base unit."""
    from hetinfra.compile.unit import Adapter

    lo = getattr(alloc, "adapters", None)
    if lo is None:
        return None
    return tuple(Adapter(h.name, h.source, int(h.lora_rank)) for h in lo.held), int(lo.max_loras)


def unit_adapter_fields(alloc) -> dict:
    """The :class:`~hetinfra.compile.unit.DeployedUnit` fields of :func:`unit_adapters`; {} for a base unit."""
    held = unit_adapters(alloc)
    return {} if held is None else {"adapters": held[0], "max_loras": held[1]}


def adapter_holders(doc) -> dict[str, tuple[str, list[str]]]:
    """Adapter -> (base model, deployment units holding it) of plan ``doc``: what the LiteLLM config
    and the gateway route each adapter's requests to."""
    out: dict[str, tuple[str, list[str]]] = {}
    for a in doc.allocations:
        for h in (a.adapters.held if a.adapters is not None else ()):
            out.setdefault(h.name, (a.model, []))[1].append(a.deployment_unit)
    return {k: (b, sorted(units)) for k, (b, units) in out.items()}
