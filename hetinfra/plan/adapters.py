"""LoRA adapters in the allocation problem: their demand keys, the slot tiers of a unit, how many
instances must hold each, and which instance holds which adapter once the ILP has chosen.

* **Demand.** Adapter ``a`` of base ``m`` with ``share: f`` takes ``f x lambda[m,w]`` of each class
  ``w`` into its own key ``(m, "w~a")`` (the base keeps the rest); with ``rate_rps: r`` it adds
  ``r x share[w]`` of each class. Its requests have the base's sizes.
* **Tiers.** A unit of the base comes in slot tiers: 0 slots (the base engine, no derate) and
  ``k`` slots at the base's slot rank, each instance ``k`` adapters, its rates the LoRA engine's
  (:func:`hetinfra.perf.lora.lora_estimate`: slot memory out of the KV cache, every step m(k) slower).
  The ILP (``solver.rows.add_adapter_*``) picks the tiers and which adapters each holds, so it
  trades slot memory and slowdown against more replicas.
* **Holding.** A unit holds an adapter on every instance (one service, one ``--lora-modules`` list)
  and at most ``slots`` adapters (``x[u,a]`` binary: no adapter beyond the GPU slots, whose swaps
  starve vLLM's LoRA admission); each adapter with demand is held by at least one unit, and its
  requests go only to holders. A hot adapter's holder gets the instances its rate needs.
* **The planner** (``hetinfra.plan.planner``) makes two calls here: :func:`with_adapters` once its
  units are built (the adapters' classes join their base's, the units' tiers join the pool) and
  :func:`adapter_problem` on every allocation problem it builds (slots on the solver's units, the
  adapters to place). Everything after (pruning, verification's rounds, plan.json) sees ordinary
  classes and units: a tier is a template whose ``lora`` says its slots, memory and derate.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from hetinfra.errors import InvalidInputError
from hetinfra.solver.problem import AdapterHold, SolverUnit
from hetinfra.spec.adapters import adapter_of, slot_rank  # adapter_of: re-exported

__all__ = ["ADAPTER_KEY_SEP", "SLOT_TIERS", "adapter_demand", "adapter_holds", "adapter_of", "adapter_problem",
           "adapter_summary", "adapter_triggers", "base_unit_id", "fold_adapters", "slot_tiers", "unit_adapters_json",
           "with_adapter_shares", "with_adapters", "with_running_holds"]

from hetinfra.spec.adapters import ADAPTER_KEY_SEP  # joins a class and an adapter: "chat~sql"
#: the slot counts (vLLM --max-loras) a unit's tiers offer
SLOT_TIERS = (1, 2, 4, 8, 16, 32, 64)


def adapter_demand(model: str, classes: dict[str, float], adapters) -> tuple[dict, dict[str, tuple]]:
    """(demand keys -> req/s, adapter -> its keys) of one base model whose class rates are ``classes``
    and whose adapters (spec entries: name, demand.share | demand.rate_rps) are ``adapters``."""
    total = sum(classes.values())
    demand = dict.fromkeys(((model, w) for w in classes), 0.0)
    keys: dict[str, tuple] = {}
    base_left = max(0.0, 1.0 - sum(a.demand.share or 0.0 for a in adapters))
    for w, lam in classes.items():
        demand[(model, w)] = lam * base_left
    for a in adapters:
        keys[a.name] = tuple((model, f"{w}{ADAPTER_KEY_SEP}{a.name}") for w in classes)
        for w, lam in classes.items():
            rate = lam * a.demand.share if a.demand.share else a.demand.rate_rps * lam / total
            demand[(model, f"{w}{ADAPTER_KEY_SEP}{a.name}")] = rate
    return {k: v for k, v in demand.items() if v > 1e-12}, keys


def adapter_holds(model: str, adapters, keys: dict[str, tuple], demand: dict) -> tuple:
    """The problem's :class:`AdapterHold` entries of one base model (residency from ``regions``; the slot
    rank each needs: vLLM's smallest --max-lora-rank at or above its rank), covered by one unit
    anywhere until hetinfra.plan.adapter_cover sets its areas and copies."""
    out = []
    for a in adapters:
        rate = sum(demand.get(k, 0.0) for k in keys[a.name])
        if rate <= 0:
            continue
        out.append(AdapterHold(a.name, model, keys[a.name], tuple(a.regions or ()), (((), 1),), slot_rank(a.rank)))
    return tuple(out)


def slot_tiers(adapters: int) -> tuple[int, ...]:
    """The slot tiers worth offering a base with ``adapters`` adapters: up to the first holding them all."""
    out = []
    for k in SLOT_TIERS:
        out.append(k)
        if k >= adapters:
            break
    return tuple(out)


def with_adapters(inputs, units: list, locate) -> tuple:
    """(inputs, units) with the spec's adapters planned: each base's classes split into the base's
    share and one class per adapter (:func:`split_classes`), and every plain unit of a base offered in
    its slot tiers (:func:`tier_units`). Without adapters: both unchanged. Exit 2 where a base has no
    known architecture (the slot memory comes from it)."""
    from hetinfra.spec.adapters import adapters_of

    spec = inputs.spec
    if not spec.adapters:
        return inputs, units
    models, extra = [], []
    for pm in inputs.models:
        mine = adapters_of(spec, pm.spec.name)
        if not mine:
            models.append(pm)
            continue
        if pm.arch is None:
            i = next(i for i, a in enumerate(spec.adapters) if a.base == pm.spec.name)
            raise InvalidInputError(f"{locate('adapters', i, 'base')}: base {pm.spec.name!r} has no known architecture, "
                                    "and an adapter slot's memory comes from it",
                                    hint="give the model an `architecture:` or a catalog model")
        models.append(split_classes(pm, mine))
        extra += tier_units(pm, [u for u in units if u.model == pm.spec.name], mine, spec.planning.adapter_placement)
    check_holders(spec, extra, locate)
    return dc_replace(inputs, models=tuple(models)), units + extra


def check_holders(spec, tier_units_: list, locate) -> None:
    """Exit 3 for an adapter no unit may hold: its residency ``regions`` (or its rank) leave it no
    slot tier of its base among the offers, named at the adapter's line."""
    from hetinfra.errors import InfeasibleError

    for i, a in enumerate(spec.adapters):
        if any(u.model == a.base and u.template.lora.rank >= slot_rank(a.rank)
               and (not a.regions or u.region in a.regions) for u in tier_units_):
            continue
        where = f"in {', '.join(a.regions)}" if a.regions else "in any allowed region"
        base = next(m for m in spec.models if m.name == a.base)
        raise InfeasibleError(f"{locate('adapters', i)}: adapter {a.name!r}: no offer {where} can serve its base "
                              f"{a.base!r} with adapter slots within its objective (TTFT {base.slo.ttft_ms:g} ms, TPOT "
                              f"{base.slo.tpot_ms:g} ms: a LoRA engine's steps are slower) and memory; no unit may "
                              "hold it",
                              hint="loosen the base's `slo`, widen the adapter's `regions`, or allow GPUs offered there")


