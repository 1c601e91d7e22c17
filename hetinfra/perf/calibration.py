"""The one table of fitted / assumed constants of the analytical estimator.

Every constant says where it comes from. "FIT" = fitted by ``tools/fit_calibration.py`` (coordinate
search, median |relative error| per data set, data sets weighted equally, fit rows only) against the
measured data sets in ../shared: Helix-ASPLOS25 per-layer profiles (A100-40GB, V100, L4, T4; TP2/TP4 over
PCIe), splitwise-sim (A100-80GB / H100, Llama-2-70B / BLOOM-176B), SageServe (Llama-3.x on A100-80GB
PCIe) and the closed-loop vLLM points of vllm.md s3 (H100 / H200). docs/calibration.md has the method,
the error table per data set (fit and held-out rows) and the known weak spots; re-run the script to
reproduce it. "KERNELS" = fitted by ``tools/fit_kernels.py`` on public measurements vendored in
hetinfra/perf/data (aiconfigurator-core's measured kernels per GPU, its measured end-to-end vLLM
runs), which overrides the shared value for the GPUs in GPU_KERNELS and sets the current engine's
step costs. "vllm.md" is ../shared/notes/vllm.md. Constants not marked FIT are assumed or sourced
directly and are not touched by the fit.
FIT: tools/fit_calibration.py --write (shared constants), 2026-12-05
(GPU_KERNELS and the current engine's step costs), 2026-12-05
"""

from __future__ import annotations

import functools
import re

import dataclasses
from dataclasses import dataclass

# what the calibration data measures and the estimator's error per regime: the tables
# tools/fit_calibration.py --write records (hetinfra.perf.confidence reads them)
from hetinfra.perf.calibration_tables import COVERAGE, RESIDUALS  # noqa: F401


