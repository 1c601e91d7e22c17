"""GPU hardware facts, keyed by SkyPilot accelerator name.

Sources: ../shared/notes/vllm.md section 4 (NVIDIA datasheets, aiconfigurator system
files, cli99/llm-analysis); each entry names its source in a comment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Dense (no 2:4 sparsity) tensor throughput."""

    name: str  # SkyPilot accelerator name, e.g. "A100-80GB"
    memory_gb: float  # HBM/GDDR capacity in GB (1e9 bytes)
    bandwidth_gbps: float  # memory bandwidth, GB/s
    bf16_tflops: float  # dense BF16/FP16 tensor TFLOPS
    fp8_tflops: float | None  # dense FP8 TFLOPS; None where the GPU has no FP8 tensor cores
    int8_tops: float | None  # dense INT8 TOPS; None if unknown
    nvlink: bool  # GPUs of one instance are linked by NVLink (else PCIe)
    intra_node_gbps: float  # per-GPU per-direction bandwidth between GPUs of one node, GB/s


def _g(name, memory_gb, bandwidth_gbps, bf16_tflops, fp8_tflops, int8_tops, nvlink, intra_node_gbps):
    return GpuSpec(name, memory_gb, bandwidth_gbps, bf16_tflops, fp8_tflops, int8_tops, nvlink,
                   intra_node_gbps)


# name -> spec. Dense tensor numbers (the 2:4-sparse figures NVIDIA headlines are twice these).
# intra_node_gbps: NVLink per GPU per direction where the cloud's multi-GPU instances have it,
# else the PCIe link (PCIe3 x16 16 GB/s, PCIe4 x16 32 GB/s, PCIe5 x16 64 GB/s).
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        # T4: NVIDIA T4 datasheet; vllm.md s4 (65 TF FP16 mixed, INT8 130 TOPS, 320 GB/s).
        # Turing has NO BF16: bf16_tflops holds the FP16 rate (vLLM serves fp16 on it).
        # PCIe3 x16, no NVLink (AWS g4dn, GCP n1+T4, Azure NCasT4_v3).
        _g("T4", 16, 320, 65, None, 130, False, 16),
        # L4: aiconfigurator systems/l4.yaml ("dense; NVIDIA lists 242 with sparsity"); vllm.md s4.
        # INT8 242 TOPS dense (485 sparse, NVIDIA L4 datasheet). PCIe4 x16, no NVLink.
        _g("L4", 24, 300, 121, 242, 242, False, 32),
        # A10G (AWS g5): cli99/llm-analysis a10g-pcie-24gb.json (70 TF, 600 GB/s); vllm.md s4.
        # No official datasheet; INT8 rate unknown. PCIe4, no NVLink.
        _g("A10G", 24, 600, 70, None, None, False, 32),
        # A10 (Azure NVadsA10_v5): NVIDIA A10 datasheet via vllm.md s4 (125 TF dense / 250 sparse,
        # INT8 250 TOPS dense, 600 GB/s). Azure also sells 1/6..1/2 slices of it. PCIe4.
        _g("A10", 24, 600, 125, None, 250, False, 32),
        # L40S: aiconfigurator l40s.yaml (362.05 TF BF16, 733 FP8 dense, 864 GB/s); vllm.md s4.
        # INT8 733 TOPS dense (L40S datasheet). No NVLink: vLLM docs prefer PP over TP on it.
        _g("L40S", 48, 864, 362.05, 733, 733, False, 32),
        # V100 (16 GB, SXM2 as in AWS p3 / GCP): NVIDIA V100 datasheet (125 TF FP16 tensor, 900 GB/s).
        # Volta has no BF16 (bf16_tflops = FP16 rate), no FP8 and no INT8 tensor cores.
        # NVLink2 6 links x 25 GB/s = 150 GB/s per direction (p3.8xl/16xl). Azure NCv3 is PCIe.
        _g("V100", 16, 900, 125, None, None, True, 150),
        # V100-32GB (AWS p3dn, Azure NDv2): same chip as above with 32 GB HBM2.
        _g("V100-32GB", 32, 900, 125, None, None, True, 150),
        # A100 (SkyPilot "A100" = 40 GB SXM4): cli99/llm-analysis a100-sxm-40gb.json (312 TF,
        # 1555 GB/s); vllm.md s4. INT8 624 TOPS dense (A100 datasheet). NVLink3 300 GB/s per dir.
        _g("A100", 40, 1555, 312, None, 624, True, 300),
        # A100-80GB (SXM4: AWS p4de, GCP a2-ultragpu, Azure NDm A100 v4): aiconfigurator
        # a100_sxm.yaml (2039 GB/s, 312 TF, 300 GB/s NVLink per dir). Azure NC A100 v4 is the PCIe
        # part (1935 GB/s, no NVLink); this entry uses the SXM numbers.
        _g("A100-80GB", 80, 2039, 312, None, 624, True, 300),
        # H100 (SXM5 80 GB): aiconfigurator h100_sxm.yaml (3350 GB/s, 989 TF BF16, 1979 FP8 dense,
        # NVLink4 450 GB/s per dir); INT8 1979 TOPS dense (H100 datasheet). Azure NC H100 v5 is
        # the PCIe/NVL part (slower); this entry uses the SXM numbers.
        _g("H100", 80, 3350, 989, 1979, 1979, True, 450),
        # H100-MEGA (GCP a3-megagpu-8g): the same H100 SXM GPU with more NICs.
        _g("H100-MEGA", 80, 3350, 989, 1979, 1979, True, 450),
        # H200 (SXM 141 GB HBM3e): aiconfigurator h200_sxm.yaml (4800 GB/s, 989 / 1979 TF).
        _g("H200", 141, 4800, 989, 1979, 1979, True, 450),
        # B200 (HGX, 180 GB per GPU; 192 GB marketed for the chip): aiconfigurator b200_sxm.yaml
        # (7700 GB/s - NVIDIA markets 8 TB/s -, 2250 TF BF16, 4500 FP8 dense; INT8 4500 dense);
        # NVLink5 1.8 TB/s bidirectional = 900 GB/s per dir.
        _g("B200", 180, 7700, 2250, 4500, 4500, True, 900),
    )
}