def split_classes(pm, adapters):
    """``pm`` with each class ``w`` split into the base's part and ``w~a`` per adapter (rates as
    :func:`adapter_demand` gives them, shares of the new total); a base class left at no demand (the
    shares sum to 1) goes. ``rate_rps`` adapters add to the model's ``demand.rate_rps``."""
    from hetinfra.spec.demand import RequestClass

    demand, _ = adapter_demand(pm.spec.name, {c.name: c.rate_rps for c in pm.classes}, adapters)
    size = {c.name: c for c in pm.classes}
    total = sum(demand.values())
    classes = tuple(RequestClass(w, size[w.split(ADAPTER_KEY_SEP, 1)[0]].input_tokens,
                                 size[w.split(ADAPTER_KEY_SEP, 1)[0]].output_tokens, rate / total, rate)
                    for (_, w), rate in demand.items())
    added = sum(a.demand.rate_rps or 0.0 for a in adapters)
    model_spec = pm.spec
    if added:
        model_spec = pm.spec.model_copy(update={"demand": pm.spec.demand.model_copy(
            update={"rate_rps": pm.spec.demand.rate_rps + added})})
    return dc_replace(pm, spec=model_spec, classes=classes)


def tiers_for(adapters, placement: str) -> tuple[int, ...]:
    """The slot tiers a base's units are offered in: every :func:`slot_tiers` (``placed``), or only the
    first holding all its adapters (``planning.adapter_placement: everywhere``: holding is free within
    a unit's slots, so that tier's cheapest plan costs what holding all on every replica costs, and
    plan.json lists them all on each unit)."""
    tiers = slot_tiers(len(adapters))
    return tiers[-1:] if placement == "everywhere" else tiers


