"""plan.json: the versioned, documented record of a plan (see docs/reference/plan-json.md).

``hetinfra.PLAN_VERSION`` is its version: bumped only for incompatible changes; new keys may be added
within a version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra import PLAN_VERSION, __version__
from hetinfra.catalog.gpus import serving_precision
from hetinfra.perf.model import ESTIMATOR_VERSION
from hetinfra.plan.naming import model_slugs, unit_name
from hetinfra.plan.origins_json import origin_sections
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.purchase import allocation_extras, average_count, peak_multiplier, planned, purchase_section

if TYPE_CHECKING:
    from hetinfra.document import Plan
    from hetinfra.document.sections import Baseline, Breakdown, Churn, Inputs, Solver

#: plan.json keys whose values depend on the run, not the input (dotted paths): two measured times, and
#: where the template libraries came from (a cold cache misses, a warm one hits). Everything else is
#: the same for the same input (spec, offers, profiles, running state, hetinfra version) on any
#: machine, unless ``solver.safety_stop`` says the wall-clock safety stop cut a solve.
RUN_DEPENDENT_KEYS = ("solver.build_s", "solver.solve_s", "inputs.template_cache")
BASELINE_SAFETY_WARNING = ("time limit hit in the single-GPU baselines: they may differ on a faster machine "
                           "(raise planning.time_limit_s)")



def rounded(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _name_units(allocations: list[dict], slugs: dict[str, str]) -> None:
    """Give each allocation its deployment-unit name (after its model's slug, see
    ``naming.model_slugs``) and SkyPilot file (none for custom clouds)."""
    def base(a: dict) -> tuple:
        return (a["model"], a["cloud"], a["region"], a["instance_type"], a["spot"], a.get("variant"), a.get("purchase"))

    seen: dict[tuple, int] = {}
    for a in allocations:
        seen[base(a)] = seen.get(base(a), 0) + 1
    for a in allocations:
        # a model's variants end their units' names (``chat-8b-aws-us-east-1-g6e-xlarge-fp8``)
        layout = (f"tp{a['tp']}" + (f"-pp{a['pp']}" if a["pp"] > 1 else "")
                  + (f"-lora{a['adapters']['max_loras']}r{a['adapters']['max_lora_rank']}" if a.get("adapters") else "")
                  ) if seen[base(a)] > 1 else None
        suffix = "-".join(x for x in (a.get("variant"), layout) if x) or None
        if a.get("purchase", "").startswith("committed"):  # committed_1y -> "c1y": apart from its top-up
            suffix = "-".join(filter(None, ["c" + a["purchase"].split("_")[1], suffix]))
        a["deployment_unit"] = unit_name(slugs[a["model"]], a["cloud"], a["region"], a["instance_type"], spot=a["spot"],
                                         suffix=suffix)
        # no SkyPilot task for custom clouds (no IaC) or mixed pipelines (Pulumi only)
        a["skypilot_task"] = None if a["custom_cloud"] or a.get("stages") else f"skypilot/{a['deployment_unit']}.yaml"


def _precision_warnings(allocations: list[dict], inp) -> list[str]:
    precision = {(pm.spec.name, None): pm.spec.precision for pm in inp.models}
    precision.update({(pm.spec.name, v.name): v.model.spec.precision for pm in inp.models for v in pm.variants})
    out = set()
    for a in allocations:
        p = precision[(a["model"], a.get("variant"))]
        if serving_precision(p, a["gpu"]) != p:
            out.add(f"{a['model']}{':' + a['variant'] if a.get('variant') else ''} runs in fp16 on {a['gpu']} "
                    f"({a['gpu']} has no BF16)")
    return sorted(out)


def _variants(pm) -> list[dict] | None:
    """plan.json ``models[].variants``: what each variant loads and its accuracy score."""
    if not pm.variants:
        return None
    return [{"name": v.name, "model": v.model.spec.model, "source": v.model.spec.source,
             "precision": v.model.spec.precision, "params": v.model.arch.params if v.model.arch else None,
             "accuracy": v.accuracy, "accuracy_from": v.accuracy_from, "meets_floor": v.eligible}
            for v in pm.variants]


def _accuracy(pm, flows: dict, units: dict) -> dict | None:
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
    return {"min_accuracy": pm.spec.slo.min_accuracy, "served": rounded(served, 6),
            "best": best.accuracy, "best_variant": best.name,
            "given_up": rounded(best.accuracy - served, 6) if served is not None else None,
            "by_variant": {v: {"rps": rounded(r, 6), "share": rounded(r / total, 6)} for v, r in sorted(rps.items())}}


# ---- keys added for verified, startable plans (issue 21) ------------------------------------------
#   allocations[].max_model_len: int     the unit's vLLM --max-model-len (hetinfra.perf.kv)
#   allocations[].kv_cache_tokens: int | null   tokens one engine's KV cache holds (null: mixed pipeline)
#   allocations[].gpu_memory_gb: float   memory of one GPU, from the offer (a custom GPU's only source)
def _engine_lengths(pr: PlanResult, allocations: list[dict]) -> None:
    from hetinfra.catalog.gpus import serving_precision as precision_on
    from hetinfra.perf.kv import kv_cache_tokens, unit_max_model_len
    from hetinfra.catalog.custom import gpu_facts

    planned = {pm.spec.name: pm for pm in pr.inputs.models}
    version = pr.inputs.spec.deploy.vllm_version
    for a in allocations:
        u, pm = pr.units[a["unit"]], planned[a["model"]]
        served = next((v.model for v in pm.variants if v.name == u.template.variant), pm)
        sizes = {c.name: (c.input_tokens, c.output_tokens) for c in pm.classes}
        routed = sorted({sizes[w] for (uid, _m, w), rps in pr.result.flow.items() if uid == u.id and rps > 0})
        largest = max(sizes.values(), key=lambda s: (s[0] + s[1], s[0]))
        kv = None
        if not u.template.mixed and served.arch is not None:
            gpu = gpu_facts(u.template.gpu, pr.inputs.spec, u.gpu_memory_gb)
            kv = kv_cache_tokens(served.arch, gpu, u.template.tp, u.template.pp,
                                 precision_on(served.spec.precision, u.template.gpu),
                                 None if u.template.bundle else u.template.node_count or None,  # a bundle: its decode engine
                                 version)
        a["max_model_len"] = unit_max_model_len(routed, largest, pm.max_model_len, kv)
        a["kv_cache_tokens"] = kv
        a["gpu_memory_gb"] = u.gpu_memory_gb


def service_id(name: str, spec_path) -> str:
    """``<name>-<10 hex>``: the service name and a hash of its spec file's absolute path. `apply`
    records it in state.json and refuses to apply another service's plan over it (``--force``)."""
    import hashlib
    import os

    where = os.path.realpath(str(spec_path)) if spec_path else ""
    return f"{name}-{hashlib.sha256(where.encode()).hexdigest()[:10]}"


