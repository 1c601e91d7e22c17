"""Built-in LLM architectures (HF config.json facts), keyed by lowercase catalog name.

Sources: ../shared/notes/vllm.md section 5. A spec may instead give ``architecture:``
with the same fields (see ``hetinfra.spec.models.ArchitectureSpec``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelArch:
    """Architecture facts the performance model needs."""

    name: str
    layers: int  # num_hidden_layers
    hidden_size: int
    heads: int  # query heads
    kv_heads: int  # key/value heads (GQA)
    head_dim: int
    params: float  # total parameters (count, e.g. 8.03e9)
    active_params: float | None = None  # MoE: parameters active per token; None = dense
    vocab_size: int = 32000
    max_context: int = 4096  # max_position_embeddings (context the model supports)

    @property
    def active(self) -> float:
        return self.active_params or self.params


_M = ModelArch

# Params are counted from config.json with the Llama formula of vllm.md s5
# (P = 2*V*h untied + L*[h*d*(2*n_q + 2*n_kv) + 3*h*I + 2h] + h); BF16 checkpoints.
MODELS: dict[str, ModelArch] = {
    m.name: m
    for m in (
        # meta-llama/Llama-2-7b-hf config.json: 32 layers, h 4096, 32/32 heads (MHA), I 11008,
        # vocab 32000, ctx 4096 -> 6.74e9 params (Melange profiles use this model).
        _M("llama-2-7b", 32, 4096, 32, 32, 128, 6.74e9, None, 32000, 4096),
        # meta-llama/Llama-2-13b-hf config.json: 40 layers, h 5120, 40/40 heads, I 13824 -> 13.02e9.
        _M("llama-2-13b", 40, 5120, 40, 40, 128, 13.02e9, None, 32000, 4096),
        # meta-llama/Llama-2-70b-hf config.json: 80 layers, h 8192, 64/8 heads (GQA), I 28672
        # -> 68.98e9 (Helix / splitwise-sim profiles use this model).
        _M("llama-2-70b", 80, 8192, 64, 8, 128, 68.98e9, None, 32000, 4096),
        # vllm.md s5; aiconfigurator model_configs/meta-llama--Meta-Llama-3.1-8B_config.json.
        _M("llama-3.1-8b", 32, 4096, 32, 8, 128, 8.03e9, None, 128256, 131072),
        # vllm.md s5; aiconfigurator ...Meta-Llama-3.1-70B_config.json.
        _M("llama-3.1-70b", 80, 8192, 64, 8, 128, 70.55e9, None, 128256, 131072),
        # vllm.md s5: same architecture as 3.1-70B (Meta) [no 3.3 config file was read].
        _M("llama-3.3-70b", 80, 8192, 64, 8, 128, 70.55e9, None, 128256, 131072),
        # vllm.md s5; aiconfigurator Qwen--Qwen3-32B_config.json (max_position_embeddings 40960).
        _M("qwen3-32b", 64, 5120, 64, 8, 128, 32.76e9, None, 151936, 40960),
        # vllm.md s5; aiconfigurator Qwen--Qwen3-235B-A22B_config.json: MoE 128 experts top-8,
        # 4 KV heads (TP > 4 replicates KV).
        _M("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 235.1e9, 22.2e9, 151936, 40960),
        # aiconfigurator Qwen--Qwen3-30B-A3B_config.json: 48 layers, h 2048, 32/4 heads, 128 experts
        # top-8 of I 768, vocab 151936 (untied) -> 30.53e9 total / 3.35e9 active.
        _M("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 30.53e9, 3.35e9, 151936, 40960),
        # vllm.md s5; huggingface.co/mistralai/Mistral-7B-Instruct-v0.3 config.json (no sliding window).
        _M("mistral-7b", 32, 4096, 32, 8, 128, 7.25e9, None, 32768, 32768),
        # vllm.md s5; aiconfigurator mistralai--Mixtral-8x7B-v0.1_config.json: 8 experts top-2,
        # 46.7e9 total / 12.9e9 active.
        _M("mixtral-8x7b", 32, 4096, 32, 8, 128, 46.7e9, 12.9e9, 32000, 32768),
        # vllm.md s5; huggingface.co/microsoft/phi-4 config.json (Phi3ForCausalLM).
        _M("phi-4", 40, 5120, 40, 10, 128, 14.66e9, None, 100352, 16384),
    )
}

# Hugging Face repository ids (lowercase) -> catalog name, so specs may name either.
ALIASES: dict[str, str] = {
    "meta-llama/llama-2-7b-hf": "llama-2-7b",
    "meta-llama/llama-2-7b-chat-hf": "llama-2-7b",
    "meta-llama/llama-2-13b-hf": "llama-2-13b",
    "meta-llama/llama-2-13b-chat-hf": "llama-2-13b",
    "meta-llama/llama-2-70b-hf": "llama-2-70b",
    "meta-llama/llama-2-70b-chat-hf": "llama-2-70b",
    "meta-llama/llama-3.1-8b": "llama-3.1-8b",
    "meta-llama/llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama/meta-llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama/llama-3.1-70b": "llama-3.1-70b",
    "meta-llama/llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/meta-llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/llama-3.3-70b-instruct": "llama-3.3-70b",
    "qwen/qwen3-32b": "qwen3-32b",
    "qwen/qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen/qwen3-30b-a3b": "qwen3-30b-a3b",
    "mistralai/mistral-7b-instruct-v0.3": "mistral-7b",
    "mistralai/mistral-7b-v0.3": "mistral-7b",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b",
    "mistralai/mixtral-8x7b-instruct-v0.1": "mixtral-8x7b",
    "microsoft/phi-4": "phi-4",
}


def get_model(name: str) -> ModelArch | None:
    key = name.lower()
    return MODELS.get(key) or MODELS.get(ALIASES.get(key, ""))