def rank_tiers(adapters, ranks: list[int], placement: str) -> list[tuple[int, int]]:
    """(slots, slot rank) of each tier: per slot rank among the adapters', the slot tiers up to the
    adapters it may hold (rank-aware placement: a unit of low-rank adapters pays no high rank's padding
    and derate, vllm PR #22782); ``everywhere``: one tier at the highest rank holding them all."""
    if placement == "everywhere":
        return [(tiers_for(adapters, placement)[0], ranks[-1])]
    return [(k, r) for r in ranks for k in slot_tiers(sum(1 for a in adapters if slot_rank(a.rank) <= r))]


def tier_units(pm, units: list, adapters, placement: str = "placed") -> list:
    """Every plain unit of ``pm`` (one checkpoint, colocated, one GPU type) in each slot tier: its
    template's rates x the LoRA engine's over the base engine's (:func:`tier_factor`, per class, so a
    profiled template keeps its measurement and pays the estimated LoRA price) for its classes and
    each adapter's, ``lora`` its cost. A tier whose slots leave no room for the KV cache is left out."""
    from hetinfra.catalog.gpus import GPUS
    from hetinfra.perf.lora import lora_cost

    ranks = sorted({slot_rank(a.rank) for a in adapters})
    sizes = {c.name: (c.input_tokens, c.output_tokens) for c in pm.classes}
    tiers: dict[tuple[str, int, int], object] = {}  # (template id, slots, rank) -> tier template (None: infeasible)
    out = []
    for u in units:
        t = u.template
        if t.mixed or t.bundle is not None or t.variant is not None or t.lora is not None or t.gpu not in GPUS:
            continue
        for k, rank in rank_tiers(adapters, ranks, placement):
            key = (t.id, k, rank)
            if key not in tiers:
                rates = {}
                for w, r in t.rates.items():
                    f = tier_factor(pm, GPUS[t.gpu], t.tp, t.pp, sizes[w] if w in sizes else None, k, rank)
                    if f > 0:
                        rates[w] = r * f
                rates.update({f"{w}{ADAPTER_KEY_SEP}{a.name}": rates[w] for a in adapters for w in list(rates)
                              if ADAPTER_KEY_SEP not in w and slot_rank(a.rank) <= rank})
                tag = f"+lora{k}" + (f"r{rank}" if len(ranks) > 1 else "")  # one rank: the plain tier name
                tiers[key] = dc_replace(t, id=f"{t.id}{tag}", rates=rates,
                                        sources={w: f"lora x {t.sources.get(w.split(ADAPTER_KEY_SEP, 1)[0], '?')}"
                                                 for w in rates},
                                        lora=lora_cost(pm.arch, t.gpu, k, rank, t.tp, t.pp)) if rates else None
            lt = tiers[key]
            if lt is None:
                continue
            tail = u.id[len(t.id):]  # "|<region>|<purchase>"
            unit = u.with_template(lt)
            object.__setattr__(unit, "id", f"{lt.id}{tail}")  # a fresh copy: its own id
            out.append(unit)
    return out


def base_unit_id(unit_id: str) -> str:
    """The unit a LoRA tier unit was made from (:func:`tier_units`: ``<template>+lora<k>[r<rank>]|region|
    purchase``, the tag written there), or ``unit_id`` itself: tiers are made and pruned per solve, so
    a running tier is known by its base unit."""
    import re

    return re.sub(r"\+lora[0-9]+(?:r[0-9]+)?(?=\|)", "", unit_id)