def _confidence(t) -> dict | None:
    """templates[].confidence: the level, why, and the rate interval with its basis (a regime's
    calibration residuals, else the trust level's: hetinfra.perf.confidence.rate_interval)."""
    if not t.confidence:
        return None
    from hetinfra.perf.confidence import interval

    rates = t.interval or interval(t.confidence[0])
    return {"level": t.confidence[0], "reason": t.confidence[1], "interval": list(rates),
            "interval_basis": t.interval_basis or f"trust level {t.confidence[0]}"}


def simulation_view(pr: PlanResult) -> dict:
    """The sections of plan.json that the simulator (``hetinfra.sim.plan_sim``) and the trim
    (``hetinfra.sim.minimal``) read, built by the very code that builds the document: allocations
    (with purchase extras and names, without failover alternates), routing (and routing by origin),
    models, templates, the plan's cost and demand scale, and the engine version. What each
    verification round simulates; the document is assembled once, from the final plan
    (:func:`build_plan_json`)."""
    return _sections(pr)[0]


def _sections(pr: PlanResult) -> tuple[dict, dict[str, float]]:
    """(:func:`simulation_view`, each unit's planned load in replicas)."""
    inp, res, prob = pr.inputs, pr.result, pr.problem
    spec = inp.spec
    purchases = planned(spec)
    scale = res.scale if prob.objective == "max_throughput" else 1.0
    load, allocations = _allocations(pr, purchases)
    slugs = model_slugs([pm.spec.name for pm in inp.models])
    _name_units(allocations, slugs)
    return {
        "plan_version": PLAN_VERSION, "service": spec.name, "objective": prob.objective,
        "cost_usd_per_hour": rounded(res.cost(prob)), "demand_scale": rounded(scale, 6),
        "allocations": allocations, "routing": _routing(pr, scale),
        **origin_sections(pr, allocations, scale),
        "models": _models(pr, slugs, allocations), "templates": _templates(pr),
        "deploy": {"vllm_version": spec.deploy.vllm_version},
    }, load