@dataclass(frozen=True)
class Calibration:
    # The vLLM version these constants describe (CALIBRATIONS below; ``calibration_for``). The class
    # defaults are the current engine's.
    vllm_version: str = "0.11"

    # --- memory-bandwidth roofline -------------------------------------------------------------
    # Fraction of datasheet HBM/GDDR bandwidth a decode step achieves. NOT fitted (held fixed):
    # aiconfigurator's mem_bw_empirical_scaling_factor = 0.8; the vllm.md s2.2 fit gives 1/1.28 = 0.78;
    # Helix batch-2 decode layers read their weights at 79-83% of datasheet bandwidth (A100, V100, L4).
    # A free fit trades it against mem_compute_serial (0.84 with 0.77, objective ~1 point better).
    eta_bw: float = 0.78

    # Fraction of datasheet bandwidth the attention kernel achieves reading the KV cache (per context
    # token of every decoding sequence): paged KV blocks are read in small scattered pieces, and long
    # contexts at large batches are where the weight-read efficiency above over-promises. FIT
    # (vllm.md s3 long-context high-concurrency points, Helix decode growth with batch, Melange).
    eta_kv: float = 0.78

    # --- per-step fixed costs (current vLLM: CUDA graphs, custom all-reduce) -------------------------
    # Fixed time per engine step (scheduler, sampler, launches), ms. KERNELS: on the measured vLLM
    # 0.12 runs (tools/fit_kernels.py, with the GPU side from the kernel table); estimator-v2's 3.6
    # (vllm.md s3 and SageServe batch-1 TPOT, without a kernel model) put an 8B batch-1 decode step on
    # an H100 at 9.9 ms against the kernels' 6.2 ms plus the runs' ~1 ms.
    t_fixed_ms: float = 0.845
    # Extra step time per running sequence, us (scheduler bookkeeping, sampler, detokenisation).
    # KERNELS (the measured runs' TPOT grows 60-90 us per sequence beyond the kernels' step time).
    t_per_seq_us: float = 83.9
    # Engine time per admitted request, ms (scheduling a new sequence, its separate prefill step in
    # engines without chunked prefill, tokenisation / output set-up), paid in the step that admits it.
    # FIT (Melange max rates for vLLM 0.2; vllm.md s3 for the current engine).
    t_per_request_ms: float = 0.0
    # Fraction of the smaller of the engine's CPU-side step time (the three costs above) and its GPU
    # time that overlaps the larger: step = gpu + cpu - overlap x min(gpu, cpu) (0 = they add up,
    # 1 = the step is whichever is longer). FIT: Melange's big GPUs are CPU-bound while its L4 / A10G
    # are not, which a purely additive CPU cost cannot follow.
    cpu_gpu_overlap: float = 0.0
    # TP all-reduce latency per collective, us (2 per layer per step). NVLink: FIT on vllm.md s3
    # (H100 TP2/4/8; vllm.md s2.2's fit: 8.6). PCIe: FIT on Helix L4x2 / T4x2 / T4x4 decode layers and
    # SageServe A100 PCIe TP2 / TP4 (no NVLink: NCCL over PCIe or through the host).
    allreduce_us_nvlink: float = 5.71
    allreduce_us_pcie: float = 9.9
    # Pipeline stage-to-stage send latency, us: aiconfigurator p2p latency 10 us. Not fitted (no PP data).
    p2p_us: float = 10.0
    # Per-GPU bandwidth between pipeline stages on different nodes, GB/s: vllm.md s4 "inter-node
    # 25-100 GB/s per GPU"; the low end, since clouds' non-HPC instances rarely have more. Not fitted.
    inter_node_gbps: float = 25.0
    # Fraction of the smaller of memory time and compute time of a decode step that does NOT overlap
    # the larger one: step = max(mem, comp) + serial x min(mem, comp) (0 = ideal roofline, 1 = they
    # add up). FIT: Helix decode layers grow with batch about as weight-read + GEMM time added
    # (attention and GEMM kernels run one after another; skinny decode GEMMs do not hide their loads).
    # It makes a memory-bound pipeline pay each stage's weight read plus part of its compute per
    # token, so PP trails TP at tight TPOT SLOs (docs/calibration.md). 0 = the pre-fit model.
    mem_compute_serial: float = 0.234
    # Fraction of the catalog PCIe bandwidth (intra_node_gbps) a TP all-reduce achieves on GPUs
    # without NVLink. FIT on Helix L4x2 / T4x2 / T4x4 prefill (large activations) and SageServe A100
    # PCIe TP2 / TP4 prefill (TP4 slower than TP2 there). 1.0 = the pre-fit model.
    pcie_allreduce_efficiency: float = 0.486

    # --- compute efficiency ----------------------------------------------------------------------
    # Model FLOPs utilisation of prefill (and of the prefill chunks riding in decode steps), on
    # non-embedding FLOPs. FIT (Helix A100/V100 prefill layers 0.75-0.78 of peak, splitwise-sim and
    # SageServe engine prefills lower; vllm.md s2.1: implied 0.4-0.58 including queueing).
    mfu_prefill: float = 0.605
    # Per-GPU multiplier on both MFUs where measured efficiency departs from the datasheet peak.
    # FIT on Helix L4 / T4 prefill and decode layers: both are 70-72 W PCIe inference cards whose
    # clocks throttle under sustained tensor-core load (Helix Llama-2-70B 2000-token prefill layer:
    # L4 39% and T4 41% of peak against A100 78%). Every other GPU 1.0.
    mfu_scale_by_gpu: tuple[tuple[str, float], ...] = (("L4", 0.614), ("T4", 0.584))
    # Utilisation of the decode-token GEMMs (M = batch, skinny) once compute matters. FIT (Helix
    # decode layers at batch 100-800; vllm.md s3 high-concurrency points).
    mfu_decode: float = 0.465
    # Utilisation of prefill attention (QK^T and PV at 16 bit, causal), the term that grows with the
    # square of the prompt; 0 = mfu_prefill. Per GPU in GPU_KERNELS.
    mfu_prefill_attn: float = 0.0
    # Share of the datasheet fp8 dense peak an fp8 GEMM reaches relative to a 16-bit one at the same
    # MFU (1.0 = twice as fast as bf16 where the catalog's fp8 peak is twice bf16's). Per GPU in
    # GPU_KERNELS (measured fp8 GEMMs run well short of 2x at serving shapes).
    fp8_gemm_scale: float = 1.0
    # Share of the fp8 GEMM rate (fp8_gemm_scale) prefill's large-M GEMMs reach relative to decode's
    # and mixed steps' (measured fp8 prefill GEMMs run nearer their peak). Per GPU in GPU_KERNELS.
    fp8_prefill_scale: float = 1.0
    # GPU time per layer of every step that no roofline term holds (kernel launches and the small
    # norm / rotary / activation kernels between the GEMMs), us; per pipeline stage's layers. Per
    # GPU in GPU_KERNELS; 0 elsewhere (the CPU-side t_fixed_ms carries it there).
    t_layer_us: float = 0.0
    # Efficiency of an MoE model's expert kernels relative to a dense model's (grouped GEMMs over
    # few tokens per expert, routing, token permutation): scales the weight-read bandwidth and the
    # GEMM rate of MoE models. Per GPU in GPU_KERNELS; 1.0 elsewhere. One value for every precision:
    # the kernel table's fp8 MoE (Qwen3-30B-A3B, 768-wide experts) runs at a fifth of its bf16 speed,
    # which the measured end-to-end Qwen3-235B-A22B-FP8 runs do not show (docs/calibration.md).
    moe_eff: float = 1.0
    # How a PCIe all-reduce's bandwidth falls with the TP degree beyond 2: x (2 / tp) ** decay (two
    # GPUs share a PCIe switch; four or eight cross switches and sockets through the host). Per GPU
    # in GPU_KERNELS; 0 (no fall) elsewhere.
    pcie_allreduce_tp_decay: float = 0.0
    # CPU dispatch overhead of a prefill per layer, ms. KERNELS (the measured runs' TTFT beyond the
    # kernels' prefill; aiconfigurator's vllm_backend _prefill_dispatch_overhead_ms = 0.8 ms x layers).
    prefill_dispatch_ms_per_layer: float = 0.0931

    # --- TTFT queueing (form from aiconfigurator's vllm agg model, vllm.md s2.1) ------------------
    # TTFT(B) = prefill x min(1 + qf_slope x log2(B), qf_cap) + chunk steps, B = sequences in the
    # system. aiconfigurator uses 1/8 and 2. qf_slope: KERNELS (the measured runs' TTFT at 1-128
    # concurrent requests); qf_cap: FIT.
    qf_slope: float = 0.51
    qf_cap: float = 4.0

    # --- memory reserves (subtracted from util x visible memory before KV) ----------------------
    # CUDA context growth, CUDA graphs, allocator slack, GB. vLLM logs ~0.5-1 GiB of CUDA graphs
    # plus non-torch memory; aiconfigurator keeps a 3.5 GiB "other_mem" (conservative).
    reserve_base_gb: float = 1.5
    # Peak activation bytes per (batched token x hidden) in vLLM's profile run (MLP gate/up with
    # intermediate ~3.5 h, bf16): ~21 bytes per token per hidden unit, divided by TP.
    activation_bytes_per_token_hidden: float = 21.0
    # Sampler logits reserved per sequence slot: vocab x 4 bytes (float32) x max_num_seqs.
    logits_bytes_per_vocab: float = 4.0
    # NCCL buffers when TP/PP > 1, GB: aiconfigurator 342 MB (TP2) / 392 MB (TP4/8).
    nccl_gb: float = 0.4

    # --- scheduling ----------------------------------------------------------------------------
    # Average context seen by a decode step = input + output * ctx_output_fraction (vllm.md s2.1:
    # ISL + OSL/2).
    ctx_output_fraction: float = 0.5
    # KV capacity is reserved for input + output tokens per sequence (vllm.md s2.1: conservative,
    # no preemption); 1.0 = full reservation.
    kv_reservation_fraction: float = 0.5
    # Share of the engine's CPU-side step cost (t_fixed_ms + t_per_seq_us per sequence) that vLLM V0's
    # multi-step decoding (--num-scheduler-steps N) pays once per N steps (scheduling, input preparation,
    # the GPU-CPU sync; vllm-project/vllm#6854); the rest (output processing per token) stays per step.
    # Only the V0 engine has multi-step (``with_scheduler_steps``); 0 elsewhere.
    multi_step_share: float = 0.0

    # Per-GPU overrides of the GPU-side constants above, fitted on measured kernel timings
    # (GPU_KERNELS below; ``for_gpu`` applies them): ((GPU name, ((field, value), ...)), ...).
    by_gpu: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()


