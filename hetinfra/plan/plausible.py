"""Plausibility bounds: numbers that pass every type and range check yet cannot be true, said as
warnings (plan.json ``warnings`` and stderr), each a standalone function of the planning inputs or
the solved plan, all called at one point (:func:`plausibility_warnings`, from the planner).

- A measured profile rate beyond what the GPU's memory bandwidth allows: every decode step reads
  the engine's weights once, so one GPU's step takes at least weights-per-GPU / bandwidth, and at
  most MAX_SEQS sequences share a step. A row claiming more requests per second than
  MAX_SEQS / (step x output_tokens) is a typo or a broken benchmark (1e12 req/s would otherwise
  plan 0 GPUs).
- A plan that serves nothing: no GPU for a positive demand (the load rounds to 0 instances).
"""

from __future__ import annotations

#: most sequences one decode step may carry (vLLM's max_num_seqs is 256 by default; 16x margin)
MAX_SEQS = 4096


def bandwidth_bound_rps(weights_gb_per_gpu: float, bandwidth_gbps: float, output_tokens: int) -> float:
    """The most requests/s one engine can finish if each step reads its GPU's weights once."""
    step_s = max(weights_gb_per_gpu, 1e-9) / bandwidth_gbps
    return MAX_SEQS / (step_s * max(1, output_tokens))


def implausible_profile_rows(inputs) -> list[str]:
    """Profile rows whose max_rps exceeds :func:`bandwidth_bound_rps` for a model the plan serves."""
    from hetinfra.catalog.gpus import get_gpu
    from hetinfra.perf.estimator import weights_gb_per_gpu

    out = []
    for row in inputs.profiles.rows:
        gpu = get_gpu(row.gpu)
        model = next((m for m in inputs.models if m.arch is not None
                      and row.model in {n.lower() for n in m.ctx.names}), None)
        if gpu is None or model is None:
            continue
        weights = weights_gb_per_gpu(model.arch, row.tp, row.pp, model.ctx.precision)
        bound = bandwidth_bound_rps(weights, gpu.bandwidth_gbps, row.output_tokens)
        if row.max_rps > bound:
            out.append(f"{row.origin}: max_rps {row.max_rps:g} is beyond what {row.gpu} can serve ({bound:.3g} req/s "
                       f"at most: {weights:.1f} GB of weights per GPU read at {gpu.bandwidth_gbps:g} GB/s per step, "
                       f"{MAX_SEQS} sequences, {row.output_tokens} output tokens); check the profile")
    return out


def serves_nothing(inputs, gpus: int) -> list[str]:
    """A warning when the plan has no GPU although the spec declares demand."""
    demand = sum(c.rate_rps for m in inputs.models for c in m.classes)
    if gpus > 0 or demand <= 0:
        return []
    return [f"this plan serves nothing: 0 GPUs for {demand:.3g} req/s of declared demand; check rate_rps and the "
            "profile rates (a rate the solver rounds to no capacity)"]


def plausibility_warnings(inputs, gpus: int) -> list[str]:
    """Every plausibility warning of a solved plan (the one call point)."""
    return implausible_profile_rows(inputs) + serves_nothing(inputs, gpus)
