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

__all__ = ["DEFAULT_BANDWIDTH_GBPS", "DEFAULT_BF16_TFLOPS", "check_custom_gpus", "UNKNOWN_GPU_HINT", "gpu_facts", "plan_gpu_problem",
           "unknown_gpu_problem"]

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


def unknown_gpu_problem(gpu: str, custom: bool = False) -> str | None:
    """Why a plan may not name ``gpu`` (None: it may). :func:`gpu_facts` reads a GPU outside the catalog
    as a custom one, so a plan must say which GPUs are custom (``allocations[].custom_gpu``, which the
    planner writes for a GPU of an offers CSV); an unmarked one is a misspelt or retired catalog GPU,
    which would otherwise run on a custom GPU's default facts without a word."""
    if custom or get_gpu(gpu) is not None:
        return None
    return f"{gpu!r} is not in hetinfra's GPU catalog, and the plan does not mark it custom_gpu"


#: how to mend what :func:`unknown_gpu_problem` finds
UNKNOWN_GPU_HINT = ("name a catalog GPU (`hetinfra prices` lists them), or re-plan: `hetinfra plan` marks a GPU of an "
                    "offers CSV custom_gpu")


def plan_gpu_problem(alloc) -> str | None:
    """Why the simulator may not run plan.json allocation ``alloc`` (``gpu``, ``custom_gpu``,
    ``stages``, ``disaggregation``; None: it may), as ``<field> <why>``: its GPU outside the catalog
    and not marked custom, or a mixed pipeline's stage GPU or a bundle role's GPU outside it (those
    are catalog GPUs only; a mixed pipeline's ``gpu`` joins its stages', ``H100+L4``)."""
    named = [(f"stages[{k}].gpu", s.gpu, False) for k, s in enumerate(alloc.stages or ())] or [
        ("gpu", alloc.gpu, bool(alloc.custom_gpu))]
    roles = alloc.disaggregation.roles if alloc.disaggregation is not None else ()
    named += [(f"disaggregation.roles[{j}].gpu", r.gpu, False) for j, r in enumerate(roles) if r.gpu is not None]
    return next((f"{field} {why}" for field, gpu, custom in named if (why := unknown_gpu_problem(gpu, custom))), None)


def check_custom_gpus(spec, offers, locate=None) -> None:
    """Each ``infrastructure.custom_gpus`` entry (issue 36), else an InvalidInputError at its line:

    - is named differently from every catalog GPU, in any case: :func:`gpu_facts` takes the
      catalog's facts first, so an entry named ``H100`` or ``l4`` would never be read;
    - names a GPU some offer has: an entry nothing offers would be silently unused."""
    from hetinfra.errors import InvalidInputError, did_you_mean

    offered = sorted({o.gpu for o in offers})
    for i, entry in enumerate(spec.infrastructure.custom_gpus):
        where = (locate("infrastructure", "custom_gpus", i) if locate else "spec") + f": infrastructure.custom_gpus[{i}]"
        known = get_gpu(entry.name)
        if known is not None:
            raise InvalidInputError(f"{where}: custom GPU {entry.name!r} is the catalog's GPU {known.name!r}, whose facts "
                                    "would be used", hint="name a custom GPU as its offers CSV does, differently from "
                                                          "every catalog GPU (hetinfra prices lists them)")
        if entry.name not in offered:
            custom = [g for g in offered if get_gpu(g) is None]
            raise InvalidInputError(f"{where}: no offer has the GPU '{entry.name}'"
                                    + (f"; {did_you_mean(entry.name, custom)}" if custom else ""),
                                    hint="list the offers CSV that offers it under `offers:`, or remove the entry")