# GPU-side constants per GPU, fitted by tools/fit_kernels.py on aiconfigurator-core 0.12.0's
# measured kernel database (Apache-2.0; the step table hetinfra/perf/data/aic_steps.json that
# tools/aic_steps.py extracts): decode, prefill and mixed prefill+decode steps of Llama-3.1-8B /
# 70B, Qwen3-32B and Qwen3-30B-A3B (MoE), bf16 and fp8, TP 1-8 (docs/calibration.md, "Measured
# kernels"). A GPU not listed keeps the shared constants. GPU_KERNEL_ALIASES: catalog GPUs whose
# kernels are those of a listed one (efficiencies transfer; bandwidth and peaks stay their own).
GPU_KERNELS: dict[str, dict[str, float]] = {
    "A100-80GB": {
        "allreduce_us_nvlink": 7.5,
        "eta_bw": 0.742,
        "eta_kv": 0.752,
        "fp8_gemm_scale": 1.0,
        "fp8_prefill_scale": 1.0,
        "mem_compute_serial": 0.754,
        "mfu_decode": 0.857,
        "mfu_prefill": 0.786,
        "mfu_prefill_attn": 0.46,
        "moe_eff": 0.603,
        "t_layer_us": 34.2,
    },
    "H100": {
        "allreduce_us_nvlink": 9.1,
        "eta_bw": 0.837,
        "eta_kv": 0.982,
        "fp8_gemm_scale": 0.589,
        "fp8_prefill_scale": 1.22,
        "mem_compute_serial": 0.525,
        "mfu_decode": 0.56,
        "mfu_prefill": 0.628,
        "mfu_prefill_attn": 0.844,
        "moe_eff": 0.56,
        "t_layer_us": 29.5,
    },
    "H200": {
        "allreduce_us_nvlink": 15.4,
        "eta_bw": 0.77,
        "eta_kv": 0.946,
        "fp8_gemm_scale": 0.589,
        "fp8_prefill_scale": 1.42,
        "mem_compute_serial": 0.383,
        "mfu_decode": 0.565,
        "mfu_prefill": 0.709,
        "mfu_prefill_attn": 0.484,
        "moe_eff": 0.741,
        "t_layer_us": 18.7,
    },
    "L40S": {
        "allreduce_us_pcie": 10.2,
        "eta_bw": 0.809,
        "eta_kv": 0.857,
        "fp8_gemm_scale": 0.775,
        "fp8_prefill_scale": 1.12,
        "mem_compute_serial": 0.41,
        "mfu_decode": 0.446,
        "mfu_prefill": 0.504,
        "mfu_prefill_attn": 0.477,
        "moe_eff": 1.0,
        "pcie_allreduce_efficiency": 0.24,
        "pcie_allreduce_tp_decay": 1.04,
        "t_layer_us": 14.1,
    },
}
GPU_KERNEL_ALIASES = {"A100": "A100-80GB", "H100-MEGA": "H100"}

