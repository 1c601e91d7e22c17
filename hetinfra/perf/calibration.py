"""The one table of fitted / assumed constants of the analytical estimator.

Every constant says where it comes from. "vllm.md" is ../shared/notes/vllm.md (sections 2.1, 2.2
and 6 summarise aiconfigurator's vLLM backend and a fit on its measured silicon_sample.csv).
"HAND FIT" below = a coarse grid search (t_fixed, t_per_seq, eta_bw, MFU, queueing slope/cap,
dispatch) minimising the mean |log error| of TTFT and TPOT on the 23 closed-loop vLLM points quoted
in vllm.md s3 (aiconfigurator silicon_sample.csv rows for Qwen3-32B / Llama-3.1-70B / -8B on
H100/H200, and NIM Llama-3.3-70B TP2 H100): mean |log err| TPOT 0.16 (~17%), TTFT 0.34 (~40%).
Cross-checks: Helix per-layer profiles (bandwidth and prefill efficiency), Melange Llama-2-7b
req/s table (vLLM 0.2.7; L4/A10G within ~+-40%, A100/H100 1.3-3x high because that engine was
CPU-bound), splitwise-sim prefill times (within ~20%). A proper fit (script, full silicon_sample,
error tables) is a later step; tests/perf/test_estimator.py pins the sanity points.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    # --- memory-bandwidth roofline -------------------------------------------------------------
    # Fraction of datasheet HBM/GDDR bandwidth a decode step achieves. aiconfigurator's
    # mem_bw_empirical_scaling_factor = 0.8; the vllm.md s2.2 fit gives 1/1.28 = 0.78.
    eta_bw: float = 0.78

    # --- per-step fixed costs --------------------------------------------------------------------
    # Fixed time per engine step (scheduler, sampler, launches), ms. vllm.md s2.2's 3-parameter fit
    # (no per-sequence term) gives 5.4 ms; with the per-sequence term below the HAND FIT gives 3.0.
    t_fixed_ms: float = 3.0
    # Extra step time per running sequence, us (scheduler bookkeeping, sampler, detokenisation, and
    # whatever else grows with the batch beyond the roofline). HAND FIT; it makes measured TPOT grow
    # with concurrency as in the data (Qwen3-32B TP2 H100: 15.9 -> 37.8 ms from 8 to 128 sequences).
    t_per_seq_us: float = 80.0
    # TP all-reduce latency per collective, us (2 per layer per step). vllm.md s2.2 fit: 8.6 us on
    # NVLink. PCIe: no measured point here; assumed ~3x (no NVLink P2P, NCCL over PCIe/host).
    allreduce_us_nvlink: float = 8.6
    allreduce_us_pcie: float = 25.0
    # Pipeline stage-to-stage send latency, us: aiconfigurator p2p latency 10 us.
    p2p_us: float = 10.0
    # Per-GPU bandwidth between pipeline stages on different nodes, GB/s: vllm.md s4 "inter-node
    # 25-100 GB/s per GPU"; the low end, since clouds' non-HPC instances rarely have more.
    inter_node_gbps: float = 25.0

    # --- compute efficiency ----------------------------------------------------------------------
    # Model FLOPs utilisation of prefill (and of the prefill chunks riding in decode steps), on
    # non-embedding FLOPs. vllm.md s2.1: implied MFU 0.4-0.58 (H100/H200); HAND FIT 0.6-0.7 (the
    # FP8 points want more); Helix A100 prefill 0.78; splitwise-sim A100/H100 prefill ~0.6.
    mfu_prefill: float = 0.6
    # Per-GPU multiplier on both MFUs where measured efficiency departs from the datasheet peak.
    # Helix profiles (shared/data/Helix-ASPLOS25, Llama-2-70B, one layer, 2000-token prompt): A100
    # 14 ms = 78% of 312 TF, L4 72 ms = 39% of 121 TF (72 W card, clocks throttle), T4 128 ms = 41%
    # of 65 TF. L4 and T4 therefore get ~0.65 of the default; others 1.0.
    mfu_scale_by_gpu: tuple[tuple[str, float], ...] = (("L4", 0.65), ("T4", 0.7))
    # Utilisation of the decode-token GEMMs once a step is compute-bound. Assumed equal to prefill
    # (same GEMMs; the HAND FIT cannot tell them apart).
    mfu_decode: float = 0.6
    # CPU dispatch overhead of a prefill per layer, ms: aiconfigurator vllm_backend
    # _prefill_dispatch_overhead_ms = 0.8 ms x layers; the HAND FIT prefers 0.4 (with 0.8 the
    # Llama-70B TP8 H100 ISL 1024 point, measured 70 ms, comes out ~2x high).
    prefill_dispatch_ms_per_layer: float = 0.4

    # --- TTFT queueing (form from aiconfigurator's vllm agg model, vllm.md s2.1) ------------------
    # TTFT(B) = prefill x min(1 + qf_slope x log2(B), qf_cap) + chunk steps, B = sequences in the
    # system. aiconfigurator uses 1/8 and 2; the HAND FIT wants 0.4 and 4 (closed-loop benchmarks
    # queue prefills much more at 64-128 concurrent requests: Qwen3-32B TP2 H100 c128 652 ms).
    qf_slope: float = 0.4
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
    kv_reservation_fraction: float = 1.0


CALIBRATION = Calibration()
