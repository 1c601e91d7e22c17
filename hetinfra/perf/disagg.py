"""Per-phase performance model for prefill/decode disaggregation (issue 37, point 1).

A disaggregated engine does one phase only, so each phase gets its own rate from the same
calibrated step model the colocated estimator uses (``hetinfra.perf.estimator.Engine``: the
``Calibration`` constants of ``hetinfra.perf.calibration``, fitted on public kernel and end-to-end
measurements, estimator-v3):

* **prefill engine** (vLLM with ``kv_role: kv_producer``, requests of ``max_tokens: 1``): its steps
  are chunked-prefill steps of ``max_num_batched_tokens`` prompt tokens (``Engine.step_s`` with no
  decode), so it processes C = mbt / step_s(mbt) prompt tokens/s. A request's time there is its
  unloaded prefill (``Engine.prefill(1)``) plus the queue: the engine serves the prompt stream in
  order, deterministic work per request, Poisson arrivals, so the mean wait is M/D/1's
  rho x S / (2 (1 - rho)) with S = isl / C and rho = rate x S. The largest rate whose
  prefill + wait fits the prefill's share of the TTFT budget is the engine's rate (closed form).
* **decode engine** (``kv_consumer``): decode-only steps (``Engine.tpot(b, prefill=False)``) of b
  sequences at the mean context isl + ctx_output_fraction x osl; the largest b with a step <= the
  TPOT objective, within the KV cache (``build_engine``'s memory model) and ``--max-num-seqs``.
  The decode engine runs every output token (its first step samples the first token from the
  transferred KV, hetinfra.sim.pools.Disaggregated), so rate = b / (osl x step).
* **KV bytes per token** = 2 (K and V) x layers x KV heads x head dim x KV-cache bytes: the paged
  cache vLLM allocates per token (Llama-3-70B: 2 x 80 x 8 x 128 x 2 = 327,680 B = 320 KiB, a
  4k prompt 1.25 GiB; Qwen3-32B: 2 x 64 x 8 x 128 x 2 = 256 KiB). Architecture facts come from each
  model's Hugging Face config.json (hetinfra.catalog.models).
* **TTFT of a split request** = prefill (+ its queue) + transfer (latency + prompt x KV bytes per
  token / link bandwidth) + the decode engine's wait for its next step and that step: FIRST_STEP_WAIT
  x the decode step (half a step's wait on average, then the step itself).

SLOs are mean values here, as in the colocated estimator; verification by simulation judges the
percentiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetinfra.catalog.gpus import GpuSpec
from hetinfra.catalog.models import ModelArch
from hetinfra.facts import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS
from hetinfra.perf.calibration import CALIBRATION, Calibration
from hetinfra.perf.estimator import PRECISION_BYTES, Engine, Estimate, build_engine

__all__ = ["FIRST_STEP_WAIT", "PhaseRate", "kv_bytes_per_token", "prefill_rate", "decode_rate", "transfer_s"]

#: a request reaching a busy decode engine waits on average half a step for the next one, then
#: rides one step to get its first token (a step boundary is uniformly distributed in time)
FIRST_STEP_WAIT = 1.5


@dataclass(frozen=True)
class PhaseRate:
    """What one engine of one phase sustains: req/s and tokens/s (prompt tokens for prefill, output
    tokens for decode), the latency it adds at that rate (ms: prefill + queue, or the decode step),
    or why it cannot run (``rps`` 0 and ``reason``)."""

    rps: float
    tokens_per_s: float
    latency_ms: float
    reason: str | None = None

    @property
    def feasible(self) -> bool:
        return self.rps > 0.0


def kv_bytes_per_token(model: ModelArch, kv_precision: str = "bf16") -> float:
    """KV-cache bytes of one token of the whole model (all layers, all KV heads): what a prefill
    engine hands a decode engine per prompt token."""
    return 2.0 * model.layers * model.kv_heads * model.head_dim * PRECISION_BYTES[kv_precision]


def transfer_s(model: ModelArch, prompt_tokens: int, bandwidth_bytes_s: float, latency_s: float,
               kv_precision: str = "bf16") -> float:
    """Seconds to move a prompt's KV from the prefill to the decode engine over one link."""
    return latency_s + prompt_tokens * kv_bytes_per_token(model, kv_precision) / bandwidth_bytes_s


def _engine(model: ModelArch, gpu: GpuSpec, tp: int, isl: int, osl: int, precision: str,
            calib: Calibration) -> Engine | Estimate:
    return build_engine(model, gpu, tp, 1, isl, osl, precision, GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, None,
                        None, calib)


def prefill_rate(model: ModelArch, gpu: GpuSpec, *, tp: int, input_tokens: int, budget_ms: float,
                 precision: str = "bf16", calib: Calibration = CALIBRATION) -> PhaseRate:
    """Largest request rate of one prefill-only engine whose mean prefill + queue <= ``budget_ms``."""
    isl = max(int(input_tokens), 1)
    e = _engine(model, gpu, tp, isl, 1, precision, calib)
    if isinstance(e, Estimate):
        return PhaseRate(0.0, 0.0, 0.0, e.reason)
    alone = e.prefill(1.0)
    chunk = float(max(e.mbt, 1))
    # a full chunked-prefill step: mbt prompt tokens at mean position isl / 2, mbt / isl admissions
    step = e.step_s(chunk, chunk * isl / 2.0, 0.0, 0.0, running_seqs=0.0, admitted_seqs=chunk / isl)
    service = isl * step / chunk  # engine time one prompt takes when steps are full
    slack = budget_ms * 1e-3 - alone
    if slack <= 0.0:
        return PhaseRate(0.0, 0.0, alone * 1e3, f"prefill of {isl} tokens alone takes {alone * 1e3:.1f} ms, "
                                                f"over the {budget_ms:.1f} ms left of TTFT for it")
    rho = 2.0 * slack / (service + 2.0 * slack)  # M/D/1: rho S / (2 (1 - rho)) = slack
    rate = rho / service
    return PhaseRate(rate, rate * isl, budget_ms)


def decode_rate(model: ModelArch, gpu: GpuSpec, *, tp: int, input_tokens: int, output_tokens: int,
                tpot_ms: float, precision: str = "bf16", calib: Calibration = CALIBRATION) -> PhaseRate:
    """Largest request rate of one decode-only engine whose step <= ``tpot_ms`` (``latency_ms`` is
    that step)."""
    isl, osl = max(int(input_tokens), 1), max(int(output_tokens), 1)
    e = _engine(model, gpu, tp, isl, osl, precision, calib)
    if isinstance(e, Estimate):
        return PhaseRate(0.0, 0.0, 0.0, e.reason)
    slo = tpot_ms * 1e-3
    t1 = e.tpot(1.0, False)[0]
    if t1 > slo:
        return PhaseRate(0.0, 0.0, t1 * 1e3, f"a decode step alone takes {t1 * 1e3:.1f} ms, over TPOT {tpot_ms:g} ms")
    cap = min(e.kv_seqs, float(MAX_NUM_SEQS))
    lo, hi = 1.0, max(cap, 1.0)
    if e.tpot(hi, False)[0] <= slo:
        lo = hi
    else:
        while hi - lo > 1e-4 * hi:  # the step time is increasing in b
            mid = 0.5 * (lo + hi)
            if e.tpot(mid, False)[0] <= slo:
                lo = mid
            else:
                hi = mid
    step = e.tpot(lo, False)[0]
    rate = lo / (osl * step)
    return PhaseRate(rate, rate * osl, step * 1e3)
