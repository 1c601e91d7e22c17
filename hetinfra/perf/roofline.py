"""A roofline: the request rate one replica cannot exceed, whatever a simulation or estimate says.

Verification may credit a template above its estimate where the simulation shows slack
(hetinfra.plan.verify), but the simulation shares the estimator's step model, so its slack can be
the model's optimism. Physics caps it. A request of I prompt and O output tokens on a replica of
n = TP x PP GPUs needs at least:

* **compute** (prefill and decode alike): 2 x active parameters FLOP per token, I + O tokens, at the
  GPUs' dense tensor rate (no attention FLOP, no utilisation below 100%: an upper bound);
* **memory bandwidth** (decode): each of its O decode steps reads its context's KV cache (mean
  context I + O / 2, 16-bit KV) and its share of the weights, which a step reads once for the whole
  batch: weights / B, with B the most sequences of that context the GPUs' memory holds beside the
  weights (all of it, not vLLM's 90%: again an upper bound);
* **interconnect** (TP > 1): per token and layer, two all-reduces of the hidden state (16-bit
  activations, a ring moves 2 (TP - 1) / TP of it per GPU) over the GPUs' link, which binds on PCIe
  (no NVLink: L4, L40S, A10G, T4); pipeline stages work on other tokens meanwhile.

The replica's rate is at most the smallest of the three. Every constant is the GPU catalog's
(hetinfra.catalog.gpus: memory, bandwidth, dense BF16/FP8/INT8 tensor rates, NVLink or PCIe link
bandwidth, each with its datasheet source there) or the model's architecture
(hetinfra.catalog.models: layers, hidden size, KV heads, head dim, parameters)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetinfra.catalog.gpus import GpuSpec

__all__ = ["Roofline", "roofline", "KV_BYTES", "ACTIVATION_BYTES", "MAX_SEQS", "bandwidth_bound_rps", "profile_bound"]

#: bytes per KV-cache element: 16-bit, as the planner's memory model (hetinfra.perf.estimator) and
#: vLLM's default kv-cache-dtype "auto" for bf16/fp16 checkpoints
KV_BYTES = 2
#: bytes per activation element a TP all-reduce moves: 16-bit (vLLM all-reduces bf16/fp16 hidden states)
ACTIVATION_BYTES = 2
#: most sequences one decode step may carry (vLLM's max_num_seqs is 256 by default; 16x margin)
MAX_SEQS = 4096


def bandwidth_bound_rps(weights_gb_per_gpu: float, bandwidth_gbps: float, output_tokens: int) -> float:
    """The most requests/s one engine can finish if each step reads its GPU's weights once and carries
    at most MAX_SEQS sequences: the looser bound a measured profile row is held to (far above any real
    engine; hetinfra.plan.plausible says a row past it, hetinfra.perf.model plans the row at it)."""
    step_s = max(weights_gb_per_gpu, 1e-9) / bandwidth_gbps
    return MAX_SEQS / (step_s * max(1, output_tokens))


def profile_bound(arch, gpu: GpuSpec, tp: int, pp: int, precision: str, output_tokens: int) -> tuple[float, float]:
    """(:func:`bandwidth_bound_rps` of an engine of ``arch`` on ``tp`` x ``pp`` ``gpu``s at ``precision``,
    the GB of weights per GPU it reads): what a measured row may claim, for the plan's rates
    (hetinfra.perf.model) and its warning (hetinfra.plan.plausible) alike."""
    from hetinfra.perf.estimator import weights_gb_per_gpu

    weights = weights_gb_per_gpu(arch, tp, pp, precision)
    return bandwidth_bound_rps(weights, gpu.bandwidth_gbps, output_tokens), weights


#: bytes per weight per precision (hetinfra.perf.estimator.PRECISION_BYTES, the checkpoint formats)
WEIGHT_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class Roofline:
    """The three ceilings of one replica's request rate (req/s) at one request size, and the binding one."""
    compute_rps: float
    memory_rps: float
    interconnect_rps: float

    @property
    def rate(self) -> float:
        return min(self.compute_rps, self.memory_rps, self.interconnect_rps)

    @property
    def bound(self) -> str:
        """Which resource binds: "compute", "memory bandwidth" or "interconnect"."""
        return min((self.compute_rps, "compute"), (self.memory_rps, "memory bandwidth"),
                   (self.interconnect_rps, "interconnect"))[1]


def tensor_tflops(gpu: GpuSpec, precision: str) -> float:
    """The fastest dense tensor rate a checkpoint of ``precision`` can use on ``gpu`` (an upper bound:
    weight-only int4/int8 kernels compute in 16 bits, fp8 and int8 ones may use their own cores)."""
    rates = [gpu.bf16_tflops]
    if precision in ("fp8", "int8", "int4"):
        rates += [r for r in (gpu.fp8_tflops, gpu.int8_tops) if r]
    return max(rates)


def roofline(arch, gpu: GpuSpec, tp: int, pp: int, precision: str, input_tokens: float, output_tokens: float,
             memory_gb: float | None = None) -> Roofline:
    """The roofline of one replica of ``tp`` x ``pp`` GPUs ``gpu`` serving model ``arch``
    (hetinfra.catalog.models.ModelArch) in ``precision`` for requests of ``input_tokens`` prompt and
    ``output_tokens`` output tokens (means; see the module docstring). ``memory_gb``: per GPU, where
    the offer says (else the catalog's)."""
    n = tp * pp
    tokens = max(input_tokens, 0.0) + max(output_tokens, 1.0)
    compute = n * tensor_tflops(gpu, precision) * 1e12 / (2.0 * arch.active * tokens)
    weights = arch.params * WEIGHT_BYTES.get(precision, 2)
    kv_per_token = 2.0 * arch.layers * arch.kv_heads * arch.head_dim * KV_BYTES
    context = max(input_tokens, 0.0) + max(output_tokens, 1.0) / 2.0
    room = n * (memory_gb or gpu.memory_gb) * 1e9 - weights
    if room <= 0:  # the weights alone fill the GPUs: no sequence fits
        return Roofline(compute, 0.0, math.inf)
    batch = max(room / (kv_per_token * context), 1.0)
    per_token = weights / batch + kv_per_token * context
    memory = n * gpu.bandwidth_gbps * 1e9 / (max(output_tokens, 1.0) * per_token)
    link = math.inf
    if tp > 1:
        per_gpu = (arch.layers / pp) * 2 * arch.hidden_size * ACTIVATION_BYTES * 2.0 * (tp - 1) / tp
        link = gpu.intra_node_gbps * 1e9 / per_gpu / tokens
    return Roofline(compute, memory, link)
