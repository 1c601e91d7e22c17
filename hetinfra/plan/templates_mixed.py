"""Mixed-GPU pipeline templates (EXPERIMENTAL): Coral's heterogeneous serving templates.

For each cloud, every node combination of 2..max_nodes instances of that cloud's GPU
configurations (GPU type x GPUs per instance; one instance type stands for each) that

* mixes at least two GPU types (one type alone is a homogeneous pipeline, built elsewhere),
* has the same GPUs per node in every stage (vLLM runs one TP degree in all stages), and
* holds the weights with total GPU memory at most ``memory_ratio`` x the weights (Coral's beta:
  bigger combinations are dominated by splitting their GPUs into smaller replicas),

gets its throughput-optimal placement per request class (``hetinfra.plan.placement``): stage order,
uneven layer split. Each distinct placement is evaluated on every class with the pipeline
estimator (``hetinfra.perf.pipeline``); one that another placement of the same nodes matches on
every class is dropped with the other dominated units (``prune.prune_dominated``: same nodes,
same price). Rates come from the analytical estimator only: measured profiles cover homogeneous
layouts.

Why experimental (../shared/notes/vllm.md s1.4): vLLM runs mixed pipelines with
``VLLM_PP_LAYER_PARTITION``, but sizes every stage's KV cache to the smallest one (modelled
here), takes engine defaults from the head node (hetinfra passes them explicitly) and has no data
parallelism inside a stage (so one node per stage); the estimator is not calibrated on mixed
pipelines. Clouds deployed with SkyPilot (``deploy.skypilot_clouds``) get none: a SkyPilot task
has one accelerator type for all its nodes.
"""

from __future__ import annotations

from itertools import combinations_with_replacement

from hetinfra.catalog.gpus import GPUS
from hetinfra.plan.inputs import PlannedModel
from hetinfra.perf.calibration import calibration_for
from hetinfra.perf.confidence import Confidence, rate_interval
from hetinfra.perf.estimator import weights_gb_per_gpu
from hetinfra.perf.model import ESTIMATOR_VERSION
from hetinfra.perf.pipeline import MAX_NUM_SEQS, estimate_pipeline, pipeline_batched_tokens, stage_batch_limit
from hetinfra.plan.placement import best_placement
from hetinfra.plan.library import Template


def gpu_configs(offers, cloud: str) -> dict[tuple[str, int], str]:
    """(gpu, GPUs per instance) -> the instance type standing for it on ``cloud``: the one with the
    lowest on-demand price per hour in any region (ties by name)."""
    best: dict[tuple[str, int], tuple[float, str]] = {}
    for o in offers:
        if o.cloud != cloud or o.gpu not in GPUS:
            continue
        key = (o.gpu, o.gpu_count)
        cand = (o.price_per_hour, o.instance_type)
        if key not in best or cand < best[key]:
            best[key] = cand
    return {k: v[1] for k, v in sorted(best.items())}


def mixed_templates(pm: PlannedModel, offers, *, max_nodes: int, memory_ratio: float,
                    skip_clouds: set[str] = frozenset()) -> list[Template]:
    arch, ctx = pm.arch, pm.ctx
    weights = weights_gb_per_gpu(arch, 1, 1, ctx.precision)
    limits: dict[tuple, float] = {}
    out: list[Template] = []
    for cloud in sorted({o.cloud for o in offers if not o.custom_cloud} - set(skip_clouds)):
        configs = gpu_configs(offers, cloud)
        for count in sorted({n for _, n in configs}):
            if arch.heads % count:
                continue
            gpus_here = sorted(g for g, n in configs if n == count)
            for size in range(2, min(max_nodes, arch.layers) + 1):
                for combo in combinations_with_replacement(gpus_here, size):
                    memory = sum(GPUS[g].memory_gb for g in combo) * count
                    if len(set(combo)) < 2 or not weights <= memory <= memory_ratio * weights:
                        continue
                    types = {g: configs[(g, count)] for g in combo}
                    out.extend(_combo_templates(pm, cloud, list(combo), count, types, limits))
    return out


def _combo_templates(pm: PlannedModel, cloud: str, combo: list[str], tp: int, types: dict[str, str],
                     limits: dict) -> list[Template]:
    arch, ctx = pm.arch, pm.ctx
    mbt = pipeline_batched_tokens([GPUS[g] for g in combo])
    k = len(combo)
    placements = {}
    for c in pm.classes:
        def limit(gpu, stages, first, last, layers, c=c):
            key = (gpu, tp, stages, first, last, layers, mbt, c.input_tokens, c.output_tokens)
            if key not in limits:
                limits[key] = stage_batch_limit(
                    arch, GPUS[gpu], tp=tp, stages=stages, first=first, last=last, layers=layers,
                    input_tokens=c.input_tokens, output_tokens=c.output_tokens, tpot_ms=ctx.tpot_ms,
                    precision=ctx.precision, max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=mbt,
                    calib=calibration_for(ctx.vllm_version))
            return limits[key]

        p = best_placement(combo, arch.layers, limit)
        if p is not None:
            placements.setdefault((p.nodes, p.layers), p)
    found: list[Template] = []
    for nodes, layers in sorted(placements):
        rates, sources = {}, {}
        for c in pm.classes:
            est = estimate_pipeline(arch, [GPUS[g] for g in nodes], list(layers), tp=tp, input_tokens=c.input_tokens,
                                    output_tokens=c.output_tokens, ttft_ms=ctx.ttft_ms, tpot_ms=ctx.tpot_ms,
                                    precision=ctx.precision, max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=mbt,
                                    calib=calibration_for(ctx.vllm_version))
            if est.feasible and est.max_rps > 0:
                rates[c.name], sources[c.name] = est.max_rps, ESTIMATOR_VERSION
        if not rates:
            continue
        stage_types = tuple(types[g] for g in nodes)
        tid = (f"{pm.spec.name}|{cloud}|{'+'.join(stage_types)}|tp{tp}x1|pp{k}|"
               + "-".join(str(n) for n in layers))
        trust = Confidence("extrapolated", "mixed-GPU pipeline: no calibration data measures one")
        ri = rate_interval(trust)
        found.append(Template(tid, pm.spec.name, cloud, "+".join(stage_types), "+".join(nodes), tp, tp, k, 1, rates,
                              sources, tuple(layers), tuple(zip(stage_types, nodes)), (trust.level, trust.reason),
                              interval=(ri.low, ri.middle, ri.high), interval_basis=ri.basis))
    return found  # a placement slower on every class than another of the same nodes goes in prune_dominated
