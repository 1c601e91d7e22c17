"""xPyD bundles: prefill/decode disaggregation as templates of the one formulation (issue 37, point 3).

A bundle is x prefill engines (TP a) and y decode engines (TP b) that serve a model together: a
request is prefilled on a prefill engine, its prompt's KV moves to a decode engine, which emits every
output token. To the ILP it is just another template: a price (the nodes it takes) and a rate per
class, so the solver picks it per model and class only where it is cheaper than colocated engines.

Placement (never across regions; a template lives in one region):

* one node: x x a + y x b = the node's GPUs; KV moves over the node's NVLink or PCIe;
* one placement group of one instance type: kp nodes of prefill engines and kd nodes of decode
  engines (kp + kd <= ``max_nodes_per_template``), only where the type's network is RDMA (EFA,
  InfiniBand, RoCE: hetinfra.catalog.interconnect); a node's network is shared by its prefill
  engines' transfers, and a bundle whose KV traffic would exceed the nodes' NICs is capped;
* heterogeneous (Splitwise, HexGen-2): kp nodes of type A prefill, kd nodes of type B decode, A and
  B of one cloud with different GPUs and the same RDMA class, offered together in the region (an
  instance type carries one GPU type, so A != B means two instance types); a transfer gets the
  smaller of the two types' bandwidths. Its price is the sum of its nodes', and it takes GPUs from
  both types' availability caps (``TemplateUnit.gpu_use``), as a mixed-GPU pipeline does.

The last two only where the spec's deploy target runs them (``across_nodes_gate``: AWS, by the
Pulumi stack or EKS, with one prefill node on EKS; not SkyPilot, not GCP or Azure, not custom
clouds); the split reason in plan.json names what was not offered and why.

A class is offered only where the transfer fits: prefill + queue + prompt x KV bytes per token /
link bandwidth + the decode engine's first step <= TTFT (hetinfra.perf.disagg). Its rate is
min(x x prefill rate, y x decode rate) x (1 - ``PD_MARGIN``).

``PD_MARGIN`` = 0.10: a bundle is planned at 90% of what the per-phase model gives it, so it wins
only where it serves at least 1/0.9 = 1.11x the colocated capacity per dollar. What the margin
covers: the transfer's constants are partly assumptions (``KV_TRANSFER_LATENCY_S``, the link
efficiency); the prefill engine holds a request's KV blocks until the decode side has read them
(not in the memory model); a second engine kind to run and a second hop at the gateway. 10% is the
low end of the 10-15% proposed in /work/shared/notes/pd-lora.md (section C, a guess there), since
aiconfigurator's measured wins (1.30-1.70x) and losses (0.70-0.75x) are far from 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.interconnect import (ACROSS_NODE_CLOUDS, ACROSS_NODES_REFUSED, KV_TRANSFER_LATENCY_S,
                                          interconnect)
from hetinfra.perf.calibration import calibration_for
from hetinfra.perf.confidence import LEVELS, confidence_detail, rate_interval
from hetinfra.perf.disagg import FIRST_STEP_WAIT, PhaseRate, decode_rate, kv_bytes_per_token, prefill_rate
from hetinfra.plan.inputs import PlanInputs, PlannedModel
from hetinfra.plan.library import Bundle, ModelLibrary, Template

__all__ = ["ACROSS_NODE_CLOUDS", "PD_MARGIN", "PD_SOURCE", "across_nodes_gate", "bundle_json", "bundle_kind", "bundle_ttft_ratio",
           "bundle_templates", "prefill_nodes_max", "split_decision", "with_bundles"]

PD_MARGIN = 0.10
PD_SOURCE = "estimator-v3+pd"
#: the bundle kinds, in the words plan.json's split reasons use
ACROSS = "bundles across nodes"
HETERO = "heterogeneous bundles"


def across_nodes_gate(spec, cloud: str, custom: bool) -> str | None:
    """None where the spec's deploy target runs a bundle whose roles are on separate nodes of one
    placement group on ``cloud`` (same instance type, or a heterogeneous one: two instance types), else
    why not (a plan is a promise of what will run, so the planner offers only what is deployed):

    * a custom cloud (a user's offers CSV): no IaC places its nodes;
    * a cloud not in ``ACROSS_NODE_CLOUDS``: its stack and its managed Kubernetes refuse them;
    * a cloud in ``deploy.skypilot_clouds`` (target vms): a SkyPilot task runs one accelerator type
      and places no two tasks in one placement group;
    * otherwise the AWS Pulumi stack (``target: vms``) or EKS (``target: kubernetes``) runs them;
      on Kubernetes only with one prefill node (:func:`prefill_nodes_max`)."""
    if custom:
        return f"{cloud} is a custom cloud: hetinfra deploys none of its nodes into a placement group"
    if cloud not in ACROSS_NODE_CLOUDS:
        refused = ACROSS_NODES_REFUSED.get(cloud)
        why = None if refused is None else refused.kubernetes if spec.deploy.target == "kubernetes" else refused.pulumi
        return (f"{cloud}: only AWS's targets (the Pulumi stack's cluster placement group with EFA, EKS) place a "
                "bundle's nodes in one placement group over RDMA" + (f" ({why})" if why else ""))
    if spec.deploy.target != "kubernetes" and cloud in spec.deploy.skypilot_clouds:
        return (f"{cloud} is deployed by SkyPilot (deploy.skypilot_clouds): a SkyPilot task runs one accelerator type "
                "and places no two tasks in one placement group")
    return None


def prefill_nodes_max(spec, max_nodes: int) -> int:
    """The most prefill nodes a bundle across nodes may have: on Kubernetes one, since a bundle
    replica is one LeaderWorkerSet group whose leader runs the prefill engines and the hop, and whose
    one worker template runs the decode nodes (hetinfra.compile.kubernetes.bundle_group refuses
    others); on the Pulumi stack any, within ``max_nodes_per_template`` less one decode node."""
    return 1 if spec.deploy.target == "kubernetes" else max_nodes - 1


@dataclass(frozen=True)
class _Node:
    """One node kind a role runs on: instance type, GPU, GPUs per node, and its links."""

    itype: str
    gpu: str
    count: int
    link: object  # hetinfra.catalog.interconnect.Interconnect


def with_bundles(inputs: PlanInputs, pm: PlannedModel, lib: ModelLibrary, tp_options) -> ModelLibrary:
    """``lib`` with ``pm``'s bundles added (a class a bundle serves is served); ``tp_options``: the TP
    degrees of an instance (hetinfra.plan.templates.tp_options, passed in: that module imports this one)."""
    extra = bundle_templates(inputs, pm, tp_options)
    if not extra:
        return lib
    coverage = {c: cov if cov.served or not any(c in t.rates for t in extra) else replace(cov, served=True)
                for c, cov in lib.coverage.items()}
    return ModelLibrary(lib.model, tuple(sorted(lib.templates + tuple(extra), key=lambda t: t.id)), coverage)


def bundle_templates(inputs: PlanInputs, pm: PlannedModel, tp_options) -> list[Template]:
    """Every xPyD bundle of ``pm`` on the instance types on offer, with a rate for each class whose
    transfer fits the TTFT budget (none: no template): on one node; across the nodes of one placement
    group of one RDMA type; heterogeneous (prefill on type A, decode on type B of the same cloud and
    RDMA class, offered together in some region). The last two only where ``across_nodes_gate`` allows."""
    if pm.arch is None:
        return []
    out: list[Template] = []
    memo: dict = {}  # per-phase rates by (phase, gpu, tp, class sizes[, prefill budget])
    max_nodes = inputs.spec.planning.max_nodes_per_template
    custom = {o.cloud for o in inputs.offers if o.custom_cloud}
    regions: dict[tuple[str, str], set[str]] = {}
    for o in inputs.offers:
        regions.setdefault((o.cloud, o.instance_type), set()).add(o.region)
    rdma: dict[str, list[_Node]] = {}
    for cloud, itype, gpu, count in sorted({(o.cloud, o.instance_type, o.gpu, o.gpu_count) for o in inputs.offers}):
        if get_gpu(gpu) is None:
            continue
        node = _Node(itype, gpu, count, interconnect(cloud, itype, gpu))
        tps = tp_options(count, pm.arch.heads, pm.arch.kv_heads)
        for shape in _single_node(count, tps):
            out.append(_bundle(pm, cloud, node, None, shape, 0, 0, memo))
        if node.link.rdma and max_nodes >= 2 and across_nodes_gate(inputs.spec, cloud, cloud in custom) is None:
            rdma.setdefault(cloud, []).append(node)
    for cloud, nodes in sorted(rdma.items()):
        for p in nodes:
            for d in nodes:
                if p == d or (p.gpu != d.gpu and p.link.network == d.link.network
                              and regions[(cloud, p.itype)] & regions[(cloud, d.itype)]):
                    out.extend(_undominated(_across(pm, cloud, p, d, tp_options, max_nodes,
                                                    prefill_nodes_max(inputs.spec, max_nodes), memo)))
    return [t for t in out if t.rates]


def _across(pm: PlannedModel, cloud: str, p: _Node, d: _Node, tp_options, max_nodes: int, kp_max: int, memo: dict):
    """Bundles of kp nodes of prefill engines on ``p`` and kd nodes of decode engines on ``d``
    (kp <= ``kp_max``, kp + kd <= ``max_nodes``); ``p == d``: one instance type."""
    for a in tp_options(p.count, pm.arch.heads, pm.arch.kv_heads):
        for b in tp_options(d.count, pm.arch.heads, pm.arch.kv_heads):
            for kp in range(1, kp_max + 1):
                for kd in range(1, max_nodes - kp + 1):
                    yield _bundle(pm, cloud, p, None if p == d else d, (p.count // a * kp, a, d.count // b * kd, b),
                                  kp, kd, memo)


def _undominated(templates) -> list[Template]:
    """Drop a bundle another of the same nodes (same price, same GPUs) serves at least as fast on every
    class: the many TP pairs of one node pair would otherwise all reach the ILP."""
    groups: dict[tuple, list[Template]] = {}
    for t in templates:
        if t.rates:
            groups.setdefault((t.bundle.prefill_nodes, t.bundle.decode_nodes), []).append(t)
    kept: list[Template] = []
    for group in groups.values():
        for t in group:
            if not any(v is not t and all(v.rates.get(w, 0.0) >= r for w, r in t.rates.items())
                       and (v.rates != t.rates or v.id < t.id) for v in group):
                kept.append(t)
    return kept


def _single_node(gpus: int, tps: list[int]):
    """(x, a, y, b) with x a + y b = gpus, x, y >= 1."""
    for a in tps:
        for b in tps:
            for x in range(1, gpus // a + 1):
                rest = gpus - x * a
                if rest > 0 and rest % b == 0:
                    yield (x, a, rest // b, b)


def _decode(pm: PlannedModel, gpu: str, tp: int, cls, memo: dict) -> PhaseRate:
    key = ("d", gpu, tp, cls.input_tokens, cls.output_tokens)
    if key not in memo:
        memo[key] = decode_rate(pm.arch, get_gpu(gpu), tp=tp, input_tokens=cls.input_tokens,
                                output_tokens=cls.output_tokens, tpot_ms=pm.ctx.tpot_ms, precision=pm.ctx.precision,
                                calib=calibration_for(pm.ctx.vllm_version))
    return memo[key]


def _prefill(pm: PlannedModel, gpu: str, tp: int, cls, budget_ms: float, memo: dict) -> PhaseRate:
    key = ("p", gpu, tp, cls.input_tokens, round(budget_ms, 9))
    if key not in memo:
        memo[key] = prefill_rate(pm.arch, get_gpu(gpu), tp=tp, input_tokens=cls.input_tokens, budget_ms=budget_ms,
                                 precision=pm.ctx.precision, calib=calibration_for(pm.ctx.vllm_version))
    return memo[key]


def _bundle(pm: PlannedModel, cloud: str, p: _Node, d: _Node | None, shape: tuple[int, int, int, int],
            kp: int, kd: int, memo: dict) -> Template:
    """One bundle: x prefill engines of TP a on ``p`` and y decode engines of TP b on ``d`` (None: on
    ``p`` too); on one node (kp = kd = 0: KV over its NVLink or PCIe) or kp + kd nodes of one placement
    group (KV over the network; a heterogeneous pair gets the smaller of the two types' bandwidths)."""
    x, a, y, b = shape
    dec_node = d or p
    kvb = kv_bytes_per_token(pm.arch)
    link_bytes_s, link = _link(p, dec_node, a, kp)
    rates, sources, transfer_ms = {}, {}, {}
    trust = None
    for cls in pm.classes:
        got = _class_rate(pm, p, dec_node, shape, (kp, kd), cls, pm.ctx.ttft_ms, memo)
        if got is None:
            continue
        rate, dec, t_s = got
        rates[cls.name] = rate * (1.0 - PD_MARGIN)
        sources[cls.name] = PD_SOURCE
        transfer_ms[cls.name] = t_s * 1e3
        batch = dec.rps * cls.output_tokens * dec.latency_ms * 1e-3  # decode sequences in flight (Little)
        roles = [(dec_node.gpu, b, batch)] + ([(p.gpu, a, 1.0)] if d is not None else [])  # hetero: A's prefill too
        for gpu, tp, seqs in roles:
            conf = confidence_detail(gpu, tp, 1, seqs, vllm_version=pm.ctx.vllm_version)
            ri = rate_interval(conf)
            if trust is None or (-LEVELS.index(conf.level), ri.low) < (-LEVELS.index(trust[0]), trust[2][0]):
                trust = (conf.level, conf.reason, (ri.low, ri.middle, ri.high), ri.basis)
    nodes = 1 if not kp else kp + kd
    itype = p.itype if d is None else f"{p.itype}+{d.itype}"
    tid = f"{pm.spec.name}|{cloud}|{itype}|pd{x}xtp{a}+{y}xtp{b}" + (f"|n{kp}+{kd}" if kp else "")
    bundle = Bundle(prefill_engines=x, prefill_tp=a, decode_engines=y, decode_tp=b, prefill_nodes=kp,
                    decode_nodes=kd, link=link, kv_bytes_per_token=kvb, link_bytes_s=link_bytes_s, transfer_ms=transfer_ms,
                    decode_instance_type=d and d.itype, decode_gpu=d and d.gpu, decode_gpus_per_node=d and d.count)
    return Template(tid, pm.spec.name, cloud, p.itype, p.gpu, p.count, b, 1, y, rates, sources, None,
                    confidence=trust[:2] if trust else None, node_count=nodes,
                    interval=trust[2] if trust else None, interval_basis=trust[3] if trust else None, bundle=bundle)


def _link(p: _Node, dec_node: _Node, a: int, kp: int) -> tuple[float, str]:
    """(bytes/s one KV transfer gets, the link's name): across nodes a node's prefill engines share its
    NICs and a transfer runs at the slower end's share; in one node its NVLink or PCIe."""
    if kp:
        return min(p.link.network_bytes_s(), dec_node.link.network_bytes_s()) / (p.count // a), p.link.network
    return p.link.node_link_bytes_s(p.gpu), "nvlink" if p.link.nvlink else "pcie"


def _class_rate(pm: PlannedModel, p: _Node, dec_node: _Node, shape: tuple[int, int, int, int],
                nodes: tuple[int, int], cls, ttft_ms: float, memo: dict) -> tuple[float, PhaseRate, float] | None:
    """(req/s of class ``cls`` one bundle serves before the margin, its decode phase, its KV transfer's
    seconds) at a TTFT of ``ttft_ms``; None where it cannot serve the class. The template's rates are at the model's TTFT;
    an origin's flow is rated at what the round trip leaves of it (hetinfra.plan.origins)."""
    x, a, y, b = shape
    kp, kd = nodes
    kvb = kv_bytes_per_token(pm.arch)
    t_s = KV_TRANSFER_LATENCY_S + cls.input_tokens * kvb / _link(p, dec_node, a, kp)[0]
    dec = _decode(pm, dec_node.gpu, b, cls, memo)
    if not dec.feasible:
        return None
    # what TTFT leaves the prefill engine: the transfer and the decode engine's first step go first
    pre = _prefill(pm, p.gpu, a, cls, ttft_ms - t_s * 1e3 - FIRST_STEP_WAIT * dec.latency_ms, memo)
    if not pre.feasible:
        return None
    rate = min(x * pre.rps, y * dec.rps)
    if kp:  # the prefill nodes' NICs send, and the decode nodes' receive, every prompt's KV
        send, receive = p.link.network_bytes_s(), dec_node.link.network_bytes_s()
        rate = min(rate, min(kp * send, kd * receive) / (cls.input_tokens * kvb))
    return rate, dec, t_s


def bundle_ttft_ratio(pm: PlannedModel, t: Template, cls, ttft_ms: float, memo: dict) -> float:
    """The req/s bundle template ``t`` serves of class ``cls`` at a TTFT of ``ttft_ms`` (an origin's
    round trip taken out of the model's) against its rate at the model's TTFT, in [0, 1]. A bundle's
    TTFT is its prefill, queue, transfer and first decode step: it is rated as a bundle here, never
    as a colocated engine of its decode TP (whose estimate also refused a bundle across nodes)."""
    bd = t.bundle
    p = _Node(t.instance_type, t.gpu, t.gpus_per_instance, interconnect(t.cloud, t.instance_type, t.gpu))
    d = p if bd.decode_instance_type is None else _Node(
        bd.decode_instance_type, bd.decode_gpu, bd.decode_gpus_per_node,
        interconnect(t.cloud, bd.decode_instance_type, bd.decode_gpu))
    shape = (bd.prefill_engines, bd.prefill_tp, bd.decode_engines, bd.decode_tp)
    nodes = (bd.prefill_nodes, bd.decode_nodes)
    full = _class_rate(pm, p, d, shape, nodes, cls, pm.ctx.ttft_ms, memo)
    tight = _class_rate(pm, p, d, shape, nodes, cls, ttft_ms, memo)
    if full is None or tight is None or full[0] <= 0:
        return 0.0
    return min(1.0, tight[0] / full[0])


def bundle_json(b: Bundle, gpus_per_node: int, node_prices: tuple[float, ...] | None = None) -> dict:
    """plan.json ``allocations[].disaggregation`` (hetinfra.document.allocation.Disaggregation). A
    heterogeneous bundle's decode role names its instance type, GPU and GPUs per node; both its roles
    state their price per node (``node_prices``: prefill nodes' first, the unit's ``stage_prices``), since
    the allocation's ``price_per_instance_usd_per_hour`` is the mean over the replica's nodes, as a
    mixed pipeline's is (so cost = that price x instances everywhere)."""
    roles = [{"role": "prefill", "engines": b.prefill_engines, "tp": b.prefill_tp, "nodes": b.prefill_nodes},
             {"role": "decode", "engines": b.decode_engines, "tp": b.decode_tp, "nodes": b.decode_nodes}]
    if b.heterogeneous:
        roles[1].update(instance_type=b.decode_instance_type, gpu=b.decode_gpu, gpus_per_node=b.decode_gpus_per_node)
        if node_prices:
            roles[0]["price_per_node_usd_per_hour"] = round(node_prices[0], 4)
            roles[1]["price_per_node_usd_per_hour"] = round(node_prices[-1], 4)
    return {"xpyd": b.ratio, "link": b.link, "link_gbytes_s": round(b.link_bytes_s / 1e9, 6), "kv_bytes_per_token": b.kv_bytes_per_token,
            "roles": roles, "classes": [{"name": c, "transfer_ms": round(ms, 6)} for c, ms in sorted(b.transfer_ms.items())]}


def bundle_kind(t: Template) -> str:
    """``colocated``, ``one node``, ``across nodes`` (one instance type) or ``heterogeneous``."""
    b = t.bundle
    return "colocated" if b is None else "heterogeneous" if b.heterogeneous else "across nodes" if b.across_nodes \
        else "one node"


def split_decision(pm: PlannedModel, units, chosen, derate: dict[str, float] | None = None, spec=None) -> dict:
    """plan.json ``models[].disaggregation``: whether ``pm`` is split (a chosen unit is a bundle) and
    why, from the best $/h per req/s of a bundle and of colocated engines on its largest class
    (most prompt tokens), at the rates the plan used: a bundle's less ``PD_MARGIN``, and each
    template's ``derate`` (template id -> factor: what verification by simulation found). Then each
    bundle kind's best edge over colocated engines, and (with ``spec``) the kinds not offered and why."""
    derate = derate or {}
    name = pm.spec.name
    split = any(u.model == name and u.template.bundle is not None for u in chosen)
    cls = max(pm.classes, key=lambda c: (c.input_tokens, c.output_tokens, c.name)).name
    best: dict[str, tuple[float, str]] = {}
    for u in units:
        rate = u.template.rates.get(cls, 0.0) * derate.get(u.template.id, 1.0) if u.model == name else 0.0
        if rate > 0.0:
            kind = bundle_kind(u.template)
            cand = (u.cost / rate, u.template.id)
            if kind not in best or cand < best[kind]:
                best[kind] = cand
    bundles = {k: v for k, v in best.items() if k != "colocated"}
    need = f"a bundle must serve {1 / (1 - PD_MARGIN):.2f}x the colocated req/s per $ (margin {PD_MARGIN:.0%})"
    if not bundles:
        why = f"no bundle serves class {cls}: the KV transfer, prefill and first decode step do not fit TTFT " \
              f"{pm.ctx.ttft_ms:g} ms, or no decode engine meets TPOT {pm.ctx.tpot_ms:g} ms"
    elif "colocated" not in best:
        cb, tb = min(bundles.values())
        why = f"only bundles serve class {cls} (best {tb}, ${cb:.3f}/h per req/s)"
    else:
        (cb, tb), (cc, tc) = min(bundles.values()), best["colocated"]
        raw = cc / cb / (1 - PD_MARGIN)  # the bundle's edge before the margin
        # only where a factor moved a compared rate: a re-plan against an unverified state carries
        # factors of 1.0 for every template, and nothing was simulated then
        basis = " (rates as verified by simulation)" if {derate.get(tb, 1.0), derate.get(tc, 1.0)} != {1.0} else ""
        why = (f"class {cls}{basis}: best bundle {tb} ${cb:.3f}/h per req/s (after the margin), best colocated {tc} "
               f"${cc:.3f}/h per req/s: the bundle serves {raw:.2f}x the req/s per $ before the margin; {need}")
    return {"split": split, "reason": why + _by_kind(best, units, name, spec) + _planned(best, chosen, name)}


def _planned(best: dict[str, tuple[float, str]], chosen, model: str) -> str:
    """The bundles the allocation chose where the comparison's best is not among them: the ILP serves
    every class at whole replicas, the comparison one class per req/s, so a held-out spec's summary
    named pd4xtp1+2xtp2 while pd4xtp1+4xtp1 was deployed, and read as a contradiction."""
    planned = sorted({u.template.id for u in chosen if u.model == model and u.template.bundle is not None})
    compared = {tid for kind, (_c, tid) in best.items() if kind != "colocated"}
    if not planned or compared & set(planned):
        return ""
    return (f"; planned: {', '.join(planned)} (the allocation serves every class at whole replicas; the comparison "
            "is per req/s of the largest class)")


#: what a bundle kind needs besides a deploy target that runs it (``across_nodes_gate``)
_NEEDS = {"across nodes": " (needs an RDMA instance type: EFA, InfiniBand or RoCE, and max_nodes_per_template >= 2)",
          "heterogeneous": " (needs two GPU types on instance types of one RDMA class sold in one region)"}


def _by_kind(best: dict[str, tuple[float, str]], units, model: str, spec) -> str:
    """Each bundle kind's best edge over colocated engines (req/s per $ before the margin), or that none
    fits; and the kinds the deploy target does not run (``across_nodes_gate``)."""
    gated = sorted({why for u in units if u.model == model
                    for why in [across_nodes_gate(spec, u.template.cloud, u.custom_cloud)] if why}) if spec else []
    offered = {bundle_kind(u.template) for u in units if u.model == model}
    parts = []
    for kind in ("one node", "across nodes", "heterogeneous"):
        if kind not in best:
            needs = "" if gated else _NEEDS.get(kind, "")
            parts.append(f"{kind}: {'none serves it' if kind in offered else 'none on offer' + needs}")
        elif "colocated" in best:
            parts.append(f"{kind}: {best['colocated'][0] / best[kind][0] / (1 - PD_MARGIN):.2f}x ({best[kind][1]})")
    return f"; by kind: {', '.join(parts)}" + (f"; {ACROSS} and {HETERO} not offered where {'; '.join(gated)}"
                                                if gated else "")
