"""Independent replications of a plan's simulation, and a judgement with a stated confidence.

* :func:`seeds_for`: the seeds of one purpose. Rule: seed = 1000 + 3 x (base_seed x 10,000 + j) + r
  for j = 0..k-1 (k <= 10,000), with r = 0 for ``decide`` (the search's replications), 1 for
  ``confirm`` (the final plan's fresh confirmation) and 2 for ``audit`` (benchmarks/bench_promise.py:
  seeds no verification ever uses). The residue r keeps the purposes disjoint, every seed is >= 1000
  so none is a seed 0..999 a user passes by hand (``simulate --seed``), and two base seeds >= 0 give
  disjoint sets.
* :func:`simulate_replications`: one ``simulate_plan`` result per seed, each exactly what a separate
  call gives. They run on a thread each, up to the cores, where the compiled core runs (it releases
  the GIL while a unit replays, and numpy's sorts do too): 7 replications of 20,000 requests at
  1.2x ran 0.97-1.25x as fast as one after the other on chat, 1.12-1.47x on europe and
  1.2-1.5x on summarize (medians of 5, three runs, 2 cores loaded by other work; identical
  results). A first measurement with 4 replications had shown no gain: run-to-run noise on this
  machine is of the same size. They share the caller's memo, whose keys hold
  the seed (``hetinfra.sim.plan_sim._unit_key``, ``hetinfra.sim.draw``), so replications never
  collide (no two threads write one key) and the trim reuses a unit's result for a seed exactly as
  with one seed.
* :func:`requests_for`: requests per replication, scaled by the longest class's service time (rule
  in its docstring), which verification and ``hetinfra simulate``'s default use.
* :func:`judge`: a dict shaped like one simulation whose models and units are judged on all the
  replications (see its docstring for the method).
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from hetinfra import cores
from hetinfra.errors import InvalidInputError
from hetinfra.sim.bounds import clopper_pearson, t_bound
from hetinfra.sim.stats import MIN_ATTAINED
from hetinfra.sim.workload import WorkloadConfig

__all__ = ["PURPOSES", "MAX_REPLICATIONS", "PASSES", "MOST_REQUESTS", "seeds_for", "simulate_replications",
           "requests_for", "judge"]

#: the purposes of seeds and their residue mod 3 (see the module docstring)
PURPOSES = {"decide": 0, "confirm": 1, "audit": 2}
#: seeds per (base seed, purpose): the stride that keeps base seeds' sets apart
MAX_REPLICATIONS = 10_000
_FIRST_SEED = 1000  # above every seed a user types by hand (0..99, and then some)

#: requests_for: the measured window holds the longest class's service time this many times
PASSES = 20
#: requests_for never asks for more than this per model (5x the default: memory and time stay bounded)
MOST_REQUESTS = 100_000

METHOD = ("per model and statistic, the replications' values as independent observations (batch means "
          "over replications): one-sided Student-t bound on their mean; attainment: the lower of that "
          "and the Clopper-Pearson bound on the pooled measured requests")


def seeds_for(base_seed: int, purpose: str, k: int) -> list[int]:
    """``k`` deterministic seeds for ``purpose`` (decide, confirm, audit) from ``base_seed`` >= 0
    (planning.verify.seed): see the module docstring for the rule."""
    if purpose not in PURPOSES:
        raise InvalidInputError(f"unknown seed purpose {purpose!r}", hint="use one of " + ", ".join(PURPOSES))
    if not isinstance(base_seed, int) or base_seed < 0:
        raise InvalidInputError(f"the base seed must be an integer >= 0 (got {base_seed!r})")
    if not 0 <= k <= MAX_REPLICATIONS:
        raise InvalidInputError(f"replications must be in 0..{MAX_REPLICATIONS} (got {k})")
    start = base_seed * MAX_REPLICATIONS
    return [_FIRST_SEED + 3 * (start + j) + PURPOSES[purpose] for j in range(k)]


def simulate_replications(view, spec, spec_path, config: WorkloadConfig, seeds: list[int], memo: dict | None = None,
                          detail: bool = False, ticks=None, parsed: dict | None = None) -> list[dict]:
    """``simulate_plan(view, spec, spec_path, config at seed s, ticks, memo=memo, detail=detail)``
    for each s in ``seeds``, in their order (see the module docstring); ``ticks`` is called under a lock.
    ``parsed``: a cache the caller keeps for this very view (unchanged between its calls): the
    SimPlan validated at the first call is reused by the next ones."""
    from hetinfra.document.simulation import SimPlan
    from hetinfra.sim import core
    from hetinfra.sim.plan_sim import simulate_plan

    if len(set(seeds)) != len(seeds):
        raise InvalidInputError(f"replications need distinct seeds (got {seeds})")
    if not seeds:
        return []
    # validated once for all seeds (each simulate_plan only reads it): validating a 32-model fleet's
    # view for every replication again was 3.1 s of an 86 s cProfile of its verified plan
    parsed = {} if parsed is None else parsed
    if SimPlan not in parsed:
        parsed[SimPlan] = SimPlan.of(view)
    view = parsed[SimPlan]
    lock = threading.Lock()

    def tick(n: int) -> None:
        with lock:
            ticks(n)

    def one(seed: int) -> dict:
        return simulate_plan(view, spec, Path(spec_path), replace(config, seed=seed), tick if ticks else None,
                             memo=memo, detail=detail)

    workers = min(len(seeds), cores()) if core.available() else 1
    if workers <= 1:
        return [one(s) for s in seeds]
    with ThreadPoolExecutor(workers, thread_name_prefix="hetinfra-rep") as pool:
        return list(pool.map(one, seeds))


def requests_for(view, sim: dict, least: int = 20_000, passes: int = PASSES, most: int = MOST_REQUESTS) -> int:
    """Requests per model and replication for ``view`` (a plan, a simulation view or their SimPlan),
    from ``sim``, a simulation of it at ``least`` requests. Rule: per model, the longest class's
    service time S = median TTFT + (its output tokens - 1) x median TPOT (the class's bucket edge;
    the medians as ``sim`` measured them: a typical request's time, which one burst of preemptions
    in the run does not inflate as it does a mean); the measured window (the requests after the warm-up at the
    offered rate) must hold ``passes`` x S, so n = passes x S x offered rate / (1 - warm-up
    fraction). The largest n over the models, rounded up to a thousand, clamped to [least, most]."""
    from hetinfra.document.simulation import SimPlan

    plan = SimPlan.of(view)
    longest = {m.name: max((c.output_tokens for c in m.classes), default=1) for m in plan.models}
    need = least
    for m in sim["models"]:
        ttft, tpot = m["ttft_ms"].get("p50"), m["tpot_ms"].get("p50")
        if ttft is None:
            continue
        service_s = (ttft + (longest.get(m["model"], 1) - 1) * (tpot or 0.0)) / 1e3
        n = passes * service_s * m["offered_rps"] / (1.0 - sim.get("warmup_fraction", 0.1))
        need = max(need, min(most, 1000 * math.ceil(n / 1000)))
    return int(need)


def _stable(entry: dict) -> bool:
    """Whether a unit's entry (its ``stability`` record) or a model's (its ``stable``) is stable."""
    record = entry.get("stability")
    return entry.get("stable", True) if record is None else record.get("stable", True)


def _stat_bounds(entries: list[dict], confidence: float, attainment: bool = True) -> dict:
    """Estimate, upper (pessimistic) and lower (optimistic) bounds of each statistic of a model or
    unit over its replications' entries (those with measured requests); ``attainment=False`` leaves
    the attainment's out (None: a unit whose objective has none, whose bounds nobody reads)."""
    key = entries[0]["slo"]["percentile"] if "slo" in entries[0] else None
    out = {}
    for stat in ("ttft_ms", "tpot_ms"):
        vals = [e[stat][key or e.get("percentile", "p99")] for e in entries]
        vals = [v for v in vals if v is not None]
        pess, opt = t_bound(vals, confidence, True), t_bound(vals, confidence, False)
        out[stat] = (None, None, None) if pess is None else (round(pess[0], 3), round(pess[1], 3), round(opt[1], 3))
    att = [e["objective"].get("attainment") for e in entries]
    if attainment and all(a is not None for a in att) and len(att) >= 2:
        counts = [e["count"] for e in entries]
        hits = sum(round(a * n) for a, n in zip(att, counts))
        mean, low_t = t_bound(att, confidence, False)
        _, high_t = t_bound(att, confidence, True)
        low = min(low_t, clopper_pearson(hits, sum(counts), confidence, upper=False))
        high = max(high_t, clopper_pearson(hits, sum(counts), confidence, upper=True))
        out["attainment"] = (round(mean, 5), round(low, 5), round(min(high, 1.0), 5))
    else:
        out["attainment"] = (None, None, None)
    return out


