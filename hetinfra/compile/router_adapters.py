"""LoRA adapters in the LiteLLM config: each adapter a ``model_name`` of its own, deployed on the units
that hold it (vLLM serves it under its name, ``--lora-modules name=source``), weighted by the holders'
shares of the base model's requests."""

from __future__ import annotations

__all__ = ["adapter_deployments"]


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