CALIBRATION = Calibration(by_gpu=tuple((g, tuple(sorted(v.items()))) for g, v in sorted(GPU_KERNELS.items())))

_FOR_GPU: dict[tuple[Calibration, str], Calibration] = {}


def for_gpu(calib: Calibration, gpu_name: str) -> Calibration:
    """``calib`` with the GPU-side constants of ``gpu_name`` (its ``by_gpu`` entry, or that of the GPU
    whose kernels it shares) in place of the shared ones."""
    key = (calib, gpu_name)
    got = _FOR_GPU.get(key)
    if got is None:
        name = GPU_KERNEL_ALIASES.get(gpu_name, gpu_name)
        over = next((dict(v) for g, v in calib.by_gpu if g == name), None)
        got = _FOR_GPU[key] = dataclasses.replace(calib, by_gpu=(), **over) if over else calib
    return got


# ---- engine versions ------------------------------------------------------------------------------
# The key of the current engine's constants (V1; measured on vLLM 0.12-0.14 in vllm.md s3). The spec's
# deploy.vllm_version (default 0.12.0, hetinfra.spec.models.DEFAULT_VLLM_VERSION) picks the constants
# through ``calibration_for`` and is what the artifacts install.
DEFAULT_VLLM_VERSION = "0.11"

# Engines before vLLM 0.6 (V0: Python per-sequence sampling / detokenisation, prefill in separate
# steps, no async output processing; Melange profiled 0.2.7): only the fields below differ from the
# current engine. FIT (tools/fit_calibration.py, Melange Llama-2-7B max rates on L4 / A10G / A100 /
# H100, fit buckets only).
LEGACY_V0_2: dict[str, float] = {
    "t_fixed_ms": 0.5,
    "t_per_seq_us": 491.0,
    "t_per_request_ms": 15.2,
    "eta_kv": 0.38,
    "cpu_gpu_overlap": 0.6,
    # the current engine's TTFT constants are fitted on vLLM 0.12 runs (tools/fit_kernels.py); the V0
    # engine keeps those it was fitted with (estimator-v2)
    "qf_slope": 0.256,
    "prefill_dispatch_ms_per_layer": 0.225,
}