def _ratios(bounds: dict, slo: dict, which: int, target: float | None) -> dict:
    """Each statistic's bound (``which``: 1 pessimistic, 2 optimistic) over its objective (> 1 misses);
    ``target``: the objective's attainment (None: it has none)."""
    parts = {}
    for stat, lim in (("ttft_ms", slo["ttft_ms"]), ("tpot_ms", slo["tpot_ms"])):
        if bounds[stat][which] is not None:
            parts[stat.split("_")[0]] = bounds[stat][which] / lim
    att = bounds["attainment"][which]
    if target is not None and att is not None:
        parts["attainment"] = target / max(att, MIN_ATTAINED)
    return parts


def _judged(entries: list[dict], slo: dict, confidence: float, margin: float, attainment: bool = True) -> dict:
    """The judgement of one model or unit on its replications' entries (see :func:`judge`);
    ``attainment``: whether to bound the attainment where the objective has none (see _stat_bounds)."""
    measured = [e for e in entries if e.get("count")]
    stable = all(_stable(e) for e in entries)
    if len(measured) < 2:
        worst = max((e["objective"].get("ratio") or 0.0 for e in entries), default=None)
        return {"bounds": None, "ratio_bound": worst if not stable else None,
                "decision": "undecided" if stable else "missed", "stable": stable, "met": False, "ratios": {}}
    target = slo.get("attainment")
    bounds = _stat_bounds(measured, confidence, attainment or target is not None)
    pess, opt = _ratios(bounds, slo, 1, target), _ratios(bounds, slo, 2, target)
    limit = 1.0 - margin
    ratio = max(pess.values()) if pess else None
    unstable_ratio = max((e["objective"].get("ratio") or 0.0 for e in entries if not _stable(e)), default=0.0)
    if not stable:
        ratio = max(ratio or 0.0, unstable_ratio)
    met = stable and ratio is not None and ratio <= limit
    missed = not stable or (opt and max(opt.values()) > limit)
    return {"bounds": bounds, "ratio_bound": None if ratio is None else round(ratio, 4), "stable": stable,
            "decision": "met" if met else "missed" if missed else "undecided", "met": met,
            "ratios": {k: round(v, 4) for k, v in pess.items()}}


