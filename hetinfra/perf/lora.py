"""What serving LoRA adapters costs an engine: slot memory, a throughput derate and cold-load time.

**Slot memory.** vLLM preallocates ``--max-loras`` GPU slots, each at ``--max-lora-rank`` (a smaller
adapter is zero-padded: vllm PR #22782, ../shared/notes/pd-lora.md D), before it sizes the KV cache,
so the slots come out of the KV cache. One slot holds, per layer and projection, the A (in x r) and
B (r x out) matrices: ``rank x (in + out) x projections x layers x bytes`` (vLLM's ``lora_dtype``
``auto`` is the model's 16-bit dtype, 2 bytes). The projections are q, k, v, o and the MLP's gate,
up, down; the MLP width is recovered from the parameter count (Llama formula of vllm.md s5), so a
spec ``architecture:`` needs no extra field. Llama-3-8B: 81,920 x 32 x 16 x 2 B = 83.9 MB at rank 16,
336 MB at rank 64 (pd-lora.md D, "Adapter size", computed). Under tensor parallelism the B matrices
of column-parallel layers are sharded and the A matrices replicated (vLLM without
``--fully-sharded-loras``), taken as half of each slot replicated, half sharded.

**Derate.** A batch that carries LoRA requests runs the Punica/SGMV kernels beside the base GEMMs:
every step is slower by a factor ``m(gpu, rank, distinct) = 1 + base(gpu) + RANK_SLOPE x
log2(rank / 8) + DISTINCT_SLOPE x log2(distinct)``. At the same batch the step time scales by m,
so TTFT and TPOT scale by m and throughput by 1/m: :func:`lora_objectives` turns the SLOs into the
base engine's (divided by m) and :func:`derated_rate` the base rate into the adapter engine's.

**Cold load.** An adapter not in a GPU slot is copied from host memory (vLLM keeps
``--max-cpu-loras`` there) before its request's prefill: ``bytes / host-to-device bandwidth``; an
adapter not in host memory either is read from storage first (KServe: 10-60 s from Hugging Face).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hetinfra.catalog.gpus import GpuSpec
from hetinfra.catalog.models import ModelArch

__all__ = ["BASE_OVERHEAD", "DEFAULT_BASE_OVERHEAD", "DISTINCT_SLOPE", "H2D_GBPS", "LORA_BYTES", "RANK_SLOPE",
           "LoraCost", "cold_load_ms", "derated_rate", "lora_cost", "lora_estimate", "lora_objectives", "mlp_width", "slot_bytes",
           "slot_bytes_per_gpu", "slowdown", "with_slot_memory"]

#: bytes of one LoRA weight: vLLM's lora_dtype "auto" is the base's 16-bit dtype
LORA_BYTES = 2
#: step-time overhead of a LoRA batch at rank <= 8, per GPU: the fraction added to the base step.
#: A100 (40 GB, SkyPilot "A100"): up to -50% of max throughput with one adapter, Llama-2-7B
#: (vllm issue #10062) -> 1/0.5 - 1 = 1.0.
#: A100-80GB: 11.45 -> 7.60 req/s with 1 or 4 adapters at rank 8, Llama-2-7B ShareGPT
#: (vllm PR #11267) -> 11.45/7.60 - 1 = 0.507.
BASE_OVERHEAD = {"A100": 1.0, "A100-80GB": 11.45 / 7.60 - 1}
#: every other GPU: the A100-80GB figure (no GPU measurement of ours; vLLM V1 measured -4.3% on an
#: A100, 10.96 vs 11.45 req/s, vllm PR #11613, and TPU v6e -8.4% to -23.9%, PR #15655: the figure is a
#: conservative bound, replace it with a measured profile where one exists)
DEFAULT_BASE_OVERHEAD = BASE_OVERHEAD["A100-80GB"]
#: added overhead per doubling of --max-lora-rank above 8: 4x slower at rank 256 on a 70B AWQ model
#: (vllm issue #14435) -> (4 - 1.507) / log2(256/8) = 0.499 per doubling; padding to the slot rank is
#: paid whatever the adapter's own rank (PR #22782)
RANK_SLOPE = (4.0 - 11.45 / 7.60) / math.log2(256 / 8)
#: added overhead per doubling of the distinct adapters in a batch: 1 and 4 adapters measured the same
#: 7.60 and 7.61 req/s (PR #11267), Punica's SGMV kernel being batched across adapters (arXiv
#: 2310.18547); 0.02 bounds what that measurement could not resolve (guess, an upper bound)
DISTINCT_SLOPE = 0.02
#: host-to-device copy bandwidth of an adapter, GB/s: PCIe Gen4 x16 (32 GB/s) at ~75% efficiency (computed)
H2D_GBPS = 24.0
#: reading an adapter from storage when it is in no host cache: KServe's 10-60 s from Hugging Face
#: (kserve/website llmisvc/lora-adapters.md); the low end, for a local or cached store
STORAGE_LOAD_MS = 10_000.0


def mlp_width(arch: ModelArch) -> float:
    """The MLP's intermediate width, from the parameter count (vllm.md s5: P = 2Vh + L[h d (2 n_q +
    2 n_kv) + 3 h I + 2h] + h, embeddings untied). MoE models: the active parameters (what a token
    runs through, which is where vLLM's LoRA layers apply)."""
    h, per_layer = arch.hidden_size, (arch.active - 2 * arch.vocab_size * arch.hidden_size - arch.hidden_size)
    attention = h * arch.head_dim * (2 * arch.heads + 2 * arch.kv_heads)
    width = (per_layer / arch.layers - attention - 2 * h) / (3 * h)
    return max(width, float(h))  # a tied or unusual checkpoint: at least the hidden size


def _dims_per_layer(arch: ModelArch) -> float:
    """Sum over q, k, v, o, gate, up, down of (in + out)."""
    h, q, kv, inter = arch.hidden_size, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim, mlp_width(arch)
    return 2 * (h + q) + 2 * (h + kv) + 3 * (h + inter)


def slot_bytes(arch: ModelArch, rank: int) -> float:
    """Bytes of one adapter slot at ``rank`` on every projection of every layer."""
    return rank * _dims_per_layer(arch) * arch.layers * LORA_BYTES


def slot_bytes_per_gpu(arch: ModelArch, rank: int, tp: int, pp: int) -> float:
    """One slot's bytes on one GPU of a tp x pp engine (layers split by pp; half of each slot sharded by tp)."""
    return slot_bytes(arch, rank) / pp * (0.5 + 0.5 / tp)


def with_slot_memory(gpu: GpuSpec, arch: ModelArch, slots: int, rank: int, tp: int, pp: int,
                     util: float) -> GpuSpec:
    """``gpu`` with the memory ``slots`` adapter slots take out of the KV cache removed (so the estimator's
    KV budget, util x memory - weights - reserve, is the budget after the slots)."""
    taken = slots * slot_bytes_per_gpu(arch, rank, tp, pp)
    return replace(gpu, memory_gb=gpu.memory_gb - taken / util / 1e9)


def slowdown(gpu: str, rank: int, distinct: int) -> float:
    """Step-time multiplier m >= 1 of an engine serving LoRA at slot rank ``rank`` with ``distinct``
    adapters per batch (1 for an engine without adapters is not this function's case: no LoRA, no m)."""
    base = BASE_OVERHEAD.get(gpu, DEFAULT_BASE_OVERHEAD)
    return 1.0 + base + RANK_SLOPE * math.log2(max(rank, 8) / 8) + DISTINCT_SLOPE * math.log2(max(distinct, 1))


def lora_objectives(ttft_ms: float, tpot_ms: float, m: float) -> tuple[float, float]:
    """The base engine's objectives that, once every step is m times slower, meet ``ttft_ms``/``tpot_ms``."""
    return ttft_ms / m, tpot_ms / m


def derated_rate(base_rps: float, m: float) -> float:
    """Request rate of the adapter engine whose base engine (at the divided objectives) serves ``base_rps``."""
    return base_rps / m


def cold_load_ms(arch: ModelArch, rank: int, in_host_memory: bool = True) -> float:
    """Time to bring one adapter into a GPU slot: a host-to-device copy, plus a storage read without a host copy."""
    copy = slot_bytes(arch, rank) / (H2D_GBPS * 1e9) * 1e3
    return copy + (0.0 if in_host_memory else STORAGE_LOAD_MS)


@dataclass(frozen=True)
class LoraCost:
    """What ``slots`` adapter slots at ``rank`` cost one engine (plan.json ``adapters`` of a unit)."""

    slots: int
    rank: int  # the slot rank (--max-lora-rank)
    slot_memory_gb: float  # per GPU, taken from the KV cache
    slowdown: float  # step-time multiplier m
    derate: float  # throughput factor 1/m


def lora_cost(arch: ModelArch, gpu: str, slots: int, rank: int, tp: int, pp: int) -> LoraCost:
    """The memory and derate of an engine with ``slots`` slots at ``rank`` (distinct adapters per batch: the slots)."""
    m = slowdown(gpu, rank, slots)
    return LoraCost(slots, rank, slots * slot_bytes_per_gpu(arch, rank, tp, pp) / 1e9, m, 1.0 / m)


def lora_estimate(arch: ModelArch, gpu: GpuSpec, *, tp: int, pp: int = 1, input_tokens: int, output_tokens: int,
                  ttft_ms: float, tpot_ms: float, slots: int, rank: int, precision: str = "bf16"):
    """The estimator's :class:`~hetinfra.perf.estimator.Estimate` of one engine holding ``slots``
    adapter slots at ``rank``: the base engine with the slots' memory out of its KV cache, meeting the
    objectives divided by m, its rate divided by m. ``slots`` 0: the base estimate unchanged."""
    from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION, estimate

    if slots <= 0:
        return estimate(arch, gpu, tp=tp, pp=pp, input_tokens=input_tokens, output_tokens=output_tokens,
                        ttft_ms=ttft_ms, tpot_ms=tpot_ms, precision=precision)
    m = slowdown(gpu.name, rank, slots)
    ttft, tpot = lora_objectives(ttft_ms, tpot_ms, m)
    est = estimate(arch, with_slot_memory(gpu, arch, slots, rank, tp, pp, GPU_MEMORY_UTILIZATION), tp=tp, pp=pp,
                   input_tokens=input_tokens, output_tokens=output_tokens, ttft_ms=ttft, tpot_ms=tpot,
                   precision=precision)
    if not est.feasible:
        return est
    return replace(est, max_rps=derated_rate(est.max_rps, m), ttft_ms=est.ttft_ms * m, tpot_ms=est.tpot_ms * m,
                   min_ttft_ms=est.min_ttft_ms * m, min_tpot_ms=est.min_tpot_ms * m)
