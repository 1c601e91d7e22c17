"""Analytical performance estimator: max request rate of one vLLM engine (tp x pp GPUs) under
TTFT/TPOT SLOs, from GPU and model facts alone.

Model (../shared/notes/vllm.md sections 2.1 and 6; constants in ``calibration.py``):

* memory: weights per GPU = params x bytes / (tp x pp) (+ the 16-bit embedding / LM head of
  quantised checkpoints, first / last stage under PP); KV bytes per token per GPU =
  2 x layers x kv_heads x head_dim x kv_bytes / min(tp, kv_heads); KV budget = utilisation x visible
  memory - weights - reserves; max concurrency = KV tokens / (input + output), capped by
  --max-num-seqs.
* decode step (= TPOT) with a decode batch b per stage = max(memory time (weights + KV read) /
  (BW x eta), compute of the b decode tokens plus the b x input/(output-1) prefill tokens that
  chunked prefill mixes into every step in steady state) + 2 x layers x TP all-reduce, summed over
  the pp stages, + fixed and per-sequence step overheads + stage-to-stage sends (over the network
  between nodes, over NVLink / PCIe between stages that share a node). PP keeps pp
  micro-batches of b in flight (decode concurrency pp x b).
* rate = pp x b / ((output - 1) x TPOT); TTFT = prefill alone (compute at MFU + per-layer dispatch
  + all-reduce) x queueing factor min(1 + slope x log2(B), cap) + the steps its chunks ride in;
  total concurrency B = pp x b + rate x TTFT, so rate = B / (TTFT + (output - 1) x TPOT) (Little).
* the largest b meeting TPOT <= SLO (solved exactly for dense models), TTFT <= SLO,
  B <= min(KV capacity in sequences, --max-num-seqs) and the --max-num-batched-tokens step budget.
  b is a real number (a mean concurrency), which keeps the rate monotone in every input.

SLOs are treated as mean values (mean-field model, no tail percentiles).
"""

from __future__ import annotations

import math

from hetinfra.catalog.gpus import GpuSpec
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError
# the engine settings the estimator plans with and the artifacts pin (their reasons: hetinfra.facts)
from hetinfra.facts import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS
from hetinfra.perf.calibration import CALIBRATION, Calibration, calibration_for
# the step model and the memory facts live beside this module; their names stay importable from here
from hetinfra.perf.engine import Engine, Estimate, build_engine, coefficients, infeasible
from hetinfra.perf.memory import (PRECISION_BYTES, kv_bytes_per_token_per_gpu, max_num_batched_tokens_default,
                                  norm_precision, weight_bytes_per_gpu, weights_gb_per_gpu)

__all__ = [
    "GPU_MEMORY_UTILIZATION", "MAX_NUM_SEQS", "Engine", "Estimate", "PRECISION_BYTES", "build_engine", "estimate",
    "weights_gb_per_gpu", "kv_bytes_per_token_per_gpu", "max_num_batched_tokens_default", "operating_point",
    "decode_step_ms", "prefill_ms", "best_point",
]


def operating_point(model: ModelArch, gpu: GpuSpec, *, tp: int, pp: int = 1, input_tokens: int,
                    output_tokens: int, concurrency: float, precision: str = "bf16",
                    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_seqs: int = MAX_NUM_SEQS, kv_precision: str | None = None,
                    max_num_batched_tokens: int | None = None, calib: Calibration = CALIBRATION,
                    vllm_version: str | None = None) -> tuple[float, float, float] | Estimate:
    """(TTFT ms, TPOT ms, req/s) predicted at ``concurrency`` requests in the system (no SLO and no
    memory cap applied); an infeasible ``Estimate`` if the layout cannot run at all.
    For calibration against closed-loop (fixed concurrency) benchmarks. ``vllm_version`` as in ``estimate``."""
    if vllm_version is not None:
        calib = calibration_for(vllm_version)
    e = build_engine(model, gpu, tp, pp, max(int(input_tokens), 1), max(int(output_tokens), 1), precision,
                gpu_memory_utilization, max_num_seqs, kv_precision, max_num_batched_tokens, calib)
    if isinstance(e, Estimate):
        return e
    lo, hi = 0.0, concurrency / pp  # total concurrency is increasing in b
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if e.point(mid)[2] <= concurrency:
            lo = mid
        else:
            hi = mid
    t, f, _, rate, _ = e.point(max(lo, 1e-9))
    return f * 1e3, t * 1e3, rate