# Memory the CUDA runtime reports (torch.cuda.mem_get_info total, GiB): what vLLM multiplies by
# --gpu-memory-utilization. Catalog "GB" above is the marketed size; HBM parts report about the
# binary size (80 GB -> ~79 GiB), GDDR parts with ECC on lose ~1/16 (24 GB -> ~22 GiB).
# vllm.md s4 gives nvidia-smi MiB for L4 23,034 / A10G 23,028 / L40S 46,068 / H100 81,559; the
# SkyPilot catalog (shared/data/skypilot-catalog) gives 22,888 MiB for A10G/L4 and 183,359 MiB
# for B200; the rest are typical nvidia-smi totals minus ~0.5 GiB [unverified, from memory].
VISIBLE_MEMORY_GIB: dict[str, float] = {
    "T4": 14.6,
    "L4": 22.0,
    "A10G": 22.0,
    "A10": 22.0,
    "L40S": 44.4,
    "V100": 15.7,
    "V100-32GB": 31.7,
    "A100": 39.4,
    "A100-80GB": 79.1,
    "H100": 79.1,
    "H100-MEGA": 79.1,
    "H200": 139.8,
    "B200": 178.4,
}


def visible_memory_bytes(gpu: GpuSpec) -> float:
    """Device memory vLLM sees, in bytes: the table above, else the catalog GB (conservative)."""
    gib = VISIBLE_MEMORY_GIB.get(gpu.name)
    if gib is not None and abs(gpu.memory_gb - GPUS[gpu.name].memory_gb) < 1e-9:
        return gib * 1073741824.0
    return gpu.memory_gb * 1e9


def get_gpu(name: str) -> GpuSpec | None:
    """The catalog entry for a SkyPilot accelerator name (exact, then case-insensitive)."""
    if name in GPUS:
        return GPUS[name]
    lowered = {k.lower(): v for k, v in GPUS.items()}
    return lowered.get(name.lower())


# GPUs without BF16 support (pre-Ampere); vLLM needs --dtype half there.
NO_BF16_GPUS = frozenset({"T4", "V100", "V100-32GB", "P100", "P4", "P40", "K80", "M60", "K520", "T4G"})


def serving_precision(precision: str, gpu: str) -> str:
    """The precision vLLM actually runs: bf16 becomes fp16 on GPUs without BF16 (T4, V100),
    which vLLM does itself with a warning; same bytes, so the planned rates hold."""
    # a mixed pipeline ("H100+T4") runs one dtype on every stage
    no_bf16 = any(g.upper() in NO_BF16_GPUS for g in gpu.split("+"))
    return "fp16" if precision == "bf16" and no_bf16 else precision
