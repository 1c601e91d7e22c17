"""Serving templates (Coral's offline stage, homogeneous single-node part) and their units.

A *template* is a region-agnostic way to serve one model: an instance type of one cloud and a
vLLM layout on it (TP = the instance's GPUs, or several smaller-TP engines side by side, i.e.
data parallel inside the instance). A *unit* is a template instantiated in one region with one
purchase option and its price; the allocation ILP chooses how many of each unit to run.

Capacity h[u, w] = engines x (max rate of one engine for class w): req/s one instance sustains
under the model's SLOs (Mélange's MaxTput).
"""

from __future__ import annotations

from dataclasses import replace

from hetinfra.plan.inputs import PlanInputs, PlannedModel
from hetinfra.perf.confidence import LEVELS, confidence_detail, rate_interval
from hetinfra.perf.model import PerformanceModel, RateResult
from hetinfra.plan.library import ClassCoverage, ModelLibrary, Template, TemplateUnit
from hetinfra.plan.tail import best_effort_classes, relaxed


def tp_options(gpu_count: int, heads: int | None, kv_heads: int | None = None) -> list[int]:
    """TP degrees for an instance: powers of two dividing the GPU count that vLLM can shard the
    attention over (hetinfra.architecture.tp_problem: the query heads, and the KV heads)."""
    from hetinfra.architecture import tp_problem

    out = []
    tp = 1
    while tp <= gpu_count:
        if gpu_count % tp == 0 and (heads is None or tp_problem("", heads, kv_heads, tp) is None):
            out.append(tp)
        tp *= 2
    return out


def build_units(inputs: PlanInputs, perf: PerformanceModel, cache=None
                ) -> tuple[list[TemplateUnit], dict[tuple[str, str], ClassCoverage]]:
    """All units for every model (prune them with :func:`hetinfra.plan.prune.prune_dominated`), and per-(model, class)
    coverage. ``cache`` (a :class:`hetinfra.plan.template_cache.TemplateCache`) reuses libraries built
    before for the same model, SLO, classes, instance types and performance model."""
    units: list[TemplateUnit] = []
    coverage: dict[tuple[str, str], ClassCoverage] = {}
    for pm in inputs.models:
        libs = []
        for variant, served in pm.checkpoints():  # one library per variant meeting the accuracy floor
            lib = cache.get(inputs, served) if cache is not None else None
            if lib is None:
                lib = build_library(inputs, served, perf)
                if cache is not None:
                    cache.put(inputs, served, lib)
            if inputs.spec.planning.disaggregation == "auto":  # bundles: priced anew, never cached
                from hetinfra.plan.templates_pd import with_bundles

                lib = with_bundles(inputs, served, lib, tp_options)
            libs.append(lib if variant is None else for_variant(lib, variant, pm))
        lib = libs[0] if len(libs) == 1 else merge_libraries(libs)
        units.extend(instantiate(lib, inputs.offers, inputs.spec.infrastructure.spot,
                                 terms=inputs.spec.infrastructure.terms(), horizon_months=inputs.spec.planning.horizon_months))
        coverage.update({(pm.spec.name, c): cov for c, cov in lib.coverage.items()})
    return units, coverage


def for_variant(lib: ModelLibrary, variant: str, pm: PlannedModel) -> ModelLibrary:
    """``lib`` (built for the model as ``variant`` serves it) with its templates marked as the
    variant's: ids end in ``|<variant>``, and coverage reasons name it."""
    score = next(v.accuracy for v in pm.variants if v.name == variant)
    templates = tuple(replace(t, id=f"{t.id}|{variant}", variant=variant, accuracy=score) for t in lib.templates)
    def named(floor: tuple[float, str] | None) -> tuple[float, str] | None:
        return (floor[0], f"{floor[1]} ({variant})") if floor else None

    coverage = {c: replace(cov, reasons=tuple(f"{variant}: {r}" for r in cov.reasons),
                           best_tpot_floor=named(cov.best_tpot_floor), best_ttft_floor=named(cov.best_ttft_floor))
                for c, cov in lib.coverage.items()}
    return ModelLibrary(lib.model, templates, coverage)