def _bare(model: ModelArch, gpu: GpuSpec, tp: int, pp: int, isl: int, ctx: float, precision: str,
          kv_precision: str | None, overheads: bool, calib: Calibration) -> Engine:
    prec = norm_precision(precision)
    if tp < 1 or pp < 1:
        raise InvalidInputError(f"tp and pp must be >= 1 (got tp={tp}, pp={pp})")
    w_gpu = weight_bytes_per_gpu(model, tp, pp, PRECISION_BYTES[prec])
    kv_tok = kv_bytes_per_token_per_gpu(model, tp, kv_precision or "bf16", pp)
    e = coefficients(model, gpu, tp, pp, max(int(isl), 1), float(ctx), 0.0, prec, kv_tok, w_gpu, calib)
    if not overheads:  # GPU work only: no engine step costs, no CPU dispatch
        e.per_seq = e.per_req = e.dispatch = 0.0
        e.fixed = pp * e.gpu_fixed
    return e


def decode_step_ms(model: ModelArch, gpu: GpuSpec, *, tp: int, pp: int = 1, batch: float, context: float,
                   precision: str = "bf16", kv_precision: str | None = None, overheads: bool = True,
                   calib: Calibration = CALIBRATION) -> float:
    """One decode-only engine step (ms) of a micro-batch of ``batch`` sequences, each attending ``context``
    tokens: the step-time model ``estimate`` uses for TPOT, without the prefill chunks that ride in its
    steps in steady state. ``overheads=False`` leaves out the engine's fixed and per-sequence step costs
    (for per-layer kernel profiles). No memory checks: for calibration against measured step times."""
    e = _bare(model, gpu, tp, pp, int(context), context, precision, kv_precision, overheads, calib)
    return e.tpot(batch, False)[0] * 1e3


def prefill_ms(model: ModelArch, gpu: GpuSpec, *, tp: int, pp: int = 1, tokens: int, batch: float = 1.0,
               precision: str = "bf16", overheads: bool = True, calib: Calibration = CALIBRATION) -> float:
    """Prefill (ms) of ``batch`` prompts of ``tokens`` tokens in one pass, no queueing: the model
    ``estimate`` uses for TTFT's prefill part. ``overheads=False`` leaves out the CPU dispatch cost."""
    e = _bare(model, gpu, tp, pp, tokens, tokens, precision, None, overheads, calib)
    return e.prefill(batch) * 1e3


def estimate(model: ModelArch, gpu: GpuSpec, *, tp: int, pp: int = 1, input_tokens: int, output_tokens: int,
             ttft_ms: float, tpot_ms: float, precision: str = "bf16", gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
             max_num_seqs: int = MAX_NUM_SEQS, kv_precision: str | None = None, max_num_batched_tokens: int | None = None,
             calib: Calibration = CALIBRATION, vllm_version: str | None = None, nodes: int | None = None) -> Estimate:
    """Largest request rate of one engine (tp x pp GPUs of ``gpu``) meeting mean TTFT and TPOT SLOs.

    ``nodes``: nodes the pipeline's stages span (None: one node per stage, e.g. 1 for TP2 x PP2 on
    one 4-GPU node, whose stage-to-stage sends stay on the node's NVLink / PCIe).

    ``kv_precision`` is the KV-cache dtype (vLLM ``--kv-cache-dtype``; default 16-bit, as vLLM's
    ``auto`` for bf16/fp16, fp8 and weight-only int8/int4 checkpoints). ``max_num_batched_tokens``
    defaults to vLLM's per-GPU serve default. A 1-token output has no TPOT, so ``tpot_ms`` is then
    not checked. ``vllm_version`` (e.g. "0.2.7", "0.11.0") selects that engine's constants
    (``calibration.calibration_for``) instead of ``calib``.
    """
    if vllm_version is not None:
        calib = calibration_for(vllm_version)
    isl = max(int(input_tokens), 1)
    osl = max(int(output_tokens), 1)
    e = build_engine(model, gpu, tp, pp, isl, osl, precision, gpu_memory_utilization, max_num_seqs, kv_precision,
                max_num_batched_tokens, calib, nodes=nodes)
    if isinstance(e, Estimate):
        return e
    return best_point(e, f"{model.name} on {gpu.name} (tp={tp}, pp={pp}, {precision})", osl, ttft_ms, tpot_ms,
                      max_num_seqs)