def tier_factor(pm, gpu, tp: int, pp: int, size, slots: int, rank: int) -> float:
    """The LoRA engine's rate over the base engine's for requests of ``size`` (input, output) under
    the model's objectives (hetinfra.perf.lora.lora_estimate: slot memory out of the KV cache, every
    step m times slower); 0 where the LoRA engine cannot meet them."""
    from hetinfra.perf.lora import lora_estimate

    if size is None:
        return 0.0
    kw = dict(tp=tp, pp=pp, input_tokens=size[0], output_tokens=size[1], ttft_ms=pm.ctx.ttft_ms,
              tpot_ms=pm.ctx.tpot_ms, rank=rank, precision=pm.ctx.precision)
    base = lora_estimate(pm.arch, gpu, slots=0, **kw)
    lora = lora_estimate(pm.arch, gpu, slots=slots, **kw)
    if not (base.feasible and lora.feasible) or base.max_rps <= 0:
        return 0.0
    return min(1.0, lora.max_rps / base.max_rps)


def adapter_problem(inputs, units: list, problem):
    """``problem`` (the planner's, over ``units``) with each solver unit's slots and the spec's adapters
    to place (:func:`adapter_holds`: residency, the slot rank; held by one unit anywhere, per origin
    area where the base declares origins: hetinfra.plan.adapter_cover). Unchanged without adapters."""
    from hetinfra.spec.adapters import adapters_of

    if not inputs.spec.adapters:
        return problem
    lora = {u.id: u.template.lora for u in units}
    solver_units = tuple(dc_replace(su, slots=lora[su.id].slots, lora_rank=lora[su.id].rank) if lora.get(su.id) else su
                         for su in problem.units)
    holds = []
    for pm in inputs.models:
        mine = adapters_of(inputs.spec, pm.spec.name)
        if not mine:
            continue
        keys = {a.name: tuple(k for k in problem.demand if k[0] == pm.spec.name and adapter_of(k[1]) == a.name)
                for a in mine}
        holds += adapter_holds(pm.spec.name, mine, keys, problem.demand)
    now = dict(inputs.running_holds)  # re-planning: who holds what in the running plan
    ids = {su.id for su in solver_units}
    holds = [dc_replace(h, held_now=tuple(u for u in now.get(h.name, ()) if u in ids)) for h in holds]
    return problem.replace(units=solver_units, adapters=tuple(holds))


def unit_adapters_json(pr, uid: str) -> dict | None:
    """plan.json ``allocations[].adapters`` of unit ``uid`` (hetinfra.document.adapters.UnitAdapters):
    its slots, memory and derate, and each adapter the solution has it hold; None for a base unit."""
    from hetinfra.perf.lora import cold_load_ms

    t = pr.units[uid].template
    if t.lora is None:
        return None
    specs = {a.name: a for a in pr.inputs.spec.adapters}
    routed: dict[str, float] = {}
    for (u, _m, w), rps in pr.result.flow.items():
        name = adapter_of(w)
        if u == uid and name is not None:
            routed[name] = routed.get(name, 0.0) + rps
    names = sorted(a for (u, a), c in pr.result.holds.items() if u == uid and c > 0)
    names = kept_running(pr.problem, uid, names, pr.result.n.get(uid, 0))
    if pr.inputs.spec.planning.adapter_placement == "everywhere":  # every replica holds all its base's adapters
        names = sorted(a.name for a in pr.inputs.spec.adapters if a.base == t.model)
    held = [{"name": a, "source": specs[a].source, "lora_rank": specs[a].rank, "instances": pr.result.n[uid],
             "routed_rps": round(routed.get(a, 0.0), 6)} for a in names]
    if not held:
        return None
    arch = next(pm.arch for pm in pr.inputs.models if pm.spec.name == t.model)
    c = t.lora
    return {"max_loras": c.slots, "max_lora_rank": c.rank, "slot_memory_gb": round(c.slot_memory_gb, 4),
            "slowdown": round(c.slowdown, 4), "derate": round(c.derate, 4),
            "cold_load_ms": round(cold_load_ms(arch, c.rank), 3), "held": held}