def merge_libraries(libs: list[ModelLibrary]) -> ModelLibrary:
    """One model's variants' libraries as one: every template; a class is served when any variant
    serves it, with the fastest TPOT and TTFT any reaches and every variant's reasons."""
    coverage = {}
    for c in libs[0].coverage:
        covs = [lib.coverage[c] for lib in libs]
        tpot = [cov.best_tpot_floor for cov in covs if cov.best_tpot_floor]
        ttft = [cov.best_ttft_floor for cov in covs if cov.best_ttft_floor]
        coverage[c] = ClassCoverage(any(cov.served for cov in covs), min(tpot) if tpot else None,
                                    tuple(r for cov in covs for r in cov.reasons), min(ttft) if ttft else None)
    templates = tuple(sorted((t for lib in libs for t in lib.templates), key=lambda t: t.id))
    return ModelLibrary(libs[0].model, templates, coverage)


def pp_options(gpus: int, layers: int | None) -> list[int]:
    """Pipeline degrees inside one node of ``gpus`` GPUs left after TP: divisors of the count (at most
    the model's layers)."""
    return [p for p in range(1, gpus + 1) if gpus % p == 0 and (layers is None or p <= layers)]


def build_library(inputs: PlanInputs, pm: PlannedModel, perf: PerformanceModel) -> ModelLibrary:
    """Coral's offline stage for one model: single-node layouts (TP x PP x DP), homogeneous pipelines
    across nodes (TP x PP, Demystifying's search over both degrees) and (when
    ``planning.allow_mixed_pipelines``) mixed-GPU pipelines over the allowed instance types."""
    settings = inputs.spec.planning
    search = _LayoutSearch(pm, settings.tp_pp_layouts, settings.max_nodes_per_template)
    floors: dict[tuple[str, str], tuple[float, str]] = {}  # (kind "tpot"/"ttft", class) -> fastest (ms, layout)
    reasons: dict[str, set[tuple[int, int, str]]] = {c.name: set() for c in pm.classes}
    types = sorted({(o.cloud, o.instance_type, o.gpu, o.gpu_count) for o in inputs.offers})
    for cloud, instance_type, gpu, gpu_count in types:
        for key in search.layouts(cloud, instance_type, gpu_count, gpu):
            if key not in search.templates:
                tp, pp = key[2], key[3]
                nodes = 1 if tp * pp <= gpu_count else tp * pp // gpu_count
                search.templates[key] = _template(pm, perf, cloud, instance_type, gpu, gpu_count, tp, pp, floors,
                                                  reasons, nodes=nodes)
                if nodes == 1 and search.complete(key):
                    search.single_complete.add((cloud, instance_type))
    built = list(search.templates.values())
    effort = best_effort_classes(pm, [t for t in built if t.rates])  # a percentile's tail (hetinfra.plan.tail)
    if effort:
        built = [relaxed(pm, perf, t, effort) for t in built]
    out = prune_layouts([t for t in built if t.rates])
    if settings.allow_mixed_pipelines and pm.arch is not None:
        from hetinfra.plan.templates_mixed import mixed_templates  # local: only with allow_mixed_pipelines

        out.extend(mixed_templates(pm, inputs.offers, max_nodes=settings.max_nodes_per_template,
                                   memory_ratio=settings.mixed_memory_ratio,
                                   skip_clouds=set(inputs.spec.deploy.skypilot_clouds)))
    coverage = {}
    for c in pm.classes:
        served = any(c.name in t.rates for t in out)
        coverage[c.name] = ClassCoverage(served, floors.get(("tpot", c.name)), tuple(r for *_, r in sorted(reasons[c.name])),
                                         floors.get(("ttft", c.name)))
    return ModelLibrary(pm.spec.name, tuple(sorted(out, key=lambda t: t.id)), coverage)


