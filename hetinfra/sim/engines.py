"""The step model of each planned deployment unit, built from plan.json with the estimator's code.

Every replica is configured as the planner assumes (``hetinfra.perf.model``): gpu_memory_utilization
0.9, max_num_seqs 256, 16-bit KV cache, vLLM's default --max-num-batched-tokens for the GPU (mixed
pipelines: the pinned ``pipeline_batched_tokens``).

Units whose rates come from a measured profile (``templates[].sources[class]`` = ``profile:...``):
the estimator's step times are multiplied by one factor per unit, estimator max_rps / profile
max_rps (geometric mean over the profiled classes routed to it, weighted by their routed rps), so
that the simulated engine saturates at the profile's rate instead of the estimator's. This keeps the
estimator's shape (how step time grows with batch and context) and only rescales its level; the unit
is flagged ``"step_model": "estimator scaled to profile"`` in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetinfra.catalog.custom import UNKNOWN_GPU_HINT, gpu_facts, unknown_gpu_problem
from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import CALIBRATION, Calibration
from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION, Estimate, build_engine, estimate
from hetinfra.perf.model import step_calibration
from hetinfra.perf.pipeline import MAX_NUM_SEQS, estimate_pipeline, pipeline_engine
from hetinfra.sim.replica import ScaledEngine, StepModel

if TYPE_CHECKING:
    from hetinfra.document.sections import RequestClass, Slo, Template
    from hetinfra.document.simulation import SimUnit

__all__ = ["UnitEngine", "measured_capacity", "measured_rate", "profiled_rate", "unit_engine"]



@dataclass
class UnitEngine:
    engine: StepModel
    step_model: str  # "estimator" or "estimator scaled to profile"
    profile_factor: float | None  # step-time multiplier when scaled
    #: a prefill/decode bundle: its [prefill, decode] pools and the route joining them (hetinfra.sim.split)
    pools: list | None = None
    route: object | None = None


def _gpu(name: str, unit: str, alloc: SimUnit | None = None, spec=None):
    """The GPU's facts: the catalog's, else, where the plan marks it custom (``custom_gpu``), a custom
    GPU's (memory from the plan's offer, the rest from the spec's infrastructure.custom_gpus or
    defaults: hetinfra.catalog.custom)."""
    custom = alloc is not None and alloc.custom_gpu
    g = gpu_facts(name, spec, alloc.gpu_memory_gb) if custom else get_gpu(name)
    if g is None and not custom:
        raise InvalidInputError(f"plan unit {unit}: gpu {unknown_gpu_problem(name)}", hint=UNKNOWN_GPU_HINT)
    if g is None:
        raise InvalidInputError(f"plan unit {unit}: GPU {name!r} is not in the catalog and the plan gives no memory "
                                "for it", hint="re-plan with this hetinfra version (plan.json allocations[].gpu_memory_gb)")
    return g


def _mixed_stages(alloc: SimUnit) -> tuple[list, list[int]]:
    """A mixed pipeline's stage GPUs and layers per stage, from its plan.json allocation."""
    gpus = [_gpu(s.gpu, alloc.unit) for s in alloc.stages]
    return gpus, list(alloc.layer_partition or [s.layers for s in alloc.stages])


def _build(alloc: SimUnit, arch: ModelArch, precision: str, isl: int, osl: int, calib: Calibration,
           spec=None) -> StepModel | Estimate:
    if alloc.stages:
        gpus, layers = _mixed_stages(alloc)
        return pipeline_engine(arch, gpus, layers, tp=alloc.tp, input_tokens=isl, output_tokens=osl,
                               precision=precision, gpu_memory_utilization=GPU_MEMORY_UTILIZATION,
                               max_num_seqs=MAX_NUM_SEQS, calib=calib)
    return build_engine(arch, _gpu(alloc.gpu, alloc.unit, alloc, spec), alloc.tp, alloc.pp, isl, osl, precision,
                        GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, None, None, calib, nodes=_nodes(alloc))


def _nodes(alloc: SimUnit) -> int | None:
    """Nodes the replica's pipeline spans (plan.json nodes_per_replica; older plans: one per stage)."""
    n = alloc.nodes_per_replica
    return n if n and n != alloc.pp else None