def _allocations(pr: PlanResult, purchases) -> tuple[dict[str, float], list[dict]]:
    """(each unit's planned load in replicas, plan.json ``allocations`` before names and failover)."""
    res, prob = pr.result, pr.problem
    load: dict[str, float] = {}
    routed: dict[str, float] = {}
    for (u, _m, w), rps in res.flow.items():
        load[u] = load.get(u, 0.0) + rps / pr.units[u].template.rates[w]
        routed[u] = routed.get(u, 0.0) + rps
    allocations = []
    for uid in sorted(res.n, key=lambda u: (pr.units[u].model, pr.units[u].template.cloud, pr.units[u].region, u)):
        u, cnt = pr.units[uid], res.n[uid]
        t = u.template
        allocations.append({
            "unit": uid, "template": t.id, "model": u.model, "cloud": t.cloud, "region": u.region,
            "instance_type": t.instance_type, "gpu": t.gpu, "gpus_per_instance": t.gpus_per_instance,
            "tp": t.tp, "pp": t.pp, "engines_per_instance": t.engines, "nodes_per_replica": t.nodes,
            "layer_partition": list(t.layer_partition) if t.layer_partition else None,
            "count": cnt, "instances": cnt * t.nodes, "spot": u.spot,
            "price_per_instance_usd_per_hour": rounded(u.cost / t.nodes),
            # with a demand profile a top-up's count follows the periods: its horizon-average cost
            "cost_usd_per_hour": rounded(u.cost * (average_count(pr, uid) if purchases else cnt)),
            "utilization": rounded(load.get(uid, 0.0) / cnt, 4), "custom_cloud": u.custom_cloud,
            "routed_rps": rounded(routed.get(uid, 0.0), 6),
            # Requests/s one replica sustains at this unit's class mix, less the headroom: the
            # autoscaler's and the router's per-replica target.
            "target_qps_per_replica": rounded(routed[uid] / load[uid] * (1 - prob.headroom), 4) if load.get(uid) else None,
            "experimental": t.mixed, "confidence": t.confidence[0] if t.confidence else None,
            "variant": t.variant,
        })
        if purchases:
            allocations[-1].update(allocation_extras(pr, uid))
        if t.bundle is not None:  # issue 37: each engine's role, the ratio and the expected transfer
            from hetinfra.plan.templates_pd import bundle_json

            allocations[-1]["disaggregation"] = bundle_json(t.bundle)
        if t.lora is not None:  # issue 38: the adapters it holds, its slots, memory and derate
            from hetinfra.plan.adapters import unit_adapters_json

            allocations[-1]["adapters"] = unit_adapters_json(pr, uid)
        if t.mixed:  # price_per_instance above is the mean over the stages' instances
            allocations[-1]["stages"] = [
                {"instance_type": it, "gpu": g, "gpus": t.gpus_per_instance, "layers": n, "price_usd_per_hour": rounded(p)}
                for (it, g), n, p in zip(t.stages, t.layer_partition, u.stage_prices)]
    _engine_lengths(pr, allocations)  # issue 21: allocations[].max_model_len, kv_cache_tokens
    return load, allocations