def possible_layouts(pm: PlannedModel, settings, gpu_count: int) -> set[tuple[int, int]]:
    """Every (tp, pp) :func:`build_library` may try for ``pm`` on an instance of ``gpu_count`` GPUs
    under ``settings`` (spec.planning): its k-node pipelines as if fewer nodes never served, so a
    superset of what one plan tries. A profile row of any other layout is never read."""
    search = _LayoutSearch(pm, settings.tp_pp_layouts, settings.max_nodes_per_template)
    return {(tp, pp) for _, _, tp, pp in search.layouts("", "", gpu_count)}


#: the KV cache a 2-node pipeline holds, as a multiple of one node's, past which it is tried where one node
#: serves: (0.9 M - W / 2) / (0.9 M - W) >= 4 for weights W on a GPU of memory M ...
PIPELINE_KV_GAIN = 4.0
#: ... i.e. W >= 6 / 7 of 0.9 M: the weights' share of a GPU's memory (split over a node's GPUs at TP = all)
WEIGHT_BOUND = 0.9 * (PIPELINE_KV_GAIN - 1) / (PIPELINE_KV_GAIN - 0.5)


class _LayoutSearch:
    """The layouts :func:`build_library` tries for one model, in order, and the templates made so far
    (keyed (cloud, instance type, tp, pp)): a k-node pipeline is tried only while no layout of fewer
    nodes of that instance type serves every class, or (2 nodes) where the weights fill a node."""

    def __init__(self, pm: PlannedModel, tp_pp: bool, max_nodes: int):
        self.pm, self.tp_pp, self.max_nodes = pm, tp_pp, max_nodes
        self.heads = pm.arch.heads if pm.arch else None
        self.kv_heads = pm.arch.kv_heads if pm.arch else None
        self.layers = pm.arch.layers if pm.arch else None
        self.templates: dict[tuple[str, str, int, int], Template] = {}
        #: (cloud, instance type) with a one-node template that serves every class
        self.single_complete: set[tuple[str, str]] = set()

    def weight_bound(self, gpu: str | None, gpu_count: int) -> bool:
        """Whether the model's weights fill a node of ``gpu_count`` ``gpu``s, split over all of them: at
        least WEIGHT_BOUND of a GPU's memory, where a 2-node pipeline holds PIPELINE_KV_GAIN times the KV
        cache a node alone keeps (gpu_memory_utilization 0.9), so two nodes as one pipeline can serve far
        more than two replicas. Llama-3.1-70B fp8 on one H100 (88%) keeps little KV cache and rates 0.15
        req/s, two as one TP1 x PP2 pipeline 2.48: held-out h120k (benchmarks/results/heldout64b), with H100
        capped at 4 in its region, was refused, and h120b planned 2.5 req/s of it on 44 nodes of 8 x L4 at
        $761.78/h. Under it (an 8B on a 24 GB GPU: 67%; a 7B: 56%) replicas win, as the estimator agreed
        on the Mélange cases, whose measured profiles cover single GPUs only."""
        from hetinfra.catalog.gpus import get_gpu
        from hetinfra.perf.memory import weights_gb_per_gpu

        spec = get_gpu(gpu) if gpu else None
        if spec is None or self.pm.arch is None or not spec.memory_gb:
            return False
        return weights_gb_per_gpu(self.pm.arch, gpu_count, 1, self.pm.ctx.precision) >= WEIGHT_BOUND * spec.memory_gb

    def complete(self, key) -> bool:
        return key in self.templates and len(self.templates[key].rates) == len(self.pm.classes)

    def layouts(self, cloud: str, instance_type: str, gpu_count: int, gpu: str | None = None):
        """Keys (cloud, instance type, tp, pp); nodes follow: tp x pp <= GPUs of a node means one node
        (gpus / (tp x pp) engines side by side), else tp x pp / GPUs nodes.

        Single-node layouts first: TP x PP with tp x pp dividing the node's GPUs (PP only with
        ``tp_pp_layouts``). A k-node pipeline only while fewer nodes of that instance type cannot
        serve every class (memory or SLO): when one node can, k independent replicas serve at least
        as much as one k-node pipeline for k x the price, except where the weights fill the node
        (:meth:`weight_bound`, ``gpu``): then a 2-node pipeline is tried too. Across k nodes TP stays
        inside a node and each node holds gpus / tp consecutive stages (TP = all GPUs of a node without
        ``tp_pp_layouts``)."""
        heads, layers, tp_pp = self.heads, self.layers, self.tp_pp
        for tp in tp_options(gpu_count, heads, self.kv_heads):
            for pp in pp_options(gpu_count // tp, layers) if tp_pp else (1,):
                yield (cloud, instance_type, tp, pp)
        tps = [t for t in reversed(tp_options(gpu_count, heads, self.kv_heads)) if tp_pp or t == gpu_count]
        if not tps:
            return
        for k in range(2, self.max_nodes + 1):
            if (cloud, instance_type) in self.single_complete and (k > 2 or not self.weight_bound(gpu, gpu_count)):
                return
            keys = [(cloud, instance_type, tp, k * gpu_count // tp) for tp in tps
                    if layers is None or k * gpu_count // tp <= layers]
            if not keys:
                return
            yield from keys
            if any(self.complete(key) for key in keys):
                return


def _layout_rank(t: Template) -> tuple:
    """Simpler layouts first (fewer stages, then more engines): they win ties in ``prune_layouts``."""
    return (t.pp, -t.engines, -t.tp, t.id)


def prune_layouts(templates: list[Template]) -> list[Template]:
    """Drop a TP x PP layout whose stages share a node when another layout of the same instance type
    on as many nodes serves every class at least as fast (Demystifying's pruning of dominated
    configurations; same price, same GPUs). Exact ties keep the simpler layout (fewer pipeline
    stages, then more data-parallel engines), so such a layout enters a plan only where it is
    strictly better on some class. Other layouts stay (``prune_dominated`` weighs them as units,
    where running units are kept for the churn penalty)."""
    groups: dict[tuple, list[Template]] = {}
    for t in templates:
        groups.setdefault((t.cloud, t.instance_type, t.nodes), []).append(t)
    out: list[Template] = []
    for group in groups.values():
        kept: list[Template] = []
        for t in sorted(group, key=_layout_rank):
            if t.node_count and any(all(v.rates.get(w, 0.0) >= r - 1e-12 for w, r in t.rates.items()) for v in kept):
                continue
            kept.append(t)
        out.extend(kept)
    return out


def amortized(term_months: int, horizon_months: int) -> float:
    """Factor on a committed $/h to spread it over the horizon's hours: whole terms must cover the
    horizon, so a 36-month term over a 12-month horizon costs 3x its hourly price per planned hour."""
    return -(-horizon_months // term_months) * term_months / horizon_months


def instantiate(lib: ModelLibrary, offers, spot_ok: bool, *, terms: tuple[str, ...] | None = None,
                horizon_months: int = 12) -> list[TemplateUnit]:
    """Units: every template in every region that offers all its instance types, per purchase option
    (``terms``, default on-demand plus spot with ``spot_ok``; a committed term where every instance
    type of the template publishes its price, at that price amortized over ``horizon_months``)."""
    from hetinfra.price_feeds.offers import COMMITTED_TERMS

    terms = terms or (("on_demand", "spot") if spot_ok else ("on_demand",))
    by_place: dict[tuple[str, str], dict[str, object]] = {}
    for o in offers:
        by_place.setdefault((o.cloud, o.region), {})[o.instance_type] = o
    units: list[TemplateUnit] = []
    for (cloud, region), here in sorted(by_place.items()):
        for t in lib.templates:
            if t.cloud != cloud:
                continue
            stage_types = t.node_types
            if any(s not in here for s in stage_types):
                continue
            first = here[stage_types[0]]
            for term in terms:
                spot = term == "spot"
                prices = [here[s].purchase_price(term) for s in stage_types]
                if any(p is None for p in prices):
                    continue
                committed = term in COMMITTED_TERMS
                if committed:
                    prices = [p * amortized(COMMITTED_TERMS[term], horizon_months) for p in prices]
                    on_demand = [here[s].price_per_hour for s in stage_types]
                units.append(TemplateUnit(
                    id=f"{t.id}|{region}|{term if committed else 'spot' if spot else 'ondemand'}", template=t,
                    region=region, spot=spot,
                    cost=sum(prices) if t.per_node_types else prices[0] * t.nodes, gpu_memory_gb=first.gpu_memory_gb,
                    vcpus=first.vcpus, memory_gb=first.memory_gb, custom_cloud=first.custom_cloud,
                    stage_prices=tuple(prices) if t.per_node_types else None, purchase=term if committed else None,
                    on_demand_cost=(sum(on_demand) if t.per_node_types else on_demand[0] * t.nodes) if committed else None))
    return units


def layer_partition(layers: int, pp: int) -> tuple[int, ...]:
    """vLLM's default split: equal stages, the remainder on the last stages (VLLM_PP_LAYER_PARTITION)."""
    base, extra = divmod(layers, pp)
    return tuple(base + (1 if i >= pp - extra else 0) for i in range(pp))


def _template(pm: PlannedModel, perf: PerformanceModel, cloud: str, instance_type: str, gpu: str, gpus: int, tp: int,
              pp: int, floors: dict, reasons: dict, nodes: int | None = None) -> Template:
    """One homogeneous layout: tp x pp GPUs per engine on ``nodes`` nodes (None: one node per stage);
    a single-node layout runs gpus / (tp x pp) engines side by side."""
    nodes = pp if nodes is None else nodes
    engines = gpus // (tp * pp) if nodes == 1 else 1
    rates, sources = {}, {}
    trust = None
    layout = f"{gpu} tp={tp}" + (f" pp={pp}" if pp > 1 else "") + (" (one node)" if pp > 1 and nodes == 1 else "")
    for c in pm.classes:
        r: RateResult = perf.rate(pm.ctx, gpu, tp, pp, c, nodes=nodes)
        if r.max_rps > 0:
            rates[c.name] = engines * r.max_rps
            sources[c.name] = r.source
            conf = confidence_detail(gpu, tp, pp, r.batch, from_profile=r.source.startswith("profile:"),
                                     vllm_version=pm.ctx.vllm_version)
            ri = rate_interval(conf, r.other)  # widened where another source disagrees beyond it
            # the least trusted class speaks for the template; among equals, the widest downside
            if trust is None or (-LEVELS.index(conf.level), ri.low) < (-LEVELS.index(trust[0]), trust[2][0]):
                trust = (conf.level, conf.reason, (ri.low, ri.middle, ri.high), ri.basis, ri)
        elif r.reason:
            reasons[c.name].add((-tp * pp, pp, f"{layout}: {r.reason}"))  # most GPUs, then fewest stages, first
        for kind, ms in (("tpot", r.tpot_floor_ms), ("ttft", r.ttft_floor_ms)):
            best = floors.get((kind, c.name))
            if ms and (best is None or ms < best[0]):  # 0 or None: no latency figure (the weights do not fit)
                floors[(kind, c.name)] = (ms, layout)
    tid = f"{pm.spec.name}|{cloud}|{instance_type}|tp{tp}x{engines}" + (f"|pp{pp}" if pp > 1 else "")
    partition = layer_partition(pm.arch.layers, pp) if (pp > 1 and pm.arch) else None
    return Template(tid, pm.spec.name, cloud, instance_type, gpu, gpus, tp, pp, engines, rates, sources, partition,
                    confidence=trust[:2] if trust else None, node_count=0 if nodes == pp else nodes,
                    interval=trust[2] if trust else None, interval_basis=trust[3] if trust else None,
                    disagreement=(trust[4].widened_by, trust[4].other_factor) if trust and trust[4].widened_by else None)
