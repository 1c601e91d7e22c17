#!/usr/bin/env python3
"""The current (V1) engine at 350-600 sequences per engine: what the published MLPerf runs of vLLM 0.9.2
and 0.15 say about the step model there (docs/calibration.md, "The current engine at 350-600 sequences").

    .venv/bin/python tools/fit_large_batch.py        # the decomposition and the factors below (~1 min)

Inputs: hetinfra.perf.published's V1 MLPerf runs (v6.0's two, vLLM 0.15 with asynchronous scheduling, in
PUBLISHED; v5.1's four, vLLM 0.9.2 on 8 x H200 TP1 and 8 x H100 TP2, in PENDING), Llama-3.1-70B fp8 on
OpenOrca; sources, commits and licences in hetinfra/perf/data/SOURCES.md. Three reports:

1. *The measured step* of each server run (Little's law on its mean TTFT and TPOT: sequences per engine,
   the step = the mean TPOT, the prompt tokens riding in a step) against the step model at that
   composition, split into its GPU part and its CPU part (the engine's t_fixed_ms + t_per_seq_us per
   sequence, which vLLM 0.9.2 adds to the GPU's and 0.15 overlaps).
2. *The CPU bound*: each run replayed (hetinfra.sim.benchmark_run) on the shipped constants and with the
   engine's CPU-side step cost removed. What stays outside 15% with no CPU cost at all is not the CPU cost.
3. *The GPU factor*: the factor on the run's GPU fp8 GEMM rate (``fp8_gemm_scale``) at which each replay
   meets its published rate, with the shipped CPU cost and without it (bisection). One constant that
   explained the runs would give the runs one factor.

Nothing is written: no constant these runs call for is supported by the kernel data at small batch
(docs/calibration.md says why), so the tool reports and the shipped constants stay.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hetinfra.catalog.gpus import GPUS  # noqa: E402
from hetinfra.catalog.models import MODELS  # noqa: E402
from hetinfra.perf.calibration import CALIBRATION, GPU_KERNELS, Calibration, for_engine  # noqa: E402
from hetinfra.perf.engine import build_engine  # noqa: E402
from hetinfra.perf.published import PENDING, PUBLISHED, PublishedRate  # noqa: E402
from hetinfra.sim.benchmark_run import published_check  # noqa: E402

BISECT_STEPS = 8  # the GPU factor to about 1%


def v1_mlperf_runs() -> list[PublishedRate]:
    """The V1 engine's MLPerf runs: v6.0's (checks) and v5.1's (pending)."""
    return [p for p in PUBLISHED + PENDING if p.scheduler == "v1" and p.name.startswith("MLPerf")]


def without_cpu(calib: Calibration = CALIBRATION) -> Calibration:
    """``calib`` with the engine's CPU-side step cost removed (the GPU side unchanged)."""
    return dataclasses.replace(calib, t_fixed_ms=0.0, t_per_seq_us=0.0)


def with_gemm_factor(calib: Calibration, gpu: str, factor: float) -> Calibration:
    """``calib`` with ``gpu``'s fp8 GEMM rate (its GPU_KERNELS fp8_gemm_scale) times ``factor``."""
    mine = dict(GPU_KERNELS[gpu], fp8_gemm_scale=GPU_KERNELS[gpu]["fp8_gemm_scale"] * factor)
    by_gpu = tuple((g, tuple(sorted((mine if g == gpu else v).items()))) for g, v in sorted(GPU_KERNELS.items()))
    return dataclasses.replace(calib, by_gpu=by_gpu)


def measured_step(p: PublishedRate) -> tuple[float, float, float]:
    """A server run's (sequences per engine, step ms, prompt tokens per step), by Little's law on its
    means: every request is in the engine for its TTFT and (output - 1) steps of the mean TPOT."""
    rate = p.rate / p.engines
    seqs = rate * (p.ttft_ms + (p.osl - 1) * p.tpot_ms) / 1e3
    return seqs, p.tpot_ms, rate * p.isl * p.tpot_ms / 1e3


def model_step(p: PublishedRate, seqs: float, prefill: float, calib: Calibration = CALIBRATION) -> tuple[float, float]:
    """(GPU ms, CPU ms) of the step model at ``seqs`` decodes of the run's mean context with ``prefill``
    prompt tokens (half-way through their prompts), on the run's engine constants with CPU and GPU added."""
    c = dataclasses.replace(for_engine(calib, p.vllm_version), cpu_gpu_overlap=0.0)
    e = build_engine(MODELS[p.model], GPUS[p.gpu], p.tp, 1, p.isl, p.osl, p.precision, p.gpu_memory_utilization,
                     p.max_num_seqs, p.kv_precision, p.max_num_batched_tokens, c)
    ctx = p.isl + c.ctx_output_fraction * p.osl
    total = e.step_s(prefill, prefill * p.isl / 2.0, seqs, seqs * ctx) * 1e3
    cpu = (c.t_fixed_ms * 1e-3 + e.per_seq * seqs) * 1e3
    return total - cpu, cpu


def gemm_factor(p: PublishedRate, calib: Calibration, lo: float = 0.5, hi: float = 3.0) -> float:
    """The factor on the run's fp8 GEMM rate at which its replay meets the published rate (geometric
    bisection; ``hi`` if even that is slow)."""
    if published_check(p, with_gemm_factor(calib, p.gpu, hi)).error < 0.0:
        return hi
    for _ in range(BISECT_STEPS):
        mid = math.sqrt(lo * hi)
        if published_check(p, with_gemm_factor(calib, p.gpu, mid)).error < 0.0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def short(p: PublishedRate) -> str:
    return p.name.replace("MLPerf Inference ", "").replace(" open, Llama-3.1-70B", "")


def main() -> int:
    runs = v1_mlperf_runs()
    print("1. measured step (server runs; Little's law) against the step model at that composition")
    for p in runs:
        if p.procedure != "server":
            continue
        seqs, step, prefill = measured_step(p)
        gpu, cpu = model_step(p, seqs, prefill)
        print(f"  {short(p)}: {seqs:.0f} sequences, {prefill:.0f} prompt tokens a step: measured {step:.1f} ms; "
              f"model GPU {gpu:.1f} + CPU {cpu:.1f} ms ({gpu / step:.2f}x / {(gpu + cpu) / step:.2f}x)")
    print("2. replayed: shipped constants -> the engine's CPU-side step cost removed")
    for p in runs:
        now, bound = published_check(p).error, published_check(p, without_cpu()).error
        print(f"  {short(p)}: {now:+.1%} -> {bound:+.1%}")
    print("3. the factor on the fp8 GEMM rate at which each replay meets its rate (shipped CPU cost / none)")
    for p in runs:
        print(f"  {short(p)}: {gemm_factor(p, CALIBRATION):.2f} / {gemm_factor(p, without_cpu()):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
