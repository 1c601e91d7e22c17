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

__all__ = ["DEFAULT_BANDWIDTH_GBPS", "DEFAULT_BF16_TFLOPS", "check_offered", "gpu_facts", "not_in_catalog"]

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


def not_in_catalog(name: str) -> str:
    """``name`` of a custom GPU, or a ValueError when the catalog has that GPU (in any case): its entry
    would never be read, since :func:`gpu_facts` takes the catalog's facts first (issue 36)."""
    known = get_gpu(name)
    if known is not None:
        raise ValueError(f"custom GPU {name!r} is the catalog's GPU {known.name!r}, whose facts would be used; "
                         "name a custom GPU as its offers CSV does, differently from every catalog GPU")
    if not name.strip() or not name.isprintable():
        raise ValueError(f"custom GPU name {name!r} must be printable and not empty")
    return name


def check_offered(spec, offers, locate=None) -> None:
    """Every ``infrastructure.custom_gpus`` entry names a GPU some offer has, else an InvalidInputError
    at the entry's line: an entry nothing offers would be silently unused."""
    from hetinfra.errors import InvalidInputError, did_you_mean

    offered = sorted({o.gpu for o in offers})
    for i, entry in enumerate(spec.infrastructure.custom_gpus):
        if entry.name not in offered:
            where = locate("infrastructure", "custom_gpus", i) if locate else "spec"
            custom = [g for g in offered if get_gpu(g) is None]
            raise InvalidInputError(f"{where}: infrastructure.custom_gpus[{i}]: no offer has the GPU '{entry.name}'"
                                    + (f"; {did_you_mean(entry.name, custom)}" if custom else ""),
                                    hint="list the offers CSV that offers it under `offers:`, or remove the entry")