# Engines from vLLM 0.14 on schedule asynchronously by default (vLLM v0.14.0 release notes: "Async
# scheduling is now enabled by default", vllm-project/vllm#27614, "overlaps engine core scheduling with
# GPU execution"; the feature is vllm-project/vllm#19970, the scheduler one step ahead of the GPU): the
# engine's CPU-side step costs (t_fixed_ms, t_per_seq_us, t_per_request_ms, fitted on vLLM 0.12 runs,
# where they add to the GPU's: cpu_gpu_overlap searched settles at 0.025) hide behind the GPU's step.
# Only this differs from the current entry. 1.0 (the step is the larger of the two) is the mechanism's
# bound, not a fit: no measured run of such an engine is vendored but MLPerf v6.0's two (vLLM 0.15),
# which are checks, and read slower than published even so (docs/calibration.md).
ASYNC_SCHEDULING: dict[str, float] = {"cpu_gpu_overlap": 1.0}

# vLLM 0.6-0.7's V0 engine (V1 became the default in 0.8): scheduling, input preparation and output
# processing run in the engine's one loop between GPU steps (vLLM 0.6.0's profile of Llama 3 8B on an
# H100: the GPU busy 38% of the time, blog.vllm.ai 2024-09-05; multi-step RFC vllm-project/vllm#6854:
# "5-13ms of GPU bubble" per decode step; the V1 engine moved them off the loop, "up to 1.7x higher
# throughput compared to V0 (without multi-step scheduling)", blog.vllm.ai, January 2025). Only the per-
# sequence CPU cost and the share of the CPU step cost multi-step decoding pays once per N steps differ
# from the current engine. V0FIT: fitted by tools/fit_v0_engine.py on the eight published runs of
# vLLM 0.6.0-0.7.3 (hetinfra.perf.published: MLPerf v5.0's four, single-step; the vLLM v0.6.0 blog's
# four, --num-scheduler-steps 10), GPU side the shipped kernel fit; leave-one-out in docs/calibration.md.
V0_ENGINE: dict[str, float] = {"t_per_seq_us": 110.0, "multi_step_share": 0.4}

