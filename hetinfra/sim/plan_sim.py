"""Simulate a whole plan (plan.json + its spec): every replica of every unit, request by request.

* Replicas of a unit = count x engines_per_instance, each a :class:`~hetinfra.sim.replica.Replica`.
* Routing as the gateway does it: a request's class is known at arrival; its unit is drawn by the
  plan's routing shares of that class (seeded); within the unit it goes to the replica with the
  fewest outstanding requests (ties: the lowest index). Shares that sum to less than 1 leave the
  rest of the class unserved (the plan's ``unmet_rps``): those requests are counted as
  ``unrouted`` and not simulated.
* Demand: ``models[].rate_rps`` (x ``demand_scale`` for max_throughput plans) x ``load``;
  ``requests`` are simulated PER MODEL, so that a model's verification does not depend on which
  other models share the plan (a model planned alone and with others gets the same sample).
* Units are independent given the routing: a unit's requests depend only on its model's demand,
  classes and routing, never on other units' counts. ``memo`` (a dict the caller keeps, or a
  :class:`hetinfra.sim.memo.Memo`, which verification keeps: bounded in bytes) reuses a unit's
  simulated requests (its measured ones, ``unit_entry.kept``) and entry when nothing they depend on
  changed, and a whole model's result when none of its units and none of its routing changed
  (requests are drawn per model): the planner's trim (``hetinfra.sim.minimal``) re-simulates only
  the unit that lost a replica and collects only its model, with results identical to a fresh
  simulation. The memo also keeps what does not depend on the rate (each model's request classes
  and sizes, their routing, the arrival gaps' rate-free parts), so the over-provisioning search
  draws no random number twice. An entry the memo no longer holds is computed again, to the same value.
* Requests are drawn, routed and timed in ``hetinfra.sim.draw``, travel as columns (``hetinfra.sim.columns``) and each unit runs in the compiled core
  (``hetinfra.sim.core``) or, where it cannot, the Python reference loop, bit for bit alike.
* Warm-up: the first ``warmup_fraction`` (10%) of each model's requests, by arrival, are simulated
  but left out of the latency statistics and attainment, so that an empty fleet does not flatter them.
* Objectives: per model from plan.json ``models[].slo`` (ttft_ms, tpot_ms; percentile default p99;
  attainment default null), checked per model and, to tell the planner which units to derate,
  per unit and per class.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hetinfra import PLAN_VERSION
from hetinfra.document.sections import ModelEntry
from hetinfra.document.simulation import SimPlan, SimUnit
from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import calibration_for
from hetinfra.sim import core
from hetinfra.sim.columns import UnitRequests, block, cdf, respanned, simulate_pools, simulate_unit
from hetinfra.sim.batches import batch_stats
from hetinfra.sim.draw import arrivals, routed, routes, sampled
from hetinfra.sim.engines import UnitEngine, profiled_rate, unit_engine
from hetinfra.sim.network import OriginRouting, add_network_time, origin_report
from hetinfra.sim.plan_load import load_inputs, load_plan, resolve_models
from hetinfra.sim.replica import Replica, ReplicaConfig, run_replicas
from hetinfra.sim.stats import objective_from_slo
from hetinfra.sim.unit_entry import Measured, kept, measured_columns, unit_entry
from hetinfra.sim.workload import WorkloadConfig

__all__ = ["SIMULATOR_VERSION", "PLAN_VERSION", "load_inputs", "load_plan", "run_replicas", "simulate_plan", "simulate_plan_file"]

SIMULATOR_VERSION = "sim-v1"

_NONE = np.empty(0, dtype=np.int64)  # the request ids of a unit no class routes to

Progress = Callable[[int], None]  # ticks: requests simulated


def _checkpoint(alloc: SimUnit, model: ModelEntry, pm) -> tuple:
    """(architecture, precision) the unit of ``alloc`` serves: its variant's, else the model's."""
    variant = alloc.variant
    if not variant:
        return pm.arch, model.precision or "bf16"
    entry = next((v for v in model.variants or () if v.name == variant), None)
    if variant not in pm.variants or entry is None:
        raise InvalidInputError(f"plan unit {alloc.unit} serves variant {variant!r}, which model {model.name} "
                                "does not list in the spec and plan", hint="pass the plan's spec with --spec")
    return pm.variants[variant], entry.precision or "bf16"


def simulate_plan_file(plan_path: str | Path, spec_path: str | Path | None = None,
                       config: WorkloadConfig = WorkloadConfig(), progress: Progress | None = None) -> dict:
    """Load a plan (out dir or plan.json) and its spec (``inputs.spec_path`` unless given), simulate."""
    plan, spec, sp = load_inputs(plan_path, spec_path)
    return simulate_plan(plan, spec, sp, config, progress)


def simulate_plan(plan: dict | SimPlan, spec, spec_path: Path, config: WorkloadConfig = WorkloadConfig(),
                  progress: Progress | None = None, memo: dict | None = None, detail: bool = True) -> dict:
    """Simulate ``plan`` (plan.json's dict, a simulation view or their SimPlan) with its spec; returns
    the simulation.json dict (see ``hetinfra.sim.report``). ``memo``: see the module docstring.
    ``detail=False`` leaves out what only the report reads, each model's ``classes`` and latency
    CDFs (verification judges models and units, and collecting classes was most of its statistics)."""
    plan = SimPlan.of(plan)
    allocs = list(plan.allocations)
    templates = {t.id: t for t in plan.templates}
    # the engine the plan was made for (plan.json deploy.vllm_version: what the artifacts run)
    calib = calibration_for(plan.deploy.vllm_version)
    # batch means: every verification run (detail=False) with batch_means None, and any run at a seed named
    # there (`simulate --replications` names its seeds: its judgement floors a model's spread with them)
    batches = config.seed in config.batch_means if config.batch_means is not None else not detail
    mods = _model_infos(plan, spec, spec_path, config, memo, detail, batches, templates, calib)
    model_info, unit_keys = mods.info, mods.unit_keys
    # each unit's requests: simulated here, or the measured ones the memo kept (unit_entry.Measured)
    units_reqs: list[UnitRequests | Measured | None] = [None] * len(allocs)
    # a unit's memo entry: its measured requests and its simulation.json entry (which depends on
    # nothing else), stored once the simulation that made them has collected it
    known: dict[int, dict] = {}
    todo: list[tuple[int, str | None]] = []
    for k, a in enumerate(allocs):
        if a.model not in model_info:
            continue
        key = unit_keys.get(k)
        recalled = memo.get(key) if key is not None else None  # one read: the memo may forget (sim.memo)
        if recalled is not None:
            units_reqs[k], known[k] = recalled
        else:
            todo.append((k, key))
    computed: dict[int, tuple] = {}  # a simulated unit's columns and entries (hetinfra.sim.unit_entry)
    for (k, key), (reqs, entry) in zip(todo, _simulate_units(
            [(k, allocs[k], model_info[allocs[k].model]) for k, _ in todo], plan, templates, calib, spec, progress,
            batches)):
        units_reqs[k], computed[k] = reqs, entry
    units_out = [(k, allocs[k]) for k in sorted([*known, *computed])]
    out = _collect(plan, config, model_info, units_out, units_reqs, detail, batches, known, computed)
    _report_origins(plan, out, model_info, units_reqs)
    if memo is None:
        return out
    for (k, a), entry in zip(units_out, out["units"]):
        if k not in known:  # the replicas and engine stay out: nothing reads them once the unit is collected
            memo[unit_keys[k]] = (kept(units_reqs[k], model_info[a.model]["warm"]), dict(entry))
    for entry in out["models"]:
        memo[mods.model_keys[entry["model"]]] = (entry, [u for u in out["units"] if u["model"] == entry["model"]])
    return _merge(out, mods.names, allocs, mods.cached)


@dataclass
class _Models:
    """The plan's models with demand, made ready to simulate: ``info`` per model to simulate (its plan
    model, spec model, request count, warm-up, rate, routing, draws and arrivals); with a memo, the
    models it already holds (``cached``: their entries) and the memo keys of every model and unit."""

    names: list[str]
    info: dict[str, dict] = field(default_factory=dict)
    cached: dict[str, tuple] = field(default_factory=dict)
    model_keys: dict[str, str] = field(default_factory=dict)
    unit_keys: dict[int, str] = field(default_factory=dict)


def _model_infos(plan: SimPlan, spec, spec_path, config: WorkloadConfig, memo: dict | None, detail: bool,
                 batches: bool, templates: dict, calib) -> _Models:
    """Each model with demand: served from the memo where it holds the model's key, else its requests
    drawn, routed to its units and given arrivals (at its rate x the plan's scale x the load)."""
    planned = resolve_models(spec, Path(spec_path).parent if spec_path else None)
    scale = plan.scale()
    allocs = list(plan.allocations)
    unit_ix = {a.unit: k for k, a in enumerate(allocs)}
    models = [m for m in plan.models if m.rate_rps]
    out = _Models(names=[m.name for m in models])
    for m in models:
        name = m.name
        pm = planned.get(name)
        if pm is None:
            raise InvalidInputError(f"plan model {name!r} is not in the spec {spec_path}", hint="pass the plan's spec with --spec")
        rate = float(m.rate_rps) * scale * config.load
        routing = OriginRouting(plan, name, m.classes, unit_ix)  # by origin (hetinfra.sim.network)
        if memo is not None:
            keys, out.model_keys[name] = _memo_keys(plan, m, allocs, templates, config, calib, scale, rate, detail,
                                                    batches)
            out.unit_keys.update(keys)
            recalled = memo.get(out.model_keys[name])
            if recalled is not None:
                out.cached[name] = recalled
                continue
        draw = sampled(m, pm, len(routing.origins), config, spec_path, memo)
        by_unit, unrouted, origin_ix = routed(m, plan, draw, routing, memo, config)
        n = config.requests
        out.info[name] = {"plan": m, "pm": pm, "n": n, "warm": int(n * config.warmup_fraction), "rate": rate,
                          "unrouted": unrouted, "routing": routing, "origin_ix": origin_ix, "draw": draw,
                          "by_unit": by_unit, "arrival": arrivals(name, rate, config, memo)}
    return out


def _simulate_units(jobs: list[tuple[int, SimUnit, dict]], plan: SimPlan, templates: dict, calib, spec, progress,
                    batches: bool) -> list[tuple[UnitRequests, tuple]]:
    """Each job's allocation (index k, allocation, its model's info) served by its replicas: its
    requests, with the client's round trip added, and its columns and entries
    (:func:`hetinfra.sim.unit_entry.unit_entry`), in job order. Units are independent given the
    routing and the core runs without the GIL, so each unit's replay, round trip and statistics run
    on a thread per core where there are several: each unit's result is what a serial run gives,
    whatever the threads' timing (progress is reported here, in job order)."""
    prepared = [_prepare_unit(k, a, info, plan, templates, calib, spec) for k, a, info in jobs]

    def serve(job) -> tuple:
        (reqs, ue, replicas), (k, a, info) = job
        if hasattr(ue, "run"):  # LoRA (sim.lora)
            ue.run(replicas, reqs)
        elif ue.route is None:
            simulate_unit(replicas, reqs)
        else:
            simulate_pools(ue.pools, reqs, ue.route)
        # the client's view: a request's round trip from its origin (before the memo keeps it, so it is added once)
        add_network_time(reqs, k, info["routing"], info["origin_ix"])
        return unit_entry(a, ue, replicas, reqs, info, batches)

    entries = core.map_units(serve, list(zip(prepared, jobs)),
                             threads=not core.python_only([a for _k, a, _info in jobs]))
    if progress is not None:
        for reqs, _ue, _replicas in prepared:
            progress(len(reqs))
    return [(reqs, entry) for (reqs, _ue, _replicas), entry in zip(prepared, entries)]


def _prepare_unit(k: int, a: SimUnit, info: dict, plan: SimPlan, templates: dict, calib, spec
                  ) -> tuple[UnitRequests, UnitEngine, list[Replica]]:
    """Allocation ``k``'s requests, its engine and its fresh replicas."""
    m = info["plan"]
    reqs = UnitRequests.of(info["draw"], info["arrival"], info["by_unit"].get(k, _NONE))
    routed = {c: sum(e.rps for e in entries if e.unit == a.unit)
              for c, entries in (plan.routing.get(a.model) or {}).items()}
    arch, precision = _checkpoint(a, m, info["pm"])
    if a.disaggregation is not None:  # a prefill/decode bundle: two pools joined by the KV transfer
        from hetinfra.sim.split import role_unit, split_pools

        ue = unit_engine(role_unit(a, a.disaggregation.roles[1]), arch, precision, m.classes, routed, None, m.slo,
                         calib, spec)
        pools, route = split_pools(a, lambda at_tp: unit_engine(at_tp, arch, precision, m.classes, routed, None, m.slo,
                                                                calib, spec).engine)
        ue.pools, ue.route = pools, route
        return reqs, ue, pools[1] + pools[0]
    ue = unit_engine(a, arch, precision, m.classes, routed, templates.get(a.template), m.slo, calib, spec)
    replicas = [Replica(ue.engine, ReplicaConfig()) for _ in range(max(a.count * a.engines_per_instance, 0))]
    if a.adapters is not None:  # LoRA: slots, swaps and the derate of each batch (hetinfra.sim.lora)
        from hetinfra.sim.lora import lora_unit

        replicas = lora_unit(a, ue, arch, [c.name for c in m.classes])
    if len(reqs) and not replicas:
        raise InvalidInputError(f"plan unit {a.unit} gets traffic but has no replica (count {a.count})")
    return reqs, ue, replicas


def _merge(out: dict, names: list[str], allocs: list[SimUnit], cached: dict[str, tuple[dict, list[dict]]]) -> dict:
    """``out`` (the simulation of the models not in ``cached``) with the memo's results of the others,
    in the order a simulation of all of them gives (models as in plan.json, units as its allocations)."""
    if not cached:
        return out
    models = {m["model"]: m for m in out["models"]}
    units = {u["unit"]: u for u in out["units"]}
    for name, (entry, unit_entries) in cached.items():
        # the memo's own entries, one level copied: a simulation's result is read, never edited in place
        # (copying the CDFs and classes of every untouched model made each trim check cost a whole plan)
        models[name] = dict(entry)
        units.update({u["unit"]: dict(u) for u in unit_entries})
    merged = [models[n] for n in names]
    return {**out, "met": all(m["met"] for m in merged), "models": merged,
            "units": [units[a.unit] for a in allocs if a.unit in units]}


def _report_origins(plan: SimPlan, out: dict, model_info: dict, units_reqs: list[UnitRequests | Measured | None]
                    ) -> None:
    """simulation.json ``models[].origins`` where the plan routes by origin (hetinfra.sim.network)."""
    for entry in out["models"]:
        info = model_info[entry["model"]]
        if (plan.routing_by_origin or {}).get(entry["model"]):
            units = [(k, r) for k, r in enumerate(units_reqs) if r is not None and plan.allocations[k].model == entry["model"]]
            entry["origins"] = origin_report(units, info["warm"], info["routing"], info["origin_ix"],
                                             {k: plan.allocations[k].region for k, _ in units}, entry["slo"]["ttft_ms"])


def _demand(model: ModelEntry) -> dict:
    """What of a plan model draws its requests: its demand, classes and SLO (not its cost)."""
    return model.model_dump(mode="json", include={"name", "rate_rps", "classes", "slo", "variants", "precision"})


def _memo_keys(plan: SimPlan, model: ModelEntry, allocs: list[SimUnit], templates: dict, config: WorkloadConfig,
               calib, scale: float, rate: float, detail: bool, batches: bool) -> tuple[dict[int, str], str]:
    """(allocation index -> its unit's memo key, the model's memo key) of ``model``'s units. Everything
    but the seed is kept on ``plan`` (SimPlan.memo_keys): the replications of one judgement simulate
    one parsed plan at several seeds, and encoding these keys again for each seed was a tenth of a
    32-model fleet's verification; the seed ends every key, so a key is exact with or without it."""
    workload = (model.name, detail, batches, config.requests, config.load, config.burst_cv, config.warmup_fraction,
                calib.vllm_version, scale)
    kept = plan.memo_keys.get(workload)
    if kept is None:
        # the model's demand and routing once, not once per unit (they were most of a fleet's key encoding)
        demand, route = _demand(model), routes(plan, model.name)
        # a unit's entry holds its batch means or not (``batches``): never served to a run that asks otherwise
        units = {k: _unit_key(a, demand, route, templates, config, calib, scale) + ("|batch means" if batches else "")
                 for k, a in enumerate(allocs) if a.model == model.name}
        # a model's result depends on its draw, its rate and its units only (requests are drawn per model)
        kept = plan.memo_keys[workload] = (units, json.dumps(["model", detail, batches, demand, route,
                                                              rate, list(units.values())], sort_keys=True))
    units, model_key = kept
    seed = f"|seed {config.seed!r}"
    return {k: key + seed for k, key in units.items()}, model_key + seed


def _unit_key(alloc: SimUnit, demand: dict, route: list, templates: dict, config: WorkloadConfig, calib,
              scale: float) -> str:
    """Everything one unit's simulation depends on but the seed (:func:`_memo_keys` appends it): the
    unit, its template, its model's demand, classes and SLO (``demand``: :func:`_demand`) and routing
    (``route``: ``draw.routes``; they draw its requests), the workload and the engine constants."""
    t = templates.get(alloc.template)
    # the engine reads the template's sources and, for profiled classes only, exactly this rate
    # (hetinfra.sim.engines): the key is exact, and a factor changes no estimator unit's simulation
    rated = {w: profiled_rate(alloc, t, w) for w in sorted(t.capacity_rps)} if t is not None else {}
    return json.dumps([alloc.key(), t.sources if t is not None else None, rated, demand,
                       route, [config.requests, config.load, config.burst_cv, config.warmup_fraction],
                       calib.vllm_version, scale], sort_keys=True, default=str)


def _collect(plan, config, model_info, units_out, units_reqs: list[UnitRequests | Measured | None], detail: bool,
             batches: bool, known: dict[int, dict], computed: dict[int, tuple]) -> dict:
    """simulation.json's dict of the units simulated or recalled (``units_out``: (index, allocation),
    in allocation order) and of their models;
    ``known``: the entries of units whose statistics the memo has (index -> entry, copied here);
    ``computed``: the simulated units' (columns, latency block for the model, entry), computed on their
    threads (hetinfra.sim.unit_entry). The models' entries are computed on a thread per core too: each
    reads only its own units' columns and entries."""
    measured: dict[str, list[tuple]] = {name: [] for name in model_info}
    # by model, the block of its unit computed here (before its stability is judged): a model served
    # by one unit has that unit's requests, so its block is the same one over the model's span (_model_entry)
    fresh: dict[str, dict] = {}
    units = []
    for k, a in units_out:
        if k in known:
            measured[a.model].append(measured_columns(units_reqs[k], model_info[a.model]["warm"]))
            units.append(dict(known[k]))
            continue
        cols, fresh[a.model], entry = computed[k]
        measured[a.model].append(cols)
        units.append(entry)
    models = core.map_units(lambda name: _model_entry(name, model_info[name], measured[name], detail,
                                                      [u for u in units if u["model"] == name], batches, fresh),
                            list(model_info))
    return {"simulator_version": SIMULATOR_VERSION, "plan_version": plan.plan_version,
            "service": plan.service, "seed": config.seed, "load": config.load, "burst_cv": config.burst_cv,
            "requests": config.requests, "warmup_fraction": config.warmup_fraction,
            "met": all(m["met"] for m in models), "models": models, "units": units}


def _model_entry(name: str, info: dict, parts: list[tuple], detail: bool, units: list[dict], batches: bool,
                 fresh: dict[str, dict]) -> dict:
    """simulation.json's entry of one model, from its units' measured requests (``parts``: per unit,
    the columns arrival, first, finish, output, preempted, class); ``detail``: with its classes and
    CDFs. A model with an unstable unit (``units``: its units' entries) misses (hetinfra.sim.stability).
    ``fresh``: the latency blocks of units _collect computed, by model (a one-unit model's is reused)."""
    m = info["plan"]
    obj = objective_from_slo(m.slo.model_dump())
    empty = (np.empty(0),) * 3 + (np.empty(0, dtype=np.int64),) * 3
    # one unit's columns as they are (read, never written: a copy of them cost as much as its statistics)
    arrival, first, finish, output, preempted, cls = parts[0] if len(parts) == 1 else \
        (np.concatenate(c) for c in zip(*parts)) if parts else empty
    t0 = float(arrival.min()) if len(arrival) else 0.0
    span = (float(finish.max()) if len(finish) else 0.0) - t0
    per_class = []
    for ci, c in enumerate(m.classes if detail else ()):
        sub = cls == ci
        per_class.append({"class": c.name, "unrouted": info["unrouted"][ci],
                          **block(arrival[sub], first[sub], finish[sub], output[sub], preempted[sub], obj, span)})
    multi = output > 1
    entry = {"model": name, "offered_rps": round(info["rate"], 6), "requests": info["n"],
             "warmup_requests": info["warm"], "unrouted": sum(info["unrouted"]),
             "slo": {"ttft_ms": obj.ttft_ms, "tpot_ms": obj.tpot_ms, "percentile": obj.percentile,
                     "attainment": obj.attainment},
             **(respanned(fresh[name], len(arrival), span) if len(parts) == 1 and len(units) == 1 and name in fresh
                else block(arrival, first, finish, output, preempted, obj, span))}
    if batches:  # verification's at its screening seed: one run's batch means (a one-unit model's are its unit's)
        entry["batches"] = (units[0].get("batches") if len(parts) == 1 and len(units) == 1
                            else batch_stats(arrival, first, finish, output, obj, ordered=False))
    if detail:
        entry |= {"classes": per_class, "ttft_cdf_ms": cdf(first - arrival),
                  "tpot_cdf_ms": cdf((finish[multi] - first[multi]) / (output[multi] - 1))}
    unstable = [u["objective"]["ratio"] for u in units if not u["stability"]["stable"]]
    entry["stable"] = not unstable
    if unstable:
        o = entry["objective"]
        entry["objective"] = {**o, "met": False, "ratio": max([o["ratio"] or 0.0] + unstable)}
    entry["met"] = entry["objective"]["met"]
    return entry
