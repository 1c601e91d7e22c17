"""Plausibility bounds: numbers that pass every type and range check yet cannot be true, said as
warnings (plan.json ``warnings`` and stderr), each a standalone function of the planning inputs or
the solved plan, all called at one point (:func:`plausibility_warnings`, from the planner).

- A measured profile rate beyond what the GPU's memory bandwidth allows: every decode step reads
  the engine's weights once, so one GPU's step takes at least weights-per-GPU / bandwidth, and at
  most MAX_SEQS sequences share a step. A row claiming more requests per second than
  MAX_SEQS / (step x output_tokens) is a typo or a broken benchmark (1e12 req/s would otherwise
  plan 0 GPUs); it is planned at that bound (hetinfra.perf.model), so the ILP never reads a rate past it.
- A plan that serves nothing: no GPU for a positive demand (the load rounds to 0 instances).
- A profile row nothing in the spec can use: its model is none of the spec's, no allowed offer has
  its GPU, or its tp x pp is no layout the planner tries there. Such a row is never read; said, not
  silent (a typo in a model name otherwise falls back to the estimator unnoticed).
"""

from __future__ import annotations

from hetinfra.perf.roofline import MAX_SEQS, profile_bound


def implausible_profile_rows(inputs) -> list[str]:
    """Profile rows whose max_rps exceeds :func:`bandwidth_bound_rps` for a model the plan serves."""
    from hetinfra.catalog.gpus import get_gpu

    out = []
    for row in inputs.profiles.rows:
        gpu = get_gpu(row.gpu)
        model = next((m for m in inputs.models if m.arch is not None
                      and row.model in {n.lower() for n in m.ctx.names}), None)
        if gpu is None or model is None:
            continue
        bound, weights = profile_bound(model.arch, gpu, row.tp, row.pp, model.ctx.precision, row.output_tokens)
        if row.max_rps > bound:
            out.append(f"{row.origin}: max_rps {row.max_rps:g} is beyond what {row.gpu} can serve ({bound:.3g} req/s "
                       f"at most: {weights:.1f} GB of weights per GPU read at {gpu.bandwidth_gbps:g} GB/s per step, "
                       f"{MAX_SEQS} sequences, {row.output_tokens} output tokens), so each class it serves is planned "
                       "at that class's bound; check the profile")
    return out


#: the most unmatched profile rows named one by one; the rest are counted in one more warning
SHOWN_UNMATCHED = 5


def unmatched_profile_rows(inputs) -> list[str]:
    """Profile rows that match no model, allowed GPU or planned layout of the spec, by ``file:line``."""
    served = [m for pm in inputs.models for m in (pm, *(v.model for v in pm.variants))]
    counts: dict[str, set[int]] = {}  # GPU (lower case) -> GPUs per instance of its allowed offers
    for o in inputs.offers:
        counts.setdefault(o.gpu.lower(), set()).add(o.gpu_count)
    out = []
    for row in inputs.profiles.rows:
        why = _unmatched(row, served, counts, inputs.spec.planning)
        if why:
            out.append(f"{row.origin}: profile row matches nothing this spec plans, ignored: {why}")
    if len(out) > SHOWN_UNMATCHED:
        out[SHOWN_UNMATCHED:] = [f"{len(out) - SHOWN_UNMATCHED} more profile row(s) match nothing this spec plans"]
    return out


def _unmatched(row, served, counts: dict[str, set[int]], settings) -> str | None:
    """Why ``row`` can serve none of ``served`` (the spec's models and variants), or None."""
    from hetinfra.plan.templates import possible_layouts

    models = [m for m in served if row.model in m.ctx.names]
    if not models:
        names = ", ".join(sorted({m.spec.name for m in served}))
        return f"model '{row.model}' is none of the spec's models ({names}; a row names one by its name, model or source)"
    sizes = counts.get(row.gpu.lower())
    if not sizes:
        return f"no offer the spec allows has GPU '{row.gpu}'"
    if settings.allow_mixed_pipelines or any((row.tp, row.pp) in possible_layouts(m, settings, n)
                                             for m in models for n in sorted(sizes)):
        return None
    return (f"tp {row.tp} x pp {row.pp} is no layout planned on {row.gpu} (instances of {', '.join(map(str, sorted(sizes)))} "
            "GPUs: tp a power of two dividing them and the attention heads, pp up to the layers)")


def serves_nothing(inputs, gpus: int, leaves_unmet: bool = False) -> list[str]:
    """A warning when the plan has no GPU although the spec declares demand, unless the plan left that
    demand unserved on purpose (``leaves_unmet``, SolveResult.leaves_unmet under planning.allow_unmet: its
    own warning, hetinfra.plan.plan_warnings.unmet_warnings, names the cause; this one blamed a rounded rate)."""
    demand = sum(c.rate_rps for m in inputs.models for c in m.classes)
    if gpus > 0 or demand <= 0 or leaves_unmet:
        return []
    return [f"this plan serves nothing: 0 GPUs for {demand:.3g} req/s of declared demand; check rate_rps and the "
            "profile rates (a rate the solver rounds to no capacity)"]


def plausibility_warnings(inputs, gpus: int, leaves_unmet: bool = False) -> list[str]:
    """Every plausibility warning of a solved plan (the one call point); ``leaves_unmet``: whether it leaves
    demand unserved (planning.allow_unmet)."""
    return (unmatched_profile_rows(inputs) + implausible_profile_rows(inputs)
            + serves_nothing(inputs, gpus, leaves_unmet))
