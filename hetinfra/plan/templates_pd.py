"""xPyD bundles: prefill/decode disaggregation as templates of the one formulation (issue 37, point 3).

A bundle is x prefill engines (TP a) and y decode engines (TP b) that serve a model together: a
request is prefilled on a prefill engine, its prompt's KV moves to a decode engine, which emits every
output token. To the ILP it is just another template: a price (the nodes it takes) and a rate per
class, so the solver picks it per model and class only where it is cheaper than colocated engines.

Placement (never across regions; a template lives in one region):

* one node: x x a + y x b = the node's GPUs; KV moves over the node's NVLink or PCIe;
* one placement group of the same instance type (not offered while no target deploys it: ``ACROSS_NODES``): kp nodes of prefill engines and kd nodes of decode
  engines (kp + kd <= ``max_nodes_per_template``), only where the type's network is RDMA (EFA,
  InfiniBand, RoCE: hetinfra.catalog.interconnect); the node's network is shared by its prefill
  engines' transfers, and a bundle whose KV traffic would exceed it is capped.

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

from dataclasses import dataclass

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.interconnect import KV_TRANSFER_LATENCY_S, interconnect
from hetinfra.perf.calibration import calibration_for
from hetinfra.perf.confidence import LEVELS, confidence_detail, rate_interval
from hetinfra.perf.disagg import FIRST_STEP_WAIT, PhaseRate, decode_rate, kv_bytes_per_token, prefill_rate
from hetinfra.plan.inputs import PlanInputs, PlannedModel
from hetinfra.plan.library import Bundle, ClassCoverage, ModelLibrary, Template

__all__ = ["PD_MARGIN", "PD_SOURCE", "bundle_json", "bundle_templates", "split_decision", "with_bundles"]

PD_MARGIN = 0.10
#: whether plans may hold bundles across nodes: not while no target deploys them (hetinfra.compile.bundle
#: runs a bundle on one node; placing the roles' nodes in one placement group and telling the hop every
#: node's address is not built), since a plan is a promise of what will run. The rates are computed and
#: tested (``across_nodes=True``) for when one does.
ACROSS_NODES = False
PD_SOURCE = "estimator-v3+pd"


@dataclass(frozen=True)
class _Phases:
    """One class's per-engine rates on one GPU at each TP: prefill (at the TTFT left after the
    transfer and the decode engine's first step) and decode."""

    prefill: dict[int, PhaseRate]
    decode: dict[int, PhaseRate]


def with_bundles(inputs: PlanInputs, pm: PlannedModel, lib: ModelLibrary, tp_options) -> ModelLibrary:
    """``lib`` with ``pm``'s bundles added (a class a bundle serves is served); ``tp_options``: the TP
    degrees of an instance (hetinfra.plan.templates.tp_options, passed in: that module imports this one)."""
    extra = bundle_templates(inputs, pm, tp_options)
    if not extra:
        return lib
    coverage = {c: cov if cov.served or not any(c in t.rates for t in extra) else ClassCoverage(True, cov.best_tpot_floor,
                                                                                               cov.reasons)
                for c, cov in lib.coverage.items()}
    return ModelLibrary(lib.model, tuple(sorted(lib.templates + tuple(extra), key=lambda t: t.id)), coverage)


