"""plan.json ``allocations`` and ``routing``, built as their models (hetinfra.document.allocation)
from the solution: one :class:`~hetinfra.document.allocation.Allocation` per solver unit with
replicas, named (``deployment_unit``, ``skypilot_task``) and sized (``max_model_len``,
``kv_cache_tokens``) as it is built, so the section is never a dict patched afterwards.

The values are the planner's own, so the models are constructed without validation
(``model_construct``); plan.json's invariants are checked once, over the finished document
(hetinfra.plan.plan_json.build_plan_json)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from hetinfra.catalog.gpus import get_gpu
from hetinfra.document.allocation import Allocation, Disaggregation, RouteShare, Routing, Stage
from hetinfra.plan.naming import unit_name
from hetinfra.plan.purchase import allocation_extras, average_count

if TYPE_CHECKING:
    from hetinfra.plan.planner import PlanResult


def rounded(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def share_of(rps: float, total: float) -> float:
    """``rps`` as a share of ``total`` for plan.json's routing (6 digits; 0 of nothing), never above 1:
    the solver's re-check accepts a class served up to its rate plus a tolerance, which a rounded
    share of a small class could show as 1.00002, and plan.json's shares are bounded by 1."""
    return min(1.0, rounded(rps / total if total else 0.0, 6))


class Load(NamedTuple):
    """Each solver unit's planned load: in replicas, and in requests/s routed to it."""

    replicas: dict[str, float]
    rps: dict[str, float]


def planned_load(pr: "PlanResult") -> Load:
    load: dict[str, float] = {}
    routed: dict[str, float] = {}
    for (u, _m, w), rps in pr.result.flow.items():
        load[u] = load.get(u, 0.0) + rps / pr.units[u].template.rates[w]
        routed[u] = routed.get(u, 0.0) + rps
    return Load(load, routed)


def allocations(pr: "PlanResult", purchases: bool, slugs: dict[str, str]) -> tuple[Load, list[Allocation]]:
    """(the units' planned load, plan.json ``allocations`` without failover alternates), ordered by
    model, cloud, region and solver unit."""
    load = planned_load(pr)
    uids = sorted(pr.result.n, key=lambda u: (pr.units[u].model, pr.units[u].template.cloud, pr.units[u].region, u))
    names = _unit_names(pr, uids, slugs, purchases)
    planned_models = {pm.spec.name: pm for pm in pr.inputs.models}
    return load, [_allocation(pr, uid, load, purchases, names[uid], planned_models) for uid in uids]


