"""Which GPUs each cloud instance type carries: the tables the feeds use to name and check offers.

Standard library only (``tools/build_snapshot.py`` imports this module without hetinfra installed).
GPU names are SkyPilot accelerator names, as in :mod:`hetinfra.catalog.gpus`.

Sources: ../shared/notes/feeds.md sections 1-5 and the SkyPilot v8 catalog extract in
../shared/data/skypilot-catalog/v8 (vCPU/memory/GPU columns of its aws, gcp and azure vms.csv).
"""

from __future__ import annotations

import re

#: Nominal memory per GPU in GB (vllm.md section 4; price_feeds/data/SOURCES.md).
GPU_MEMORY_GB: dict[str, float] = {
    "T4": 16,
    "L4": 24,
    "A10G": 24,
    "A10": 24,
    "L40S": 48,
    "A100": 40,
    "A100-80GB": 80,
    "H100": 80,
    "H100-MEGA": 80,
    "H200": 141,
    "B200": 180,
    "V100": 16,
    "V100-32GB": 32,
}

#: Per-instance-type memory overrides: Azure NC(ad)s H100 v5 carry the H100 NVL (94 GB).
GPU_MEMORY_OVERRIDE: dict[re.Pattern, float] = {
    re.compile(r"^Standard_NC[0-9]+ad(?:i)?s_H100_v5$"): 94,
}


def gpu_memory_gb(instance_type: str, gpu: str) -> float | None:
    for pattern, gb in GPU_MEMORY_OVERRIDE.items():
        if pattern.match(instance_type):
            return gb
    return GPU_MEMORY_GB.get(gpu)


# --- AWS ------------------------------------------------------------------------------------
# family -> (GPU, {size: GPUs}). Sizes from the EC2 instance type pages; counts agree with the
# catalog extract's AcceleratorCount (p5.4xlarge = 1 as SkyPilot fixes it, feeds.md section 4).
_ONE_FOUR_EIGHT = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                   "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
AWS_GPU_FAMILIES: dict[str, tuple[str, dict[str, int]]] = {
    "g4dn": ("T4", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                    "12xlarge": 4, "metal": 8}),
    "g5": ("A10G", dict(_ONE_FOUR_EIGHT)),
    "g6": ("L4", dict(_ONE_FOUR_EIGHT)),
    "g6e": ("L40S", dict(_ONE_FOUR_EIGHT)),
    "p3": ("V100", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    "p3dn": ("V100-32GB", {"24xlarge": 8}),
    "p4d": ("A100", {"24xlarge": 8}),
    "p4de": ("A100-80GB", {"24xlarge": 8}),
    "p5": ("H100", {"4xlarge": 1, "48xlarge": 8}),
    "p5e": ("H200", {"48xlarge": 8}),
    "p5en": ("H200", {"48xlarge": 8}),
    "p6-b200": ("B200", {"48xlarge": 8}),
}

#: Quota family of each AWS GPU family (Service Quotas counts vCPUs per family; feeds.md 1d).
AWS_QUOTA_CODES = {
    "G": {"on-demand": "L-DB2E81BA", "spot": "L-3819A6DF"},
    "P": {"on-demand": "L-417A185B", "spot": "L-7212CCBC"},
}


def aws_family(instance_type: str) -> tuple[str, str] | None:
    family, dot, size = instance_type.partition(".")
    return (family, size) if dot else None


def aws_gpu(instance_type: str) -> tuple[str, int | None] | None:
    """(GPU, count) for an AWS GPU instance type; count None for a size the table lacks."""
    fs = aws_family(instance_type)
    if fs is None or fs[0] not in AWS_GPU_FAMILIES:
        return None
    gpu, sizes = AWS_GPU_FAMILIES[fs[0]]
    return gpu, sizes.get(fs[1])


def aws_quota_family(instance_type: str) -> str | None:
    fs = aws_family(instance_type)
    if fs is None or fs[0] not in AWS_GPU_FAMILIES:
        return None
    return "P" if fs[0].startswith("p") else "G"


#: Regex matching a quoted AWS GPU instance type anywhere in a raw CSV line (cheap pre-filter).
AWS_GPU_LINE_RE = re.compile(
    r'"(?:' + "|".join(re.escape(f) for f in sorted(AWS_GPU_FAMILIES, key=len, reverse=True)) + r')\.[a-z0-9]+"')


# --- Azure ----------------------------------------------------------------------------------
# armSkuName -> (GPU, count, vCPUs, memory GiB); whole-GPU sizes only (fractional NV A10 v5 and
# NC A10 v4 are left out). From the catalog extract's azure/vms.csv, ND96isr_H100_v5 fixed to 8
# (feeds.md section 5); ND96isr_H200_v5 from Azure's ND H200 v5 size table.
AZURE_GPU_SKUS: dict[str, tuple[str, int, float, float]] = {
    "Standard_NC4as_T4_v3": ("T4", 1, 4, 28),
    "Standard_NC8as_T4_v3": ("T4", 1, 8, 56),
    "Standard_NC16as_T4_v3": ("T4", 1, 16, 110),
    "Standard_NC64as_T4_v3": ("T4", 4, 64, 440),
    "Standard_NC6s_v3": ("V100", 1, 6, 112),
    "Standard_NC12s_v3": ("V100", 2, 12, 224),
    "Standard_NC24s_v3": ("V100", 4, 24, 448),
    "Standard_NC24rs_v3": ("V100", 4, 24, 448),
    "Standard_ND40rs_v2": ("V100-32GB", 8, 40, 672),
    "Standard_NV36ads_A10_v5": ("A10", 1, 36, 440),
    "Standard_NV36adms_A10_v5": ("A10", 1, 36, 880),
    "Standard_NV72ads_A10_v5": ("A10", 2, 72, 880),
    "Standard_NC24ads_A100_v4": ("A100-80GB", 1, 24, 220),
    "Standard_NC48ads_A100_v4": ("A100-80GB", 2, 48, 440),
    "Standard_NC96ads_A100_v4": ("A100-80GB", 4, 96, 880),
    "Standard_ND96asr_v4": ("A100", 8, 96, 900),
    "Standard_ND96amsr_A100_v4": ("A100-80GB", 8, 96, 1800),
    "Standard_NC40ads_H100_v5": ("H100", 1, 40, 320),
    "Standard_NC80adis_H100_v5": ("H100", 2, 80, 640),
    "Standard_ND96isr_H100_v5": ("H100", 8, 96, 1900),
    "Standard_ND96isr_H200_v5": ("H200", 8, 96, 1850),
}

