"""Facts of a GPU for the step model: the catalog's entry, else a GPU outside the catalog (a custom
cloud's or neocloud's, declared in an offers CSV and rated by a measured profile).

A custom GPU's memory is the offer's (GPU memory per GPU); its bandwidth and FLOP/s come from the
spec's ``infrastructure.custom_gpus`` entry, else the conservative defaults below. The simulator
rescales the step model of a unit rated by a profile to that profile's rate
(``hetinfra.sim.engines``), so the defaults set the shape of its step times (how they grow with
batch and context), not their level.
"""

from __future__ import annotations

from hetinfra.catalog.gpus import GpuSpec, get_gpu

__all__ = ["DEFAULT_BANDWIDTH_GBPS", "DEFAULT_BF16_TFLOPS", "gpu_facts"]

#: an L4-class card: low enough not to flatter an unknown GPU's step model before rescaling
DEFAULT_BANDWIDTH_GBPS = 300.0
DEFAULT_BF16_TFLOPS = 120.0


def gpu_facts(name: str, spec=None, memory_gb: float | None = None) -> GpuSpec | None:
    """The catalog's ``name``, else a custom GPU with the offer's ``memory_gb`` and the facts of
    ``spec.infrastructure.custom_gpus`` (None: not in the catalog and no memory known)."""
    known = get_gpu(name)
    if known is not None:
        return known
    if not memory_gb or memory_gb <= 0:
        return None
    entries = getattr(getattr(spec, "infrastructure", None), "custom_gpus", None) or []
    entry = next((e for e in entries if e.name == name), None)
    if entry is None:
        return GpuSpec(name, float(memory_gb), DEFAULT_BANDWIDTH_GBPS, DEFAULT_BF16_TFLOPS, None, None, False, 32.0)
    return GpuSpec(name, float(memory_gb), entry.bandwidth_gbps, entry.bf16_tflops, entry.fp8_tflops, None,
                   entry.nvlink, entry.intra_node_gbps)