def _allocation(pr: "PlanResult", uid: str, load: Load, purchases: bool, name: str, planned_models: dict) -> Allocation:
    u, cnt, headroom = pr.units[uid], pr.result.n[uid], pr.problem.headroom
    t = u.template
    replicas = load.replicas.get(uid, 0.0)
    fields = {
        "unit": uid, "template": t.id, "model": u.model, "cloud": t.cloud, "region": u.region,
        "instance_type": t.instance_type, "gpu": t.gpu, "gpus_per_instance": t.gpus_per_instance,
        "tp": t.tp, "pp": t.pp, "engines_per_instance": t.engines, "nodes_per_replica": t.nodes,
        "layer_partition": list(t.layer_partition) if t.layer_partition else None,
        "count": cnt, "instances": cnt * t.nodes, "spot": u.spot,
        "price_per_instance_usd_per_hour": rounded(u.cost / t.nodes),
        # with a demand profile a top-up's count follows the periods: its horizon-average cost
        "cost_usd_per_hour": rounded(u.cost * (average_count(pr, uid) if purchases else cnt)),
        "utilization": rounded(replicas / cnt, 4), "custom_cloud": u.custom_cloud,
        "routed_rps": rounded(load.rps.get(uid, 0.0), 6),
        # Requests/s one replica sustains at this unit's class mix, less the headroom: the
        # autoscaler's and the router's per-replica target.
        "target_qps_per_replica": rounded(load.rps[uid] / replicas * (1 - headroom), 4) if replicas else None,
        "experimental": t.mixed, "confidence": t.confidence[0] if t.confidence else None,
        "variant": t.variant,
        "deployment_unit": name,
        # no SkyPilot task for custom clouds (no IaC), mixed pipelines or bundles whose roles are on
        # separate nodes (Pulumi or Kubernetes only: hetinfra.plan.templates_pd.across_nodes_gate)
        "skypilot_task": None if u.custom_cloud or t.mixed or (t.bundle is not None and t.bundle.across_nodes)
        else f"skypilot/{name}.yaml",
    }
    if purchases:
        fields.update(allocation_extras(pr, uid))
    if t.bundle is not None:  # issue 37: each engine's role, the ratio and the expected transfer
        from hetinfra.plan.templates_pd import bundle_json

        fields["disaggregation"] = Disaggregation.model_validate(bundle_json(t.bundle, t.gpus_per_instance, u.stage_prices))
    if t.lora is not None:  # issue 38: the adapters it holds, its slots, memory and derate
        from hetinfra.document.adapters import UnitAdapters
        from hetinfra.plan.adapters import unit_adapters_json

        held = unit_adapters_json(pr, uid)
        if held is not None:
            fields["adapters"] = UnitAdapters.model_validate(held)
    if t.mixed:  # price_per_instance above is the mean over the stages' instances (a heterogeneous bundle's too)
        fields["stages"] = [Stage.model_construct(instance_type=it, gpu=g, gpus=t.gpus_per_instance, layers=n,
                                                  price_usd_per_hour=rounded(p))
                            for (it, g), n, p in zip(t.stages, t.layer_partition, u.stage_prices)]
    fields.update(_engine_lengths(pr, uid, planned_models[u.model]))  # issue 21
    if not t.mixed and get_gpu(t.gpu) is None:  # an offers CSV's GPU: the simulator reads it as custom only where marked
        fields["custom_gpu"] = True
    return Allocation.model_construct(**fields)


def _unit_names(pr: "PlanResult", uids: list[str], slugs: dict[str, str], purchases: bool) -> dict[str, str]:
    """Each solver unit's deployment-unit name (after its model's slug, see ``naming.model_slugs``):
    units alike in model, place, instance type, spot, variant and purchase end in their layout."""
    def base(uid: str) -> tuple:
        u = pr.units[uid]
        t = u.template
        return (u.model, t.cloud, u.region, t.instance_type, u.spot, t.variant, u.purchase_option if purchases else None)

    seen: dict[tuple, int] = {}
    for uid in uids:
        seen[base(uid)] = seen.get(base(uid), 0) + 1
    names = {}
    for uid in uids:
        u = pr.units[uid]
        t = u.template
        # a model's variants end their units' names (``chat-8b-aws-us-east-1-g6e-xlarge-fp8``)
        layout = (_bundle_layout(t.bundle) if t.bundle is not None else f"tp{t.tp}" + (f"-pp{t.pp}" if t.pp > 1 else "")
                  + (f"-lora{t.lora.slots}r{t.lora.rank}" if t.lora else "")) if seen[base(uid)] > 1 else None
        suffix = "-".join(x for x in (t.variant, layout) if x) or None
        if purchases and u.purchase_option.startswith("committed"):  # committed_1y -> "c1y": apart from its top-up
            suffix = "-".join(filter(None, ["c" + u.purchase_option.split("_")[1], suffix]))
        names[uid] = unit_name(slugs[u.model], t.cloud, u.region, t.instance_type, spot=u.spot, suffix=suffix)
    return names


def _bundle_layout(b) -> str:
    """A bundle's part of a unit name: its engines and TPs, its nodes, a heterogeneous one's decode type
    (``pd2xtp4-4xtp4-n1-2-p5en-48xlarge``), so bundles of one prefill instance type get distinct names."""
    return (f"pd{b.prefill_engines}xtp{b.prefill_tp}-{b.decode_engines}xtp{b.decode_tp}"
            + (f"-n{b.prefill_nodes}-{b.decode_nodes}" if b.across_nodes else "")
            + (f"-{b.decode_instance_type}" if b.heterogeneous else ""))