def kept_running(problem, uid: str, names: list[str], count: int) -> list[str]:
    """``names`` (the adapters the solve has unit ``uid`` hold) with those it holds in the running plan
    kept while it runs and has a slot free (sorted): holding is free, and dropping one alone would
    restart its engines for nothing (the solver is indifferent to x[u,a] that carries no flow)."""
    slots = next((u.slots for u in problem.units if u.id == uid), 0)
    if count <= 0 or len(names) >= slots:
        return names
    out = set(names)
    for a in sorted(problem.adapters, key=lambda a: a.name):
        if uid in a.held_now and a.name not in out and len(out) < slots:
            out.add(a.name)
    return sorted(out)


def with_running_holds(inputs, state):
    """``inputs`` knowing which units hold which adapters in the running plan (``state``: an out
    folder, its state.json or plan.json; hetinfra.plan.running), so the re-plan's ILP prefers that
    placement (solver.adapter_check.adapter_move_costs)."""
    from hetinfra.document import running
    from hetinfra.plan.running import state_file

    now: dict[str, list[str]] = {}
    for a in running(state_file(state)):
        if a.count > 0 and a.adapters is not None:
            for h in a.adapters.held:
                now.setdefault(h.name, []).append(a.unit)
    return dc_replace(inputs, running_holds=tuple((a, tuple(sorted(us))) for a, us in sorted(now.items())))


def adapter_summary(doc) -> list[str]:
    """The plan summary's lines on LoRA adapters (none without): per unit holding some, its slots,
    slot rank, memory and derate and the adapters it holds; the placements compared, where verified."""
    from hetinfra.plan.held_everywhere import candidates_summary

    out = []
    for a in doc.allocations:
        lo = a.adapters
        if lo is None:
            continue
        names = ", ".join(h.name for h in lo.held)
        out.append(f"adapters on {a.deployment_unit} (x{a.count}): {names} [--max-loras {lo.max_loras} rank "
                   f"{lo.max_lora_rank}, {float(lo.slot_memory_gb):.2f} GB of KV cache, derate {float(lo.derate):.2f}]")
    return out + candidates_summary(doc)


def fold_adapters(log, spec) -> tuple:
    """(the demand log with each adapter's rows counted as its base's, adapter -> its observed share
    of its base's requests): the gateway logs a request under the ``model`` it named, an adapter's
    name for adapter requests (hetinfra.replan). An adapter the log never saw keeps half a request's
    share (a spec share is > 0); the shares of a base are scaled to sum at most 1. Without adapters:
    the log unchanged, no shares."""
    import numpy as np

    base_of = {a.name: a.base for a in spec.adapters}
    if not base_of:
        return log, {}
    names = log.models
    counts = {a: int((names == a).sum()) for a in base_of}
    folded = np.array([base_of.get(m, m) for m in names.tolist()], dtype=str)  # as wide as the longest name
    shares: dict[str, float] = {}
    for base in sorted(set(base_of.values())):
        total = int((folded == base).sum())
        if total == 0:
            continue  # the base is not in the log: its adapters keep the spec's demand
        mine = {a: max(counts[a], 0.5) / total for a, b in base_of.items() if b == base}
        scale = min(1.0, 1.0 / sum(mine.values()))
        shares.update({a: s * scale for a, s in mine.items()})
    return dc_replace(log, models=folded), shares


def with_adapter_shares(spec, shares: dict[str, float]):
    """``spec`` with each adapter in ``shares`` demanding that share of its base's requests (what the
    demand log showed: :func:`fold_adapters`), so a re-plan re-places adapters whose demand moved."""
    from hetinfra.spec.adapters import AdapterDemand

    if not shares:
        return spec
    adapters = [a.model_copy(update={"demand": AdapterDemand(share=shares[a.name])}) if a.name in shares else a
                for a in spec.adapters]
    return spec.model_copy(update={"adapters": adapters})


def adapter_triggers(old, new, threshold: float = 0.05) -> list[str]:
    """Re-plan triggers of adapters whose share of their base moved by more than ``threshold`` (absolute)."""
    before = {a.name: a.demand.share for a in old.adapters}
    out = []
    for a in new.adapters:
        was = before.get(a.name)
        if was is not None and a.demand.share is not None and abs(a.demand.share - was) > threshold:
            out.append(f"demand of adapter {a.name}: share {was:.3g} -> {a.demand.share:.3g} of {a.base}")
    return out