def bundle_templates(inputs: PlanInputs, pm: PlannedModel, tp_options) -> list[Template]:
    """Every xPyD bundle of ``pm`` on the instance types on offer, with a rate for each class whose
    transfer fits the TTFT budget (none: no template); bundles across nodes only with ``ACROSS_NODES``."""
    if pm.arch is None:
        return []
    out: list[Template] = []
    memo: dict = {}  # per-phase rates by (phase, gpu, tp, class sizes[, prefill budget])
    max_nodes = inputs.spec.planning.max_nodes_per_template
    for cloud, itype, gpu, count in sorted({(o.cloud, o.instance_type, o.gpu, o.gpu_count) for o in inputs.offers}):
        spec = get_gpu(gpu)
        if spec is None:
            continue
        link = interconnect(cloud, itype, gpu)
        tps = tp_options(count, pm.arch.heads)
        for shape in _single_node(count, tps):
            out.append(_bundle(pm, cloud, itype, gpu, count, shape, 0, 0, link.node_link_bytes_s(gpu),
                               "nvlink" if link.nvlink else "pcie", memo))
        if ACROSS_NODES and link.rdma and max_nodes >= 2:
            for a in tps:
                for b in tps:
                    for kp in range(1, max_nodes):
                        for kd in range(1, max_nodes - kp + 1):
                            shape = (count // a * kp, a, count // b * kd, b)
                            share = link.network_bytes_s() / (count // a)  # the node's P engines share its NICs
                            out.append(_bundle(pm, cloud, itype, gpu, count, shape, kp, kd, share, link.network, memo,
                                               node_bytes_s=link.network_bytes_s()))
    return [t for t in out if t.rates]


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


def _bundle(pm: PlannedModel, cloud: str, itype: str, gpu: str, count: int, shape: tuple[int, int, int, int],
            kp: int, kd: int, link_bytes_s: float, link: str, memo: dict, node_bytes_s: float | None = None) -> Template:
    x, a, y, b = shape
    kvb = kv_bytes_per_token(pm.arch)
    rates, sources, transfer_ms = {}, {}, {}
    trust = None
    for cls in pm.classes:
        t_s = KV_TRANSFER_LATENCY_S + cls.input_tokens * kvb / link_bytes_s
        dec = _decode(pm, gpu, b, cls, memo)
        if not dec.feasible:
            continue
        # what TTFT leaves the prefill engine: the transfer and the decode engine's first step go first
        pre = _prefill(pm, gpu, a, cls, pm.ctx.ttft_ms - t_s * 1e3 - FIRST_STEP_WAIT * dec.latency_ms, memo)
        if not pre.feasible:
            continue
        rate = min(x * pre.rps, y * dec.rps)
        if node_bytes_s:  # the prefill nodes' NICs carry every prompt's KV
            rate = min(rate, kp * node_bytes_s / (cls.input_tokens * kvb))
        rates[cls.name] = rate * (1.0 - PD_MARGIN)
        sources[cls.name] = PD_SOURCE
        transfer_ms[cls.name] = t_s * 1e3
        batch = dec.rps * cls.output_tokens * dec.latency_ms * 1e-3  # decode sequences in flight (Little)
        conf = confidence_detail(gpu, b, 1, batch, vllm_version=pm.ctx.vllm_version)
        ri = rate_interval(conf)
        if trust is None or (-LEVELS.index(conf.level), ri.low) < (-LEVELS.index(trust[0]), trust[2][0]):
            trust = (conf.level, conf.reason, (ri.low, ri.middle, ri.high), ri.basis)
    nodes = 1 if not kp else kp + kd
    tid = f"{pm.spec.name}|{cloud}|{itype}|pd{x}xtp{a}+{y}xtp{b}" + (f"|n{kp}+{kd}" if kp else "")
    bundle = Bundle(prefill_engines=x, prefill_tp=a, decode_engines=y, decode_tp=b, prefill_nodes=kp,
                    decode_nodes=kd, link=link, kv_bytes_per_token=kvb, link_bytes_s=link_bytes_s, transfer_ms=transfer_ms)
    return Template(tid, pm.spec.name, cloud, itype, gpu, count, b, 1, y, rates, sources, None,
                    confidence=trust[:2] if trust else None, node_count=nodes,
                    interval=trust[2] if trust else None, interval_basis=trust[3] if trust else None, bundle=bundle)


def bundle_json(b: Bundle) -> dict:
    """plan.json ``allocations[].disaggregation`` (hetinfra.document.allocation.Disaggregation)."""
    return {"xpyd": b.ratio, "link": b.link, "link_gbytes_s": round(b.link_bytes_s / 1e9, 6), "kv_bytes_per_token": b.kv_bytes_per_token,
            "roles": [{"role": "prefill", "engines": b.prefill_engines, "tp": b.prefill_tp, "nodes": b.prefill_nodes},
                      {"role": "decode", "engines": b.decode_engines, "tp": b.decode_tp, "nodes": b.decode_nodes}],
            "classes": [{"name": c, "transfer_ms": round(ms, 6)} for c, ms in sorted(b.transfer_ms.items())]}


def split_decision(pm: PlannedModel, units, chosen, derate: dict[str, float] | None = None) -> dict:
    """plan.json ``models[].disaggregation``: whether ``pm`` is split (a chosen unit is a bundle) and
    why, from the best $/h per req/s of a bundle and of colocated engines on its largest class
    (most prompt tokens), at the rates the plan used: a bundle's less ``PD_MARGIN``, and each
    template's ``derate`` (template id -> factor: what verification by simulation found)."""
    derate = derate or {}
    name = pm.spec.name
    split = any(u.model == name and u.template.bundle is not None for u in chosen)
    cls = max(pm.classes, key=lambda c: (c.input_tokens, c.output_tokens, c.name)).name
    best: dict[bool, tuple[float, str]] = {}
    for u in units:
        rate = u.template.rates.get(cls, 0.0) * derate.get(u.template.id, 1.0) if u.model == name else 0.0
        if rate > 0.0:
            kind = u.template.bundle is not None
            cand = (u.cost / rate, u.template.id)
            if kind not in best or cand < best[kind]:
                best[kind] = cand
    need = f"a bundle must serve {1 / (1 - PD_MARGIN):.2f}x the colocated req/s per $ (margin {PD_MARGIN:.0%})"
    if True not in best:
        why = f"no bundle serves class {cls}: the KV transfer, prefill and first decode step do not fit TTFT " \
              f"{pm.ctx.ttft_ms:g} ms, or no decode engine meets TPOT {pm.ctx.tpot_ms:g} ms"
    elif False not in best:
        why = f"only bundles serve class {cls} (best {best[True][1]}, ${best[True][0]:.3f}/h per req/s)"
    else:
        (cb, tb), (cc, tc) = best[True], best[False]
        raw = cc / cb / (1 - PD_MARGIN)  # the bundle's edge before the margin
        basis = " (rates as verified by simulation)" if derate else ""
        why = (f"class {cls}{basis}: best bundle {tb} ${cb:.3f}/h per req/s (after the margin), best colocated {tc} "
               f"${cc:.3f}/h per req/s: the bundle serves {raw:.2f}x the req/s per $ before the margin; {need}")
    return {"split": split, "reason": why}