# ---- keys added for verified, startable plans (issue 21) ------------------------------------------
#   allocations[].max_model_len: int     the unit's vLLM --max-model-len (hetinfra.perf.kv)
#   allocations[].kv_cache_tokens: int | null   tokens one engine's KV cache holds (null: mixed pipeline)
#   allocations[].gpu_memory_gb: float   memory of one GPU, from the offer (a custom GPU's only source)
def _engine_lengths(pr: "PlanResult", uid: str, pm) -> dict:
    from hetinfra.catalog.custom import gpu_facts
    from hetinfra.catalog.gpus import serving_precision as precision_on
    from hetinfra.perf.kv import kv_cache_tokens, unit_max_model_len

    u = pr.units[uid]
    served = next((v.model for v in pm.variants if v.name == u.template.variant), pm)
    sizes = {c.name: (c.input_tokens, c.output_tokens) for c in pm.classes}
    routed = sorted({sizes[w] for (unit, _m, w), rps in pr.result.flow.items() if unit == uid and rps > 0})
    if pr.result.periods:
        # a demand profile's levels route their own flows (kept only as counts): off-peak, the peak's top-up
        # units are gone and their classes go to the units that stay, so each unit takes every class it
        # can serve. Sized from the peak's routing, services/committed.yaml's committed L4s got
        # --max-model-len 2500 while its 2,000 + 1,000-token class was routed to them once the top-up was down
        routed = sorted({sizes[w] for w, rate in u.template.rates.items() if rate > 0 and w in sizes})
    largest = max(sizes.values(), key=lambda s: (s[0] + s[1], s[0]))
    kv = None
    if not u.template.mixed and served.arch is not None:
        b = u.template.bundle  # a bundle's KV cache: its decode engine's, on the decode role's GPU
        gpu = gpu_facts(b.decode_gpu if b is not None and b.heterogeneous else u.template.gpu, pr.inputs.spec,
                        u.gpu_memory_gb)
        kv = kv_cache_tokens(served.arch, gpu, u.template.tp, u.template.pp,
                             precision_on(served.spec.precision, u.template.gpu),
                             None if u.template.bundle else u.template.node_count or None,  # a bundle: its decode engine
                             pr.inputs.spec.deploy.vllm_version)
    return {"max_model_len": unit_max_model_len(routed, largest, pm.max_model_len, kv), "kv_cache_tokens": kv,
            "gpu_memory_gb": u.gpu_memory_gb}


def routing(pr: "PlanResult", scale: float) -> Routing:
    """plan.json ``routing``: model -> class -> the units serving it, largest rps first."""
    out: Routing = {}
    by_class: dict[tuple[str, str], list] = {}  # in the flows' order, so equal rates keep it (sorted is stable)
    for (u, m, w), rps in pr.result.flow.items():
        by_class.setdefault((m, w), []).append((u, rps))
    for pm in pr.inputs.models:
        per_class = out.setdefault(pm.spec.name, {})
        for c in pm.classes:
            total = c.rate_rps * pm.spec.demand.peak * (scale or 0.0)
            flows = sorted(by_class.get((pm.spec.name, c.name), ()), key=lambda x: -x[1])
            per_class[c.name] = [RouteShare.model_construct(unit=u, share=share_of(rps, total),
                                                            rps=rounded(rps, 6)) for u, rps in flows]
    return out


def precision_warnings(allocations: list[Allocation], inp) -> list[str]:
    """A unit whose GPU has no BF16 serves its model in fp16: one warning per model (variant) and GPU."""
    from hetinfra.catalog.gpus import serving_precision

    precision = {(pm.spec.name, None): pm.spec.precision for pm in inp.models}
    precision.update({(pm.spec.name, v.name): v.model.spec.precision for pm in inp.models for v in pm.variants})
    out = set()
    for a in allocations:
        p = precision[(a.model, a.variant)]
        if serving_precision(p, a.gpu) != p:
            out.add(f"{a.model}{':' + a.variant if a.variant else ''} runs in fp16 on {a.gpu} ({a.gpu} has no BF16)")
    return sorted(out)