def _estimate(alloc: SimUnit, arch: ModelArch, precision: str, isl: int, osl: int, slo: Slo,
              calib: Calibration, spec=None) -> Estimate:
    kw = dict(input_tokens=isl, output_tokens=osl, ttft_ms=float(slo.ttft_ms), tpot_ms=float(slo.tpot_ms),
              precision=precision, calib=calib)
    if alloc.stages:
        gpus, layers = _mixed_stages(alloc)
        return estimate_pipeline(arch, gpus, layers, tp=alloc.tp, **kw)
    return estimate(arch, _gpu(alloc.gpu, alloc.unit, alloc, spec), tp=alloc.tp, pp=alloc.pp, nodes=_nodes(alloc), **kw)


def profiled_rate(alloc: SimUnit, template: Template | None, cls: str) -> float | None:
    """The measured rate per engine that scales ``alloc``'s step model for class ``cls`` (None: the
    class's rate is not from a profile, and the engine does not read it). capacity_rps is per
    instance, and the measured rate x the planner's derate (hetinfra.plan.verify); the simulator's
    memo keys on exactly this value (hetinfra.sim.plan_sim)."""
    if template is None:
        return None
    cap = measured_rate(template.capacity_rps, template.sources, template.derate, cls)
    return None if cap is None else cap / max(alloc.engines_per_instance, 1)


def measured_capacity(capacity_rps: dict, sources: dict, derate) -> dict[str, float]:
    """Per class whose rate is from a profile, its measured rate per instance (:func:`measured_rate`).
    The only rates a simulation reads (:func:`profiled_rate`; hetinfra.plan.replicated keys judgements
    on them)."""
    rates = {w: measured_rate(capacity_rps, sources, derate, w) for w in sorted(capacity_rps or {})}
    return {w: rate for w, rate in rates.items() if rate is not None}


def measured_rate(capacity_rps: dict, sources: dict, derate, cls: str) -> float | None:
    """Class ``cls``'s measured rate per instance, where its rate is from a profile (else None):
    plan.json's ``capacity_rps`` (the measured rate x the planner's derate) over the derate. One class
    at a time, so that a unit's classes cost one look each (a fleet's templates carry dozens)."""
    cap = (capacity_rps or {}).get(cls)
    if not cap or not str((sources or {}).get(cls, "")).startswith("profile:"):
        return None
    return cap / float(derate or 1.0)


def unit_engine(alloc: SimUnit, arch: ModelArch, precision: str, classes: list[RequestClass], routed: dict[str, float],
                template: Template | None, slo: Slo, calib: Calibration = CALIBRATION, spec=None) -> UnitEngine:
    """The step model of one replica of ``alloc`` (a plan's allocation). ``classes``: the model's
    plan classes; ``routed``: class name -> rps routed to this unit (to weight profile factors)."""
    mine = [c for c in classes if routed.get(c.name, 0.0) > 0] or classes
    if template is not None and not alloc.stages:  # the step times the planner's rates came from
        calib = step_calibration([template.sources.get(c.name, "") for c in mine], arch.name, alloc.gpu, alloc.tp,
                                 alloc.pp, precision, calib)
    big = max(mine, key=lambda c: (c.input_tokens + c.output_tokens, c.input_tokens))
    eng = _build(alloc, arch, precision, big.input_tokens, big.output_tokens, calib, spec)
    if isinstance(eng, Estimate):
        raise InvalidInputError(f"plan unit {alloc.unit} cannot run class {big.name}: {eng.reason}",
                                hint="the plan does not match the catalogs/spec; re-plan")
    logs, weight = 0.0, 0.0
    for c in mine:
        per_engine = profiled_rate(alloc, template, c.name)
        if per_engine is None:
            continue
        est = _estimate(alloc, arch, precision, c.input_tokens, c.output_tokens, slo, calib, spec)
        if not est.feasible or est.max_rps <= 0:
            continue
        w = routed.get(c.name, 0.0) or 1e-9
        logs += w * math.log(est.max_rps / per_engine)
        weight += w
    if weight <= 0:
        return UnitEngine(eng, "estimator", None)
    factor = math.exp(logs / weight)
    return UnitEngine(ScaledEngine(eng, factor), "estimator scaled to profile", factor)