def _routing(pr: PlanResult, scale: float) -> dict[str, dict[str, list]]:
    """plan.json ``routing``: model -> class -> [{unit, share, rps}], largest rps first."""
    routing: dict[str, dict[str, list]] = {}
    by_class: dict[tuple[str, str], list] = {}  # in the flows' order, so equal rates keep it (sorted is stable)
    for (u, m, w), rps in pr.result.flow.items():
        by_class.setdefault((m, w), []).append((u, rps))
    for pm in pr.inputs.models:
        per_class = routing.setdefault(pm.spec.name, {})
        for c in pm.classes:
            total = c.rate_rps * peak_multiplier(pm.spec) * (scale or 0.0)
            flows = sorted(by_class.get((pm.spec.name, c.name), ()), key=lambda x: -x[1])
            per_class[c.name] = [{"unit": u, "share": rounded(rps / total if total else 0.0, 6), "rps": rounded(rps, 6)}
                                 for u, rps in flows]
    return routing


def _templates(pr: PlanResult) -> list[dict]:
    """plan.json ``templates``: the templates the allocations use."""
    used_templates = {pr.units[u].template.id: pr.units[u].template for u in pr.result.n}
    return [{
        "id": t.id, "model": t.model, "cloud": t.cloud, "instance_type": t.instance_type, "gpu": t.gpu,
        "gpus_per_instance": t.gpus_per_instance, "tp": t.tp, "pp": t.pp, "engines_per_instance": t.engines,
        "placement": {"stages": t.pp, "nodes_per_stage": 1, "nodes": t.nodes, "stages_per_node": t.stages_per_node,
                      "layers_per_stage": list(t.layer_partition or ()) or None,
                      "tp": t.tp, "experimental": t.mixed,
                      "stage_nodes": [{"instance_type": it, "gpu": g} for it, g in (t.stages or [(t.instance_type, t.gpu)] * t.pp)]},
        "capacity_rps": {w: rounded(v, 6) for w, v in t.rates.items()}, "sources": dict(t.sources),
        # capacity_rps is the estimate (or profile) x derate: < 1 where simulating the plan found the
        # template slower than estimated (see fidelity)
        "derate": rounded(pr.derate.get(t.id, 1.0), 6),
        "confidence": _confidence(t),
        "variant": t.variant,
    } for t in sorted(used_templates.values(), key=lambda t: t.id)]


def split_decision(pr: PlanResult, pm) -> dict:
    from hetinfra.plan.templates_pd import split_decision as decide  # local: only with disaggregation

    return decide(pm, pr.all_units or list(pr.units.values()), [pr.units[u] for u in pr.result.n], pr.derate)


def _models(pr: PlanResult, slugs: dict[str, str], allocations: list[dict]) -> list[dict]:
    """plan.json ``models``: each model's objectives, peak demand, classes, cost and variants."""
    return [{
        "name": pm.spec.name, "slug": slugs[pm.spec.name], "model": pm.spec.model, "source": pm.spec.source, "precision": pm.spec.precision,
        "params": pm.arch.params if pm.arch else None,  # parameter count: apply sizes disks for the weights
        "slo": {"ttft_ms": pm.spec.slo.ttft_ms, "tpot_ms": pm.spec.slo.tpot_ms,
                "percentile": pm.spec.slo.percentile, "attainment": pm.spec.slo.attainment},
        # with a demand profile: the peak period's rate, which the fleet, routing and simulation are for
        "rate_rps": pm.spec.demand.rate_rps * peak_multiplier(pm.spec), "max_model_len": pm.max_model_len,
        "max_model_len_basis": pm.max_model_len_basis,
        "classes": [{"name": c.name, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                     "share": rounded(c.share, 6), "rate_rps": rounded(c.rate_rps * peak_multiplier(pm.spec), 6)}
                    for c in pm.classes],
        "cost_usd_per_hour": rounded(sum(a["cost_usd_per_hour"] for a in allocations if a["model"] == pm.spec.name)),
        "variants": _variants(pm), "accuracy": _accuracy(pm, pr.result.flow, pr.units),
        **({"demand_profile": {"rate_rps": pm.spec.demand.rate_rps, "multipliers": list(pm.spec.demand.profile),
                               "peak_period": pm.spec.demand.profile.index(peak_multiplier(pm.spec))}}
           if pm.spec.demand.profile is not None else {}),
        **({"disaggregation": split_decision(pr, pm)} if pr.inputs.spec.planning.disaggregation == "auto" else {}),
    } for pm in pr.inputs.models]


