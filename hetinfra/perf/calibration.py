"""The one table of fitted / assumed constants of the analytical estimator.

Every constant says where it comes from. "vllm.md" is ../shared/notes/vllm.md (sections 2.1, 2.2
and 6 summarise aiconfigurator's vLLM backend and a fit on its measured silicon_sample.csv).
A proper fit (script + error tables) is a later step; the values below were checked by hand
against the Melange Llama-2-7b table and the aiconfigurator H100/H200 points (see
tests/perf/test_estimator.py for the pinned sanity points).
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
    # Fixed time per engine step (scheduler, sampler, launches, detokenisation), ms.
    # vllm.md s2.2 fit on H100/H200 (vLLM 0.12): 5.4 ms.
    t_fixed_ms: float = 3.0
    # Extra step time per running sequence, us (scheduler bookkeeping, sampler, detokenisation,
    # per-request metadata). Fitted by hand (see module docstring).
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
    # Model FLOPs utilisation of prefill (and of the prefill chunks riding in decode steps).
    # vllm.md s2.1: implied MFU 0.4-0.58 at ISL 8192, 0.3-0.45 at ISL 1024 (H100/H200, vLLM).
    mfu_prefill: float = 0.6
    # Per-GPU multiplier on both MFUs where measured efficiency departs from the datasheet peak.
    # Helix profiles (shared/data/Helix-ASPLOS25, Llama-2-70B, one layer, 2000-token prompt): A100
    # 14 ms = 78% of 312 TF, L4 72 ms = 39% of 121 TF (72 W card, clocks throttle), T4 128 ms = 41%
    # of 65 TF. L4 and T4 therefore get ~0.65 of the default; others 1.0.
    mfu_scale_by_gpu: tuple[tuple[str, float], ...] = (("L4", 0.65), ("T4", 0.7))
    # Utilisation of the GEMMs of a decode batch once compute-bound (large batch).
    # Assumed a little above prefill: same GEMMs, no attention over long prompts.
    mfu_decode: float = 0.6
    # CPU dispatch overhead of a prefill per layer, ms: aiconfigurator vllm_backend
    # _prefill_dispatch_overhead_ms = 0.8 ms x layers. Its own example (vllm.md s2.2: Llama-70B
    # TP8 H100 ISL 1024 measured 70 ms) over-predicts by ~50% with 0.8, so halved here.
    prefill_dispatch_ms_per_layer: float = 0.4

    # --- TTFT queueing (aiconfigurator vllm agg model, vllm.md s2.1) ---------------------------
    # TTFT(B) = prefill x min(1 + log2(B) * qf_slope, qf_cap): 1/8 and 2 in aiconfigurator
    # (improved their vLLM TTFT MAPE 26.4% -> 18.0%).
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