def best_point(e: Engine, where: str, osl: int, ttft_ms: float, tpot_ms: float, max_num_seqs: int) -> Estimate:
    """The largest-rate operating point of engine ``e`` (homogeneous, or a pipeline of stages) under the SLOs."""
    point = e.point
    pp = e.pp

    # ---- floors: one sequence decoding alone, no prefill riding in its steps -------------------------
    t1 = e.tpot(1.0 / pp, False)[0]
    f1 = e.ttft(1.0, t1)
    min_tpot_ms, min_ttft_ms = t1 * 1e3, f1 * 1e3
    slo_tpot = tpot_ms * 1e-3 if osl > 1 else math.inf
    slo_ttft = ttft_ms * 1e-3
    if t1 > slo_tpot:
        return infeasible("tpot", f"TPOT {tpot_ms:g} ms unreachable: a decode step alone takes {min_tpot_ms:.1f} ms "
                                   f"for {where}", min_tpot_ms, min_ttft_ms)
    if f1 > slo_ttft:
        return infeasible("ttft", f"TTFT {ttft_ms:g} ms unreachable: prefill of {e.isl} tokens alone takes "
                                   f"{min_ttft_ms:.1f} ms for {where}", min_tpot_ms, min_ttft_ms)

    # ---- largest decode micro-batch b meeting both SLOs and the concurrency caps --------------------
    cap_seqs = e.kv_seqs if e.kv_seqs < max_num_seqs else float(max_num_seqs)
    b_tok = e.mbt / (1.0 + e.ratio)  # a step cannot carry more tokens than the chunked-prefill budget
    b_hi = cap_seqs / pp
    if b_tok < b_hi:
        b_hi = b_tok
    # TPOT alone is piecewise linear in b for dense models: solve it; bisect only if TTFT or the
    # concurrency cap binds first (or for MoE, whose weight traffic grows with b).
    b_t = e.b_tpot(slo_tpot) if osl > 1 else math.inf
    dense = e.moe_p >= 1.0
    cand = b_t if dense and b_t < b_hi else b_hi
    t, f, conc, rate, comp = point(cand)
    if t <= slo_tpot * (1.0 + 1e-12) and f <= slo_ttft and conc <= cap_seqs:
        if cand != b_hi:
            binding = "compute" if comp else "tpot"
        else:
            binding = "batched_tokens" if b_hi == b_tok else (
                "kv_memory" if e.kv_seqs < max_num_seqs else "max_num_seqs")
    else:
        lo, binding = _bisected(e, cand, slo_tpot, slo_ttft, cap_seqs, max_num_seqs)
        t, f, conc, rate, comp = point(lo)
    return Estimate(True, rate, max(int(conc + 1e-9), 1), f * 1e3, t * 1e3, binding, None, min_tpot_ms, min_ttft_ms)


def _bisected(e: Engine, cand: float, slo_tpot: float, slo_ttft: float, cap_seqs: float,
              max_num_seqs: int) -> tuple[float, str]:
    """``best_point``'s search where the candidate b misses an SLO or the concurrency cap: the largest b
    below ``cand`` meeting all of them (to a relative width of 1e-5), and what binds just above it."""
    point = e.point
    lo, hi = cand * 1e-6, cand  # lo (light load) meets everything given the floors; hi does not
    while hi - lo > 1e-5 * hi:
        mid = 0.5 * (lo + hi)
        t, f, conc, _, _ = point(mid)
        if t <= slo_tpot and f <= slo_ttft and conc <= cap_seqs:
            lo = mid
        else:
            hi = mid
    t, f, conc, _, comp = point(hi)
    if t > slo_tpot:
        return lo, "compute" if comp else "tpot"
    if f > slo_ttft:
        return lo, "ttft"
    return lo, "kv_memory" if e.kv_seqs < max_num_seqs else "max_num_seqs"