def build_plan_json(pr: PlanResult) -> "Plan":
    """plan.json of ``pr`` as its model: the :func:`simulation_view`'s sections, with failover
    alternates, purchase, baselines, breakdown, churn, solver, inputs and warnings (one builder per
    section; the typed ones build their models)."""
    from hetinfra.document import Plan
    from hetinfra.plan.failover import add_failover, failover_warnings

    inp, res, prob = pr.inputs, pr.result, pr.problem
    spec = inp.spec
    view, load = _sections(pr)
    allocations = view["allocations"]
    add_failover(pr, allocations)
    baseline_stop = any(b.safety_stop for b in pr.baselines)
    doc = {
        "plan_version": PLAN_VERSION,
        "hetinfra_version": __version__,
        "service": spec.name,
        "service_id": service_id(spec.name, inp.spec_path),
        "objective": prob.objective,
        "status": res.status,
        "cost_usd_per_hour": view["cost_usd_per_hour"],
        "demand_scale": view["demand_scale"],
        "budget_usd_per_hour": spec.budget_usd_per_hour,
        "gpus": sum(a["gpus_per_instance"] * a["instances"] for a in allocations),
        "allocations": allocations,
        "routing": view["routing"],
        # routing by origin (issue 25, hetinfra/plan/origins_json.py): only where a model declares demand.origins
        **{k: view[k] for k in ("origins", "routing_by_origin") if k in view},
        "unmet_rps": {f"{m}/{w}": rounded(v, 6) for (m, w), v in sorted(res.unmet.items())},
        **({"purchase": purchase_section(pr, allocations, load, rounded)} if planned(spec) else {}),
        "breakdown": _breakdown(allocations),
        "churn": _churn(pr),
        "models": view["models"],
        "templates": view["templates"],
        "baselines": _baselines(pr, res.cost(prob)),
        "solver": _solver(pr, baseline_stop),
        "inputs": _inputs(pr),
        "deploy": spec.deploy.model_dump(),
        "warnings": list(inp.warnings) + list(pr.warnings) + ([BASELINE_SAFETY_WARNING] if baseline_stop else [])
        + _precision_warnings(allocations, inp) + [
            f"{a['deployment_unit']} is an EXPERIMENTAL mixed-GPU pipeline ({a['gpu']}): its rates are estimated, not "
            "measured; deployed by the Pulumi stacks only (vLLM mp backend)" for a in allocations if a.get("stages")] + [
            f"{a['deployment_unit']} is a prefill/decode bundle ({a['disaggregation']['xpyd']}): hetinfra does not "
            "write its deployment artifacts yet (only plan.json)" for a in allocations if a.get("disaggregation")],
    }
    doc["warnings"] += failover_warnings(doc)
    return Plan.parse(doc)


def _baselines(pr: PlanResult, cost: float) -> list["Baseline"]:
    """plan.json ``baselines``: each single-GPU-type plan, and what it saves or why it is infeasible."""
    from hetinfra.document.sections import Baseline

    out = []
    for b in pr.baselines:
        fields = {"gpu": b.gpu, "feasible": b.feasible}
        if b.feasible:
            fields.update({"cost_usd_per_hour": rounded(b.cost), "instances": b.instances,
                           "savings_usd_per_hour": rounded(b.cost - cost),
                           "savings_pct": rounded(100 * (b.cost - cost) / b.cost if b.cost else 0.0, 2),
                           "allocation": [{"unit": u, "count": c} for u, c in sorted(b.allocation.items())]})
        else:
            fields["reason"] = b.reason
        if b.safety_stop:
            fields["safety_stop"] = True
        out.append(Baseline.model_validate(fields))
    return out