# vLLM version -> constants, keyed by the version family each entry describes. vLLM 0.6 is where the
# engine's CPU costs dropped (async output processing, multi-step scheduling), 0.8 where the V1 engine
# became the default, 0.14 where its CPU work began to overlap the GPU: a version string before 0.6
# reads the "0.2" entry, 0.6-0.7 the "0.6" entry, from 0.14 on the "0.14" entry, any other the current
# "0.11" entry. ENGINE_OVERRIDES: each entry's fields that differ from the current engine's
# (``for_engine`` applies them to other constants, e.g. a fit's trial).
ENGINE_OVERRIDES: dict[str, dict] = {"0.2": dict(LEGACY_V0_2, by_gpu=()), "0.6": V0_ENGINE, "0.14": ASYNC_SCHEDULING}
CALIBRATIONS: dict[str, Calibration] = {
    DEFAULT_VLLM_VERSION: CALIBRATION,
    **{key: dataclasses.replace(CALIBRATION, vllm_version=key, **over) for key, over in ENGINE_OVERRIDES.items()},
}
LEGACY_BEFORE = (0, 6)
V1_FROM = (0, 8)
ASYNC_FROM = (0, 14)
# entry -> the entry whose measured runs speak for it: the "0.14" engine's constants are the current
# engine's (measured), with their overlap assumed. Its estimates carry that engine's confidence
# (hetinfra.perf.confidence) and that engine's figure as a second source (hetinfra.perf.model):
# where the assumed overlap moves a rate beyond its interval, the interval widens to the measured
# engine's figure and ``planning.confidence: safe`` plans that one.
MEASURED_AS: dict[str, str] = {"0.14": DEFAULT_VLLM_VERSION}


@functools.lru_cache(maxsize=64)  # pure; called once per template x class (1.7 M calls at 1,024 classes)
def _version_key(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string, each the number its part starts with: a release's
    suffix is no digit of it (0.13rc1 and 0.13.0rc1 are 0.13, not 0.131; 0.5rc1 is 0.5, not 0.51),
    and the parts end at the first one that carries a suffix."""
    parts = []
    for p in version.strip().lstrip("v").split(".")[:3]:
        digits = re.match(r"[0-9]*", p).group()
        if not digits:
            break
        parts.append(int(digits))
        if digits != p:
            break
    if not parts:
        raise ValueError(f"vLLM version {version!r} is not a version number like 0.11.0")
    return tuple(parts)


def engine_key(vllm_version: str | None) -> str:
    """The CALIBRATIONS key of the engine a vLLM version string runs (None: the default engine)."""
    if vllm_version is None:
        return DEFAULT_VLLM_VERSION
    if vllm_version in CALIBRATIONS:
        return vllm_version
    key = _version_key(vllm_version)
    if key < LEGACY_BEFORE:
        return "0.2"
    if key < V1_FROM:
        return "0.6"
    return "0.14" if key >= ASYNC_FROM else DEFAULT_VLLM_VERSION


def calibration_for(vllm_version: str | None = None) -> Calibration:
    """The constants of the engine a vLLM version string runs ("0.2.7", "0.11.0", "v0.19.0", or a
    key of CALIBRATIONS); None: the default (current) engine."""
    return CALIBRATIONS[engine_key(vllm_version)]


def for_engine(calib: Calibration, vllm_version: str, scheduler_steps: int = 1) -> Calibration:
    """``calib`` (the current engine's constants, or a fit's trial of them) as the engine of
    ``vllm_version`` runs them: with that engine's ENGINE_OVERRIDES (none where ``calib`` already is
    that engine's), and ``scheduler_steps`` (V0's --num-scheduler-steps; ``with_scheduler_steps``)."""
    key = engine_key(vllm_version)
    over = ENGINE_OVERRIDES.get(key)
    if over and calib.vllm_version != key:
        calib = dataclasses.replace(calib, vllm_version=key, **over)
    return with_scheduler_steps(calib, scheduler_steps)


def with_scheduler_steps(calib: Calibration, steps: int) -> Calibration:
    """``calib`` under multi-step decoding of ``steps`` steps per schedule: the ``multi_step_share`` of
    its CPU step cost (t_fixed_ms, t_per_seq_us) paid once per ``steps`` steps, i.e. per step
    x (1 - share + share / steps). Unchanged at one step or where the engine has no multi-step."""
    if steps <= 1 or calib.multi_step_share <= 0.0:
        return calib
    scale = 1.0 - calib.multi_step_share + calib.multi_step_share / steps
    return dataclasses.replace(calib, t_fixed_ms=calib.t_fixed_ms * scale, t_per_seq_us=calib.t_per_seq_us * scale,
                               multi_step_share=0.0)
