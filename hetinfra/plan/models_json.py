"""plan.json ``models`` and ``templates``, built as their models (hetinfra.document.sections): each
model's objectives, peak demand, classes, cost and variants, and the serving templates the
allocations use. Constructed without validation (the values are the planner's); the finished
document is checked once (hetinfra.plan.plan_json.build_plan_json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra.document.allocation import Allocation
from hetinfra.document.sections import (Accuracy, Confidence, DemandProfile, ModelEntry, Placement, RequestClass, Slo,
                                        SplitDecision, StageNode, Template, Variant, VariantRate)
from hetinfra.plan.allocations_json import rounded

if TYPE_CHECKING:
    from hetinfra.plan.planner import PlanResult


def models(pr: "PlanResult", slugs: dict[str, str], allocations: list[Allocation]) -> list[ModelEntry]:
    """plan.json ``models``: each model's objectives, peak demand, classes, cost and variants."""
    return [_model(pr, pm, slugs[pm.spec.name], allocations) for pm in pr.inputs.models]


def _model(pr: "PlanResult", pm, slug: str, allocations: list[Allocation]) -> ModelEntry:
    spec = pm.spec
    peak = spec.demand.peak
    fields = {
        "name": spec.name, "slug": slug, "model": spec.model, "source": spec.source, "precision": spec.precision,
        "params": pm.arch.params if pm.arch else None,  # parameter count: apply sizes disks for the weights
        "slo": Slo.model_construct(ttft_ms=spec.slo.ttft_ms, tpot_ms=spec.slo.tpot_ms, percentile=spec.slo.percentile,
                                   attainment=spec.slo.attainment),
        # with a demand profile: the peak period's rate, which the fleet, routing and simulation are for
        "rate_rps": spec.demand.rate_rps * peak, "max_model_len": pm.max_model_len,
        "max_model_len_basis": pm.max_model_len_basis,
        "classes": [RequestClass.model_construct(name=c.name, input_tokens=c.input_tokens, output_tokens=c.output_tokens,
                                                 share=rounded(c.share, 6), rate_rps=rounded(c.rate_rps * peak, 6))
                    for c in pm.classes],
        "cost_usd_per_hour": rounded(sum(a.cost_usd_per_hour for a in allocations if a.model == spec.name)),
        "variants": _variants(pm), "accuracy": _accuracy(pm, pr.result.flow, pr.units),
    }
    if spec.demand.profile is not None:
        fields["demand_profile"] = DemandProfile.model_construct(
            rate_rps=spec.demand.rate_rps, multipliers=list(spec.demand.profile),
            peak_period=spec.demand.profile.index(peak))
    if pr.inputs.spec.planning.disaggregation == "auto":
        fields["disaggregation"] = SplitDecision.model_validate(split_decision(pr, pm))
    return ModelEntry.model_construct(**fields)


def _variants(pm) -> list[Variant] | None:
    """plan.json ``models[].variants``: what each variant loads and its accuracy score."""
    if not pm.variants:
        return None
    return [Variant.model_construct(name=v.name, model=v.model.spec.model, source=v.model.spec.source,
                                    precision=v.model.spec.precision,
                                    params=v.model.arch.params if v.model.arch else None, accuracy=v.accuracy,
                                    accuracy_from=v.accuracy_from, meets_floor=v.eligible)
            for v in pm.variants]


def _accuracy(pm, flows: dict, units: dict) -> Accuracy | None:
    """plan.json ``models[].accuracy``: the accuracy served (the mean of the variants' scores over
    the routed req/s), the best variant's, and what the plan gives up for its price."""
    if not pm.variants:
        return None
    score = {v.name: v.accuracy for v in pm.variants}
    rps: dict[str, float] = {}
    for (u, m, _w), r in flows.items():
        if m == pm.spec.name:
            rps[units[u].template.variant] = rps.get(units[u].template.variant, 0.0) + r
    total = sum(rps.values())
    served = sum(score[v] * r for v, r in rps.items()) / total if total else None
    best = max(pm.variants, key=lambda v: (v.accuracy, -pm.variants.index(v)))
    return Accuracy.model_construct(
        min_accuracy=pm.spec.slo.min_accuracy, served=rounded(served, 6), best=best.accuracy, best_variant=best.name,
        given_up=rounded(best.accuracy - served, 6) if served is not None else None,
        by_variant={v: VariantRate.model_construct(rps=rounded(r, 6), share=rounded(r / total, 6))
                    for v, r in sorted(rps.items())})


def split_decision(pr: "PlanResult", pm) -> dict:
    from hetinfra.plan.templates_pd import split_decision as decide  # local: only with disaggregation

    return decide(pm, pr.all_units or list(pr.units.values()), [pr.units[u] for u in pr.result.n], pr.derate,
                  pr.inputs.spec)


def templates(pr: "PlanResult") -> list[Template]:
    """plan.json ``templates``: the templates the allocations use."""
    used = {pr.units[u].template.id: pr.units[u].template for u in pr.result.n}
    return [_template(t, pr.derate.get(t.id, 1.0)) for t in sorted(used.values(), key=lambda t: t.id)]


def _template(t, derate: float) -> Template:
    placement = Placement.model_construct(
        stages=t.pp, nodes_per_stage=1, nodes=t.nodes, stages_per_node=t.stages_per_node,
        layers_per_stage=list(t.layer_partition or ()) or None, tp=t.tp, experimental=t.mixed,
        stage_nodes=[StageNode.model_construct(instance_type=it, gpu=g)
                     for it, g in (t.stages or _bundle_nodes(t) or [(t.instance_type, t.gpu)] * t.pp)])
    return Template.model_construct(
        id=t.id, model=t.model, cloud=t.cloud, instance_type=t.instance_type, gpu=t.gpu,
        gpus_per_instance=t.gpus_per_instance, tp=t.tp, pp=t.pp, engines_per_instance=t.engines, placement=placement,
        capacity_rps={w: rounded(v, 6) for w, v in t.rates.items()}, sources=dict(t.sources),
        # capacity_rps is the estimate (or profile) x derate: < 1 where simulating the plan found the
        # template slower than estimated (see fidelity)
        derate=rounded(derate, 6), confidence=_confidence(t), variant=t.variant)


def _bundle_nodes(t) -> list[tuple[str, str]] | None:
    """A heterogeneous bundle's node types (prefill, then decode: its single stage runs on both)."""
    b = t.bundle
    return [(t.instance_type, t.gpu), (b.decode_instance_type, b.decode_gpu)] if b is not None and b.heterogeneous \
        else None


def _confidence(t) -> Confidence | None:
    """templates[].confidence: the level, why, and the rate interval with its basis (a regime's
    calibration residuals, else the trust level's: hetinfra.perf.confidence.rate_interval)."""
    if not t.confidence:
        return None
    from hetinfra.perf.confidence import interval

    rates = t.interval or interval(t.confidence[0])
    return Confidence.model_construct(level=t.confidence[0], reason=t.confidence[1], interval=list(rates),
                                      interval_basis=t.interval_basis or f"trust level {t.confidence[0]}",
                                      widened_by=t.disagreement[0] if t.disagreement else None,
                                      other_rate_factor=t.disagreement[1] if t.disagreement else None)