#: The SkyPilot catalog has AcceleratorCount 12 for ND96isr_H100_v5: a bug (feeds.md section 5).
AZURE_COUNT_FIX = {"Standard_ND96isr_H100_v5": 8}


# --- GCP ------------------------------------------------------------------------------------
# Accelerator-optimized machine types carry a fixed GPU (SkyPilot _ACC_INSTANCE_TYPE_DICTS,
# feeds.md section 4). g2 L4 counts follow Google's machine-type table.
G2_L4_COUNT = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}
GCP_HOST_PATTERNS = [
    (re.compile(r"^a2-highgpu-([0-9]+)g$"), "A100"),
    (re.compile(r"^a2-megagpu-([0-9]+)g$"), "A100"),
    (re.compile(r"^a2-ultragpu-([0-9]+)g$"), "A100-80GB"),
    (re.compile(r"^a3-highgpu-([0-9]+)g$"), "H100"),
    (re.compile(r"^a3-megagpu-([0-9]+)g$"), "H100-MEGA"),
    (re.compile(r"^a3-ultragpu-([0-9]+)g$"), "H200"),
    (re.compile(r"^a4-highgpu-([0-9]+)g$"), "B200"),
]


def gcp_host_gpu(instance_type: str) -> tuple[str, int] | None:
    """(GPU, count) attached to a GCP accelerator-optimized machine type, else None."""
    m = re.match(r"^g2-standard-([0-9]+)$", instance_type)
    if m:
        n = int(m.group(1))
        return ("L4", G2_L4_COUNT[n]) if n in G2_L4_COUNT else None
    for pattern, gpu in GCP_HOST_PATTERNS:
        m = pattern.match(instance_type)
        if m:
            return gpu, int(m.group(1))
    return None


# machine type -> (billing series token, vCPUs, memory GiB). The token is the first word of the
# "<token> Instance Core/Ram running in <geo>" SKUs (gpuhunt's parser; "A3Plus" = a3-megagpu).
# vCPU/memory from the catalog extract's gcp/vms.csv; g2-standard-96 from Google's g2 table.
# The A3Ultra/A4 tokens are unverified: if the catalog names them otherwise, those machine types
# simply get no offer (never a wrong price).
GCP_MACHINE_TYPES: dict[str, tuple[str, float, float]] = {
    **{f"g2-standard-{n}": ("G2", n, 4 * n) for n in (4, 8, 12, 16, 24, 32, 48, 96)},
    **{f"a2-highgpu-{n}g": ("A2", 12 * n, 85 * n) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("A2", 96, 1360),
    **{f"a2-ultragpu-{n}g": ("A2", 12 * n, 170 * n) for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": ("A3", 26 * n, 234 * n) for n in (1, 2, 4, 8)},
    "a3-megagpu-8g": ("A3Plus", 208, 1872),
    "a3-ultragpu-8g": ("A3Ultra", 224, 2952),
    "a4-highgpu-8g": ("A4", 224, 3968),
}

#: GPU SKU name (description up to " GPU", without a "Spot Preemptible " prefix) -> GPU.
GCP_GPU_SKU_NAMES: dict[str, str] = {
    "Nvidia L4": "L4",
    "Nvidia Tesla T4": "T4",
    "Nvidia Tesla V100": "V100",
    "Nvidia Tesla A100": "A100",
    "Nvidia Tesla A100 80GB": "A100-80GB",
    "Nvidia A100 80GB": "A100-80GB",
    "Nvidia H100 80GB": "H100",
    "Nvidia H100 80GB Plus": "H100-MEGA",
    "Nvidia H100 80GB Mega": "H100-MEGA",
    "Nvidia H200 141GB": "H200",
    "H200 141GB": "H200",
    "A4 Nvidia B200 (1 gpu slice)": "B200",
    "Nvidia B200 (1 gpu slice)": "B200",
}


def expected_gpu(cloud: str, instance_type: str) -> tuple[str, int] | None:
    """What the family tables say an instance type carries, or None when they do not know it."""
    if cloud == "aws":
        got = aws_gpu(instance_type)
        return (got[0], got[1]) if got and got[1] is not None else None
    if cloud == "azure":
        sku = AZURE_GPU_SKUS.get(instance_type)
        return (sku[0], sku[1]) if sku else None
    if cloud == "gcp":
        return gcp_host_gpu(instance_type)
    return None