def _model_entry(name: str, entries: list[dict], seeds: list[int], unit_entries: dict[str, list[dict]],
                 confidence: float, margin: float) -> dict:
    j = _judged(entries, entries[0]["slo"], confidence, margin)
    units_stable = all(_stable(e) for es in unit_entries.values() for e in es)
    b = j["bounds"] or {s: (None, None, None) for s in ("ttft_ms", "tpot_ms", "attainment")}
    key = entries[0]["slo"]["percentile"]
    met = j["met"] and units_stable
    decision = j["decision"] if units_stable else "missed"
    worst = max(entries, key=lambda e: e["objective"].get("ratio") or 0.0)
    return {**worst, "model": name, "met": met, "replications": len(entries), "seeds": list(seeds),
            "objective": {"met": met, "ratio": j["ratio_bound"], "ratios": j["ratios"], "attainment": b["attainment"][1],
                          "percentile": key, "confidence": confidence},
            "estimate": {"ttft_ms": b["ttft_ms"][0], "tpot_ms": b["tpot_ms"][0], "attainment": b["attainment"][0]},
            "bound": {"ttft_ms": b["ttft_ms"][1], "tpot_ms": b["tpot_ms"][1], "attainment": b["attainment"][1]},
            "ratio_bound": j["ratio_bound"], "decision": decision, "stable": j["stable"] and units_stable,
            "per_replication": [{"seed": s, "met": e["met"], "ratio": e["objective"].get("ratio")}
                                for s, e in zip(seeds, entries)]}