def _breakdown(allocations: list[dict]) -> "Breakdown":
    """plan.json ``breakdown``: cost, GPUs and instances per model and per cloud/region."""
    from hetinfra.document.sections import Breakdown, Totals

    by_model: dict[str, dict] = {}
    by_region: dict[str, dict] = {}
    for a in allocations:
        for key, table in ((a["model"], by_model), (f"{a['cloud']}/{a['region']}", by_region)):
            entry = table.setdefault(key, {"cost_usd_per_hour": 0.0, "gpus": 0, "instances": 0})
            entry["cost_usd_per_hour"] = rounded(entry["cost_usd_per_hour"] + a["cost_usd_per_hour"])
            entry["gpus"] += a["gpus_per_instance"] * a["instances"]
            entry["instances"] += a["instances"]
    for key, entry in by_region.items():
        entry["models"] = sorted({a["model"] for a in allocations if f"{a['cloud']}/{a['region']}" == key})
    return Breakdown(by_model={k: Totals(**v) for k, v in by_model.items()},
                     by_region={k: Totals(**v) for k, v in by_region.items()})


def _churn(pr: PlanResult) -> "Churn | None":
    """plan.json ``churn``: the replicas re-planning against a running deployment starts and stops."""
    from hetinfra.document.sections import Churn

    res, running = pr.result, pr.problem.running
    if not running:  # no running deployment
        return None
    started = {u: c - running.get(u, 0) for u, c in res.n.items() if c > running.get(u, 0)}
    stopped = {u: c - res.n.get(u, 0) for u, c in running.items() if c > res.n.get(u, 0)}
    return Churn(penalty_hours=pr.problem.churn_hours, running=dict(running), started=started, stopped=stopped)


def _solver(pr: PlanResult, baseline_stop: bool) -> "Solver":
    """plan.json ``solver``: how the solve went (the settings, the bounds, the size, the method)."""
    from hetinfra.document.sections import Solver

    spec, res, prob = pr.inputs.spec, pr.result, pr.problem
    return Solver.model_validate({
        "name": spec.planning.solver, "status": res.status, "objective": rounded(res.objective, 6), "bound": rounded(res.bound, 6),
        "gap": rounded(res.gap, 6), "lp_bound": rounded(res.lp_bound, 6),
        "warm_start": {"from": res.warm_start, "objective": rounded(res.warm_start_objective, 6)} if res.warm_start else None,
        "build_s": rounded(res.build_s, 3), "solve_s": rounded(res.solve_s, 3), "time_limit_s": spec.planning.time_limit_s,
        "mip_gap": spec.planning.mip_gap, "routing": prob.routing,
        "slice_factor": prob.slice_factor if prob.routing == "sliced" else None,
        "headroom": prob.headroom, "units_considered": len(prob.units), **res.size,
        # decomposed into blocks of linked models or one joint model; the deterministic node limit; whether
        # the wall-clock safety stop cut a solve (then the plan may differ on a faster machine)
        "method": res.method, "blocks": res.blocks, "max_nodes": res.max_nodes, "safety_stop": bool(res.safety_stop or baseline_stop),
    })


def _inputs(pr: PlanResult) -> "Inputs":
    """plan.json ``inputs``: the spec, offers, profiles, estimator and engine the plan was made from."""
    from hetinfra.document.sections import Inputs

    inp = pr.inputs
    return Inputs.model_validate({
        "spec_path": str(inp.spec_path), "spec_sha256": inp.spec_sha256, "offers_as_of": inp.snapshot.as_of,
        "sources": [{"name": s.name, "as_of": s.as_of, "sha256": s.sha256, "rows": s.rows}
                    for s in inp.snapshot.sources],
        "profiles": list(inp.profile_files), "estimator": ESTIMATOR_VERSION,
        "engine": f"vllm {inp.spec.deploy.vllm_version}", "template_cache": pr.template_cache,
    })
