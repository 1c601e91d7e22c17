"""Memory of one vLLM engine: bytes per precision, the weights each GPU holds (the most loaded pipeline
stage, with the 16-bit embedding / LM head of quantised checkpoints), KV-cache bytes per token, and
vLLM's default chunked-prefill token budget. Used by the step model (hetinfra.perf.engine) and the
planner's fit checks."""

from __future__ import annotations

from hetinfra.catalog.gpus import GpuSpec, visible_memory_bytes
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError

__all__ = ["PRECISION_BYTES", "norm_precision", "weight_bytes_per_gpu", "stage_weight_bytes", "weights_gb_per_gpu",
           "kv_bytes_per_token_per_gpu", "max_num_batched_tokens_default"]

PRECISION_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
_PRECISION_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "auto": "bf16"}
_GIB = 1073741824.0


def norm_precision(precision: str) -> str:
    p = precision.lower()
    p = _PRECISION_ALIASES.get(p, p)
    if p not in PRECISION_BYTES:
        raise InvalidInputError(f"unknown precision {precision!r}",
                                hint="use one of " + ", ".join(PRECISION_BYTES))
    return p


def weight_bytes_per_gpu(model: ModelArch, tp: int, pp: int, b_w: float) -> float:
    """Bytes of weights on the most loaded GPU (first / last pipeline stage)."""
    emb = min(2.0 * model.vocab_size * model.hidden_size, 0.5 * model.params)  # embedding + LM head (untied)
    b_emb = b_w if b_w >= 2 else 2.0  # quantised checkpoints keep embedding / LM head in 16 bit
    body = (model.params - emb) * b_w
    if pp <= 1:
        return (body + emb * b_emb) / tp
    stage_layers = -(-model.layers // pp)
    return (body * stage_layers / model.layers + 0.5 * emb * b_emb) / tp


def stage_weight_bytes(model: ModelArch, tp: int, layers: int, first: bool, last: bool, b_w: float) -> float:
    """Bytes of weights on one GPU of a pipeline stage holding ``layers`` layers; the embedding sits
    on the first stage and the LM head on the last (counted as half of ``emb`` each, as above)."""
    emb = min(2.0 * model.vocab_size * model.hidden_size, 0.5 * model.params)
    b_emb = b_w if b_w >= 2 else 2.0
    body = (model.params - emb) * b_w
    return (body * layers / model.layers + 0.5 * emb * b_emb * (int(first) + int(last))) / tp


def weights_gb_per_gpu(model: ModelArch, tp: int, pp: int = 1, precision: str = "bf16") -> float:
    """Weights (GB, 1e9 bytes) held by one GPU of a tp x pp engine (the most loaded stage)."""
    return weight_bytes_per_gpu(model, tp, pp, PRECISION_BYTES[norm_precision(precision)]) / 1e9


def kv_bytes_per_token_per_gpu(model: ModelArch, tp: int, precision: str = "bf16", pp: int = 1) -> float:
    """KV-cache bytes one token occupies on one GPU; ``precision`` is the KV-cache dtype.

    2 x layers x kv_heads x head_dim x bytes, divided by min(tp, kv_heads) (KV heads are replicated
    when tp > kv_heads); under PP only the stage's layers (the largest stage) count.
    """
    layers = -(-model.layers // pp) if pp > 1 else model.layers
    b = PRECISION_BYTES[norm_precision(precision)]
    return 2.0 * layers * model.kv_heads * model.head_dim * b / min(tp, model.kv_heads)


def max_num_batched_tokens_default(gpu: GpuSpec) -> int:
    """vLLM's serve default chunked-prefill budget (vllm.md s1.1): 16384 on >=160 GiB GPUs,
    8192 on >=70 GiB non-A100 GPUs (H100/H200), else 2048."""
    gib = visible_memory_bytes(gpu) / _GIB
    if gib >= 160:
        return 16384
    if gib >= 70 and not gpu.name.upper().startswith("A100"):
        return 8192
    return 2048