def _unit_entry(entries: list[dict], slo: dict, confidence: float, margin: float) -> dict:
    # a unit's bounds are not reported, only its verdict: its attainment is bounded only where the
    # objective has one (the Clopper-Pearson bisections were a tenth of a 32-model fleet's judging)
    j = _judged([{**e, "slo": slo} for e in entries], slo, confidence, margin, attainment=False)
    first = entries[0]
    return {**first, "count": sum(e.get("count") or 0 for e in entries), "replications": len(entries),
            "objective": {"met": j["met"], "ratio": j["ratio_bound"], "ratios": j["ratios"]},
            "decision": j["decision"], "stable": j["stable"],
            "stability": {"stable": j["stable"], "tested": any((e.get("stability") or {}).get("tested") for e in entries),
                          "per_replication": [e.get("stability") for e in entries]}}


def judge(sims: list[dict], confidence: float = 0.95, margin: float = 0.0) -> dict:
    """The replications ``sims`` (one simulation each, same plan and load, distinct seeds) judged as
    one simulation: the keys verification reads (met; models[] model, met, objective {met, ratio};
    units[] unit, count, objective {met, ratio}) and per model replications, seeds, estimate and
    bound (ttft_ms, tpot_ms, attainment), ratio_bound, decision (met, missed, undecided), stable.

    Method (batch means over independent replications): each replication's statistic (its p99, or
    whichever percentile the objective names, of TTFT and TPOT over its measured requests) is ONE
    observation; the replications are independent (distinct seeds), so their mean has a one-sided
    Student-t bound mean + t(confidence, n - 1) x sd / sqrt(n). Requests inside one replication are
    correlated (they share queues), so pooling them for an order-statistic bound would be too
    narrow; replications are not. Attainment: the lower of the t bound on the replications'
    attainments and the exact Clopper-Pearson binomial bound on the pooled measured requests.

    A model is ``met`` when every statistic's pessimistic bound (upper for latencies, lower for
    attainment) is within its objective x (1 - margin) AND every unit of it is stable in every
    replication; ``missed`` when a unit is unstable or even an optimistic bound is outside;
    ``undecided`` otherwise (more replications would tell). ``objective.ratio`` is the worst bound
    over its objective (and at least the miss ratio of an unstable unit). Fewer than two
    replications give no bound: undecided (not met). The latency blocks of a model entry are its
    worst replication's."""
    if not sims:
        raise InvalidInputError("judge needs at least one simulation")
    seeds = [s["seed"] for s in sims]
    names = [m["model"] for m in sims[0]["models"]]
    by_model = {n: [next(m for m in s["models"] if m["model"] == n) for s in sims] for n in names}
    unit_ids = [u["unit"] for u in sims[0]["units"]]
    by_unit = {u: [next(x for x in s["units"] if x["unit"] == u) for s in sims] for u in unit_ids}
    slo_of = {n: es[0]["slo"] for n, es in by_model.items()}
    units = [_unit_entry(es, slo_of[es[0]["model"]], confidence, margin) for es in by_unit.values()]
    models = [_model_entry(n, by_model[n], seeds, {u: es for u, es in by_unit.items() if es[0]["model"] == n},
                           confidence, margin) for n in names]
    return {**{k: v for k, v in sims[0].items() if k not in ("models", "units")}, "seed": seeds[0], "seeds": seeds,
            "replications": len(sims), "confidence": confidence, "method": METHOD,
            "met": all(m["met"] for m in models), "models": models, "units": units}
