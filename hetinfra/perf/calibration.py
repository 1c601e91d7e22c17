"""The one table of fitted / assumed constants of the analytical estimator.

Every constant says where it comes from. "FIT" = fitted by ``tools/fit_calibration.py`` (coordinate
search, median |relative error| per data set, data sets weighted equally, fit rows only) against the
measured data sets in ../shared: Helix-ASPLOS25 per-layer profiles (A100-40GB, V100, L4, T4; TP2/TP4 over
PCIe), splitwise-sim (A100-80GB / H100, Llama-2-70B / BLOOM-176B), SageServe (Llama-3.x on A100-80GB
PCIe) and the closed-loop vLLM points of vllm.md s3 (H100 / H200). docs/calibration.md has the method,
the error table per data set (fit and held-out rows) and the known weak spots; re-run the script to
reproduce it. "vllm.md" is ../shared/notes/vllm.md. Constants not marked FIT are assumed or sourced
directly and are not touched by the fit.
FIT: tools/fit_calibration.py --fit --write, 2026-11-23
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


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
    # Fixed time per engine step (scheduler, sampler, launches), ms. FIT (set by vllm.md s3 and
    # SageServe batch-1 TPOT; vllm.md s2.2's fit without a per-sequence term gave 5.4).
    t_fixed_ms: float = 3.6
    # Extra step time per running sequence, us (scheduler bookkeeping, sampler, detokenisation). FIT
    # (vllm.md s3 concurrency sweeps, SageServe batch sweeps).
    t_per_seq_us: float = 67.1
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
    # CPU dispatch overhead of a prefill per layer, ms. FIT (SageServe and vllm.md short-prompt
    # prefills; aiconfigurator vllm_backend _prefill_dispatch_overhead_ms = 0.8 ms x layers).
    prefill_dispatch_ms_per_layer: float = 0.225

    # --- TTFT queueing (form from aiconfigurator's vllm agg model, vllm.md s2.1) ------------------
    # TTFT(B) = prefill x min(1 + qf_slope x log2(B), qf_cap) + chunk steps, B = sequences in the
    # system. aiconfigurator uses 1/8 and 2. FIT on vllm.md s3 TTFT (the only closed-loop data).
    qf_slope: float = 0.256
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


CALIBRATION = Calibration()


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
}

# vLLM version -> constants, keyed by the version family each entry was measured on. vLLM 0.6 is
# where the engine's CPU costs dropped (async output processing, multi-step scheduling, then the V1
# engine): a version string before 0.6 reads the "0.2" entry, any later one the current "0.11" entry.
CALIBRATIONS: dict[str, Calibration] = {
    "0.2": dataclasses.replace(CALIBRATION, vllm_version="0.2", **LEGACY_V0_2),
    DEFAULT_VLLM_VERSION: CALIBRATION,
}
LEGACY_BEFORE = (0, 6)


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for p in version.strip().lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        raise ValueError(f"vLLM version {version!r} is not a version number like 0.11.0")
    return tuple(parts)


def calibration_for(vllm_version: str | None = None) -> Calibration:
    """The constants of the engine a vLLM version string runs ("0.2.7", "0.11.0", "v0.19.0", or a
    key of CALIBRATIONS); None: the default (current) engine."""
    if vllm_version is None:
        return CALIBRATION
    if vllm_version in CALIBRATIONS:
        return CALIBRATIONS[vllm_version]
    return CALIBRATIONS["0.2" if _version_key(vllm_version) < LEGACY_BEFORE else DEFAULT_VLLM_VERSION]


# What the calibration data measures: (GPU, engine, TP, batch regime, rows), one entry per
# combination with rows. Recorded by tools/fit_calibration.py --write from every row it fits or
# checks (fit and held-out; the batch of a max-rate row is that of the estimator's operating point);
# hetinfra.perf.confidence reads it. Engines: "vllm-<CALIBRATIONS key>", or another engine the data
# came from ("splitwise-2023"). GPU names are the catalog's ("A100-80GB-PCIe": SageServe's PCIe cards).
COVERAGE: tuple[tuple[str, str, int, str, int], ...] = (
    ("A100", "vllm-0.11", 1, "b<=32", 129),
    ("A100", "vllm-0.11", 1, "32<b<=128", 30),
    ("A100", "vllm-0.11", 1, "b>128", 68),
    ("A100-80GB", "splitwise-2023", 2, "b<=32", 30),
    ("A100-80GB", "splitwise-2023", 2, "32<b<=128", 2),
    ("A100-80GB", "splitwise-2023", 4, "b<=32", 30),
    ("A100-80GB", "splitwise-2023", 4, "32<b<=128", 2),
    ("A100-80GB", "splitwise-2023", 8, "b<=32", 60),
    ("A100-80GB", "splitwise-2023", 8, "32<b<=128", 4),
    ("A100-80GB", "vllm-0.2", 1, "b<=32", 2),
    ("A100-80GB", "vllm-0.2", 1, "32<b<=128", 20),
    ("A100-80GB", "vllm-0.2", 1, "b>128", 15),
    ("A100-80GB-PCIe", "vllm-0.11", 2, "b<=32", 50),
    ("A100-80GB-PCIe", "vllm-0.11", 4, "b<=32", 50),
    ("A10G", "vllm-0.2", 1, "b<=32", 27),
    ("A10G", "vllm-0.2", 1, "32<b<=128", 8),
    ("A10G", "vllm-0.2", 1, "b>128", 1),
    ("H100", "splitwise-2023", 2, "b<=32", 30),
    ("H100", "splitwise-2023", 2, "32<b<=128", 2),
    ("H100", "splitwise-2023", 4, "b<=32", 30),
    ("H100", "splitwise-2023", 4, "32<b<=128", 2),
    ("H100", "splitwise-2023", 8, "b<=32", 60),
    ("H100", "splitwise-2023", 8, "32<b<=128", 4),
    ("H100", "vllm-0.11", 2, "b<=32", 18),
    ("H100", "vllm-0.11", 2, "32<b<=128", 9),
    ("H100", "vllm-0.11", 4, "b<=32", 6),
    ("H100", "vllm-0.11", 4, "32<b<=128", 6),
    ("H100", "vllm-0.11", 8, "b<=32", 6),
    ("H100", "vllm-0.11", 8, "32<b<=128", 6),
    ("H100", "vllm-0.2", 1, "b<=32", 1),
    ("H100", "vllm-0.2", 1, "32<b<=128", 21),
    ("H100", "vllm-0.2", 1, "b>128", 15),
    ("H200", "vllm-0.11", 1, "b<=32", 12),
    ("H200", "vllm-0.11", 1, "32<b<=128", 6),
    ("L4", "vllm-0.11", 1, "b<=32", 93),
    ("L4", "vllm-0.11", 1, "32<b<=128", 30),
    ("L4", "vllm-0.11", 1, "b>128", 38),
    ("L4", "vllm-0.11", 2, "b<=32", 84),
    ("L4", "vllm-0.11", 2, "32<b<=128", 30),
    ("L4", "vllm-0.11", 2, "b>128", 38),
    ("L4", "vllm-0.2", 1, "b<=32", 28),
    ("L4", "vllm-0.2", 1, "32<b<=128", 8),
    ("T4", "vllm-0.11", 1, "b<=32", 84),
    ("T4", "vllm-0.11", 1, "32<b<=128", 30),
    ("T4", "vllm-0.11", 1, "b>128", 36),
    ("T4", "vllm-0.11", 2, "b<=32", 84),
    ("T4", "vllm-0.11", 2, "32<b<=128", 30),
    ("T4", "vllm-0.11", 2, "b>128", 38),
    ("T4", "vllm-0.11", 4, "b<=32", 84),
    ("T4", "vllm-0.11", 4, "32<b<=128", 30),
    ("T4", "vllm-0.11", 4, "b>128", 53),
    ("V100", "vllm-0.11", 1, "b<=32", 129),
    ("V100", "vllm-0.11", 1, "32<b<=128", 30),
    ("V100", "vllm-0.11", 1, "b>128", 53),
)


# The signed RATE error of the estimator per (GPU, engine, batch regime): (GPU, engine, batch regime,
# rows, p10, median, p90), e = predicted / measured rate - 1 (+ = optimistic), over the rows COVERAGE
# counts (a time row's error e reads as the rate error 1 / (1 + e) - 1). Recorded by
# tools/fit_calibration.py (--fit --write, or --write-residuals for the shipped constants);
# hetinfra.perf.confidence turns a regime's quantiles into its templates' rate interval.
RESIDUALS: tuple[tuple[str, str, str, int, float, float, float], ...] = (
    ("A100", "vllm-0.11", "b<=32", 129, -0.2444, -0.2254, -0.0386),
    ("A100", "vllm-0.11", "32<b<=128", 30, -0.1146, -0.0568, 0.1509),
    ("A100", "vllm-0.11", "b>128", 68, -0.0779, -0.0133, 0.1178),
    ("A100-80GB", "splitwise-2023", "b<=32", 120, -0.0344, 0.0808, 0.3313),
    ("A100-80GB", "splitwise-2023", "32<b<=128", 8, -0.3839, 0.4065, 0.8347),
    ("A100-80GB", "vllm-0.2", "b<=32", 2, 0.0921, 0.1176, 0.1431),
    ("A100-80GB", "vllm-0.2", "32<b<=128", 20, -0.2177, 0.0027, 0.2082),
    ("A100-80GB", "vllm-0.2", "b>128", 15, -0.3578, -0.2199, 0.0694),
    ("A100-80GB-PCIe", "vllm-0.11", "b<=32", 100, -0.153, 0.016, 0.4913),
    ("A10G", "vllm-0.2", "b<=32", 27, -0.2782, -0.1859, -0.0784),
    ("A10G", "vllm-0.2", "32<b<=128", 8, -0.2019, -0.0956, 0.0093),
    ("A10G", "vllm-0.2", "b>128", 1, -0.0683, -0.0683, -0.0683),
    ("H100", "splitwise-2023", "b<=32", 120, -0.0847, -0.0278, 0.5273),
    ("H100", "splitwise-2023", "32<b<=128", 8, -0.3986, 0.3384, 0.8916),
    ("H100", "vllm-0.11", "b<=32", 30, -0.1295, -0.0194, 0.1775),
    ("H100", "vllm-0.11", "32<b<=128", 21, -0.0688, 0.0898, 1.6221),
    ("H100", "vllm-0.2", "b<=32", 1, 0.9593, 0.9593, 0.9593),
    ("H100", "vllm-0.2", "32<b<=128", 21, -0.1482, -0.0015, 0.5738),
    ("H100", "vllm-0.2", "b>128", 15, -0.3261, -0.1419, 0.0208),
    ("H200", "vllm-0.11", "b<=32", 12, -0.1148, 0.0091, 0.3321),
    ("H200", "vllm-0.11", "32<b<=128", 6, -0.579, -0.4078, -0.2468),
    ("L4", "vllm-0.11", "b<=32", 177, -0.1302, -0.0182, 0.291),
    ("L4", "vllm-0.11", "32<b<=128", 60, -0.0592, -0.0099, 0.0665),
    ("L4", "vllm-0.11", "b>128", 76, -0.0688, 0.0649, 0.1832),
    ("L4", "vllm-0.2", "b<=32", 28, -0.302, -0.1718, 0.2598),
    ("L4", "vllm-0.2", "32<b<=128", 8, -0.1397, -0.0865, 0.0272),
    ("T4", "vllm-0.11", "b<=32", 252, -0.1379, 0.0232, 0.2239),
    ("T4", "vllm-0.11", "32<b<=128", 90, -0.0051, 0.1456, 0.3832),
    ("T4", "vllm-0.11", "b>128", 127, -0.1025, 0.0541, 0.2672),
    ("V100", "vllm-0.11", "b<=32", 129, -0.1664, -0.1309, 0.0002),
    ("V100", "vllm-0.11", "32<b<=128", 30, 0.1552, 0.3169, 0.9354),
    ("V100", "vllm-0.11", "b>128", 53, -0.1753, -0.0599, 0.0589),
)
