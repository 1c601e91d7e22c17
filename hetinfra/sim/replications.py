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
  machine is of the same size. A plan whose units all replay on the Python loop (LoRA:
  ``hetinfra.sim.core.python_only``) runs them in turn. They share the caller's memo, whose keys hold
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
from dataclasses import dataclass, replace
from pathlib import Path

from hetinfra.document.simulation import RunEntry, RunObjective
from hetinfra.errors import InvalidInputError
from hetinfra.sim.batches import run_share, run_spread
from hetinfra.sim.bounds import clopper_pearson, prediction_bound, t_bound
from hetinfra.sim.stats import MIN_ATTAINED, PERCENTILES
from hetinfra.sim.workload import WorkloadConfig

__all__ = ["PURPOSES", "MAX_REPLICATIONS", "PASSES", "MOST_REQUESTS", "seeds_for", "simulate_replications",
           "requests_for", "requests_each", "judge"]

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
          "over replications): one-sided Student-t prediction bound on one more run, mean + t x sd x "
          "sqrt(1 + 1/n), never inside the worst run; attainment: the lower of that and the "
          "Clopper-Pearson bound on the pooled measured requests")


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

    # a thread per replication, as a plan's units get (core.map_units), but in turn for a plan whose
    # units all replay on the Python loop (core.python_only)
    return core.map_units(one, seeds, threads=not core.python_only(view.allocations))


def requests_for(view, sim: dict, least: int = 20_000, passes: int = PASSES, most: int = MOST_REQUESTS) -> int:
    """The largest of :func:`requests_each` (``least`` where no model has a figure): one length that
    serves every model of ``view``."""
    return max(requests_each(view, sim, least, passes, most).values(), default=int(least))


def requests_each(view, sim: dict, least: int = 20_000, passes: int = PASSES,
                  most: int = MOST_REQUESTS) -> dict[str, int]:
    """Requests per replication for each model of ``sim``, a simulation of ``view`` (a plan, a
    simulation view or their SimPlan) at ``least`` requests. Rule: per model, the longest class's
    service time S = median TTFT + (its output tokens - 1) x median TPOT (the class's bucket edge;
    the medians as ``sim`` measured them: a typical request's time, which one burst of preemptions
    in the run does not inflate as it does a mean); the measured window (the requests after the warm-up at the
    offered rate) must hold ``passes`` x S, so n = passes x S x offered rate / (1 - warm-up
    fraction), rounded up to a thousand, clamped to [least, most] (least where it has no figure).
    And a unit that carries a class rated at best-effort bounds gets the stability test's
    MIN_REQUESTS measured requests (:func:`_best_effort_need`)."""
    from hetinfra.document.simulation import SimPlan, SimRun

    plan, run = SimPlan.of(view), SimRun.of(sim)
    thin = _best_effort_need(plan, run, most)
    longest = {m.name: max((c.output_tokens for c in m.classes), default=1) for m in plan.models}
    need = {}
    for m in run.models:
        need[m.model] = int(least)
        ttft, tpot = m.median("ttft_ms"), m.median("tpot_ms")
        if ttft is None:
            continue
        service_s = (ttft + (longest.get(m.model, 1) - 1) * (tpot or 0.0)) / 1e3
        n = passes * service_s * m.offered_rps / (1.0 - run.warmup_fraction)
        # a run whose medians are not finite (no request reached its first token) asks for the most
        need[m.model] = int(max(least, min(most, 1000 * math.ceil(n / 1000)))) if math.isfinite(n) else int(most)
    return {m: max(n, thin.get(m, 0)) for m, n in need.items()}


def _best_effort_need(plan, run, most: int) -> dict[str, int]:
    """Per model, the requests a run needs for each of its units that carries a class rated at
    best-effort bounds (hetinfra.plan.tail) to hold the stability test's MIN_REQUESTS measured
    requests (hetinfra.sim.stability), at most ``most``: such a class is rare and its latencies sit
    in the tail its percentile lets miss, so only the steady-state test shows whether its unit
    keeps up. Held-out h158p (heldout66 F3): a 2 x L4 pipeline carrying 92% of a 0.24% class of
    60k-token prompts held about 40 requests of a 20,000-request run, untested; its queue grew to a
    20-minute TTFT, and at 100,000 requests the plan missed by 22,000x."""
    from hetinfra.perf.model import BEST_EFFORT_SOURCE
    from hetinfra.sim.stability import MIN_REQUESTS

    rated = {t.id for t in plan.templates if any(str(src).startswith(BEST_EFFORT_SOURCE) for src in t.sources.values())}
    units = {a.unit for a in plan.allocations if a.template in rated}
    drawn = {m.model: m.requests for m in run.models if m.requests}
    need: dict[str, int] = {}
    for u in run.units:
        if u.unit in units and u.count and u.count < MIN_REQUESTS and u.model in drawn:
            n = min(most, 1000 * math.ceil(drawn[u.model] * MIN_REQUESTS / u.count / 1000))
            need[u.model] = max(need.get(u.model, 0), int(n))
    return need


@dataclass(frozen=True, slots=True)
class Bounds:
    """Per statistic of a model or unit over its replications: (estimate, pessimistic bound,
    optimistic bound), or Nones where it has no value (attainment: where it is not bounded)."""

    ttft_ms: tuple
    tpot_ms: tuple
    attainment: tuple
    #: per latency statistic of a percentile objective, (name, estimate, pessimistic bound) of the share of
    #: a run's requests within its objective (:func:`_share_bounds`); () where it has none
    shares: tuple = ()

    def of(self, stat: str) -> tuple:
        return self.ttft_ms if stat == "ttft_ms" else self.tpot_ms if stat == "tpot_ms" else self.attainment


NO_BOUNDS = Bounds((None, None, None), (None, None, None), (None, None, None))


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement of one model or unit on its replications (see :func:`judge`)."""

    bounds: Bounds | None
    ratio_bound: float | None
    decision: str
    stable: bool
    met: bool
    ratios: dict


def _stat_bounds(entries: list[RunEntry], slo: RunObjective, confidence: float, attainment: bool = True,
                 one_run: bool = True, shares: float | None = None) -> Bounds:
    """Estimate, pessimistic and optimistic bounds of each statistic of a model or unit over its
    replications' entries (those with measured requests) at ``slo``'s percentile: the pessimistic
    bound is a prediction bound on one more run (upper for latencies, lower for attainment), the
    optimistic one a bound on the mean (a model whose mean is surely outside is missed whatever
    more runs say); ``one_run=False`` bounds the mean instead (a unit's headroom, see _unit_entry);
    ``attainment=False`` leaves the attainment's out (None: a unit whose objective has none, whose
    bounds nobody reads)."""
    out = {}
    batches = [e.raw.get("batches") for e in entries] if one_run else None

    def pessimistic(vals: list[float], upper: bool, index: int | None = None):
        # one more run; a proportion's spread never below what the runs' batches imply (batches.run_spread)
        if not one_run:
            return t_bound(vals, confidence, upper)
        return prediction_bound(vals, confidence, upper, None if index is None else run_spread(batches, index))

    for stat in ("ttft_ms", "tpot_ms"):
        vals = [(e.ttft_ms if stat == "ttft_ms" else e.tpot_ms)[slo.percentile] for e in entries]
        vals = [v for v in vals if v is not None]
        pess, opt = pessimistic(vals, True), t_bound(vals, confidence, False)
        out[stat] = (None, None, None) if pess is None else (round(pess[0], 3), round(pess[1], 3), round(opt[1], 3))
    att = [e.attainment for e in entries]
    if attainment and all(a is not None for a in att) and len(att) >= 2:
        counts = [e.count for e in entries]
        hits = sum(round(a * n) for a, n in zip(att, counts))
        mean, low_t = pessimistic(att, False, 2)
        _, high_t = t_bound(att, confidence, True)
        low = min(low_t, clopper_pearson(hits, sum(counts), confidence, upper=False))
        high = max(high_t, clopper_pearson(hits, sum(counts), confidence, upper=True))
        out["attainment"] = (round(mean, 5), round(low, 5), round(min(high, 1.0), 5))
    else:
        out["attainment"] = (None, None, None)
    return Bounds(**out, shares=_share_bounds(batches, shares) if shares and slo.percentile != "mean" else ())


def _share_bounds(batches: list, confidence: float) -> tuple:
    """Per latency statistic, ("ttft_share" or "tpot_share", estimate, lower prediction bound on one more
    run) of the share of a run's requests within the objective, the runs' shares as observations
    and their spread floored by their batches' (hetinfra.sim.batches.run_spread: a proportion's
    batches carry its spread however thin the percentile's tail is). () unless every run has batches.

    Why: a percentile is met on a run exactly when its share is at least the percentile's level. Where
    the percentile sits at the edge of a mixture it hardly moves until the share crosses that level,
    and then it jumps: held-out h141a (heldout65b: 4.9% of 60k-token prompts, p90 TTFT 1 s) had six
    confirmation runs whose p90s spread 41 ms about 846 ms (bound 961 ms, met) and missed 3 of 10 audit
    seeds; their shares within 1 s, 0.911-0.938, bound at 0.885. A rare class whose few requests a
    run decide it is counted instead (hetinfra.plan.lumpy.rare_heavy): a clean run's share is 1."""
    out = []
    for index, name in ((3, "ttft_share"), (4, "tpot_share")):
        vals = [run_share(b, index) for b in batches]
        if len(vals) < 2 or any(v is None for v in vals):
            continue
        mean, low = prediction_bound(vals, confidence, False, run_spread(batches, index))
        out.append((name, round(mean, 6), round(low, 6)))
    return tuple(out)


def _ratios(bounds: Bounds, slo: RunObjective, which: int) -> dict:
    """Each statistic's bound (``which``: 1 pessimistic, 2 optimistic) over its objective (> 1 misses),
    and the attainment's where the objective has one."""
    parts = {}
    for stat in ("ttft_ms", "tpot_ms"):
        if bounds.of(stat)[which] is not None:
            parts[stat.split("_")[0]] = bounds.of(stat)[which] / slo.limit(stat)
    att = bounds.attainment[which]
    if slo.attainment is not None and att is not None:
        parts["attainment"] = slo.attainment / max(att, MIN_ATTAINED)
    return parts


def _share_ratios(bounds: Bounds, slo: RunObjective) -> dict:
    """Each share's pessimistic bound against the percentile's level (> 1 misses): judged at the
    objective itself, not at planning.verify.margin's tighter one (a share of 99% within 0.9 x the
    objective is not what a p99 promises)."""
    level = (PERCENTILES.get(slo.percentile) or 0.0) / 100.0
    return {name: level / max(low, MIN_ATTAINED) for name, _est, low in bounds.shares}


def _judged(entries: list[RunEntry], slo: RunObjective, confidence: float, margin: float,
            attainment: bool = True, one_run: bool = True, shares: float | None = None) -> Verdict:
    """The judgement of one model or unit on its replications' entries (see :func:`judge`);
    ``attainment``: whether to bound the attainment where the objective has none (see _stat_bounds)."""
    measured = [e for e in entries if e.count]
    stable = all(e.stable for e in entries)
    if len(measured) < 2:
        worst = max((e.ratio or 0.0 for e in entries), default=None)
        return Verdict(None, worst if not stable else None, "undecided" if stable else "missed", stable, False, {})
    bounds = _stat_bounds(measured, slo, confidence, attainment or slo.attainment is not None, one_run, shares)
    pess, opt = _ratios(bounds, slo, 1), _ratios(bounds, slo, 2)
    shares = _share_ratios(bounds, slo)
    limit = 1.0 - margin
    ratio = max(pess.values()) if pess else None
    unstable_ratio = max((e.ratio or 0.0 for e in entries if not e.stable), default=0.0)
    if not stable:
        ratio = max(ratio or 0.0, unstable_ratio)
    met = stable and ratio is not None and ratio <= limit and all(r <= 1.0 for r in shares.values())
    pess = {**pess, **shares}
    missed = not stable or (opt and max(opt.values()) > limit)
    return Verdict(bounds, None if ratio is None else round(ratio, 4),
                   "met" if met else "missed" if missed else "undecided", stable, met,
                   {k: round(v, 4) for k, v in pess.items()})


def _model_entry(entries: list[RunEntry], seeds: list[int], units: list[RunEntry], confidence: float,
                 margin: float, shares: float | None) -> tuple[bool, dict]:
    """(whether it met, a model's entry of the judgement) from its replications' ``entries`` and its
    units' (all replications)."""
    slo = entries[0].slo
    j = _judged(entries, slo, confidence, margin, shares=shares)
    units_stable = all(u.stable for u in units)
    b = j.bounds or NO_BOUNDS
    met = j.met and units_stable
    decision = j.decision if units_stable else "missed"
    worst = max(entries, key=lambda e: e.ratio or 0.0)
    return met, {**worst.raw, "model": worst.model, "met": met, "replications": len(entries), "seeds": list(seeds),
            "objective": {"met": met, "ratio": j.ratio_bound, "ratios": j.ratios, "attainment": b.attainment[1],
                          "percentile": slo.percentile, "confidence": confidence},
            "estimate": {"ttft_ms": b.ttft_ms[0], "tpot_ms": b.tpot_ms[0], "attainment": b.attainment[0]},
            "bound": {"ttft_ms": b.ttft_ms[1], "tpot_ms": b.tpot_ms[1], "attainment": b.attainment[1]},
            "ratio_bound": j.ratio_bound, "decision": decision, "stable": j.stable and units_stable,
            "per_replication": [{"seed": s, "met": e.met, "ratio": e.ratio,
                                 "attainment": e.attainment}
                                for s, e in zip(seeds, entries)]}


def _unit_entry(entries: list[RunEntry], confidence: float, margin: float) -> dict:
    # a unit's bounds are not reported, only its verdict: its attainment is bounded only where the
    # objective has one (the Clopper-Pearson bisections were a tenth of a 32-model fleet's judging)
    # and bounds the mean, not one run: the promise is each model's (the prediction bound of
    # _model_entry); a unit's verdict tells the search how much headroom a layout has (the credit
    # rounds' ratio, hetinfra.plan.rounds.next_factors), which the spread of one run would hide
    # (services/chat.yaml: a prediction bound per unit stopped the credit a round early, +19%/h for
    # a plan whose every audit run met by 6.9% or more)
    j = _judged(entries, entries[0].slo, confidence, margin, attainment=False, one_run=False)
    return {**entries[0].raw, "count": sum(e.count or 0 for e in entries), "replications": len(entries),
            "missed_requests": missed_requests(entries),
            "objective": {"met": j.met, "ratio": j.ratio_bound, "ratios": j.ratios},
            "decision": j.decision, "stable": j.stable,
            "stability": {"stable": j.stable, "tested": any((e.stability or {}).get("tested") for e in entries),
                          "per_replication": [e.stability for e in entries]}}


def missed_requests(entries: list[RunEntry]) -> int:
    """A unit's measured requests outside its model's latency bounds (TTFT or TPOT above the
    objective's ms), over all its replications: its share of its model's misses, which a p99 over
    the model's requests pools. The padding relieves the unit that holds the most
    (hetinfra.plan.pad), not the one whose own percentile is worst: a unit carrying 1.5% of a
    model's requests can have the worst p99 and hold almost none of its model's misses."""
    return sum(round((e.count or 0) * (1.0 - e.attainment)) for e in entries if e.attainment is not None)


def judge(sims: list[dict], confidence: float = 0.95, margin: float = 0.0, shares: float | None = 0.95) -> dict:
    """The replications ``sims`` (one simulation each, same plan and load, distinct seeds) judged as
    one simulation: the keys verification reads (met; models[] model, met, objective {met, ratio};
    units[] unit, count, objective {met, ratio}) and per model replications, seeds, estimate and
    bound (ttft_ms, tpot_ms, attainment), ratio_bound, decision (met, missed, undecided), stable.

    Method (batch means over independent replications): each replication's statistic (its p99, or
    whichever percentile the objective names, of TTFT and TPOT over its measured requests) is ONE
    observation; the replications are independent (distinct seeds). The promise is about the run a
    user makes on a seed nobody chose, so the pessimistic bound is the one-sided Student-t
    PREDICTION bound on one more replication, mean + t(confidence, n - 1) x sd x sqrt(1 + 1/n), and
    never inside the worst replication (hetinfra.sim.bounds.prediction_bound): a
    bound on the mean (sd / sqrt(n)) let a model through whose seven replications' p99 TTFT were
    420-4,214 ms against 3,000 (mean 1,360, bound 2,384), which then missed on 4 of 10 fresh seeds
    (benchmarks/bench_scale.py's independent fleet, m14-phi-4). Requests inside one replication are
    correlated (they share queues), so pooling them for an order-statistic bound would be too
    narrow; replications are not. Attainment: the lower of the prediction bound on the replications'
    attainments and the exact Clopper-Pearson binomial bound on the pooled measured requests. The
    optimistic bound is the Student-t bound on the mean (lower for latencies). With ``shares`` (a
    confidence: the confirmation's, `simulate --replications`'), a percentile is also judged on the share
    of each run's requests within the objective (:func:`_share_bounds`), not met where its lower bound
    is under the percentile's level.

    A model is ``met`` when every statistic's pessimistic bound (upper for latencies, lower for
    attainment) is within its objective x (1 - margin) AND every unit of it is stable in every
    replication; ``missed`` when a unit is unstable or even an optimistic bound is outside;
    ``undecided`` otherwise (more replications would tell). ``objective.ratio`` is the worst bound
    over its objective (and at least the miss ratio of an unstable unit). Fewer than two
    replications give no bound: undecided (not met). The latency blocks of a model entry are its
    worst replication's. The simulations are read through their typed records
    (``hetinfra.document.simulation.SimRun``)."""
    from hetinfra.document.simulation import SimRun

    if not sims:
        raise InvalidInputError("judge needs at least one simulation")
    runs = [SimRun.of(s) for s in sims]
    seeds = [r.seed for r in runs]
    by_model = {m.model: [] for m in runs[0].models}
    by_unit = {u.unit: [] for u in runs[0].units}
    for run in runs:
        mine = {m.model: m for m in run.models}
        units = {u.unit: u for u in run.units}
        for name, entries in by_model.items():
            entries.append(mine[name])
        for unit, entries in by_unit.items():
            entries.append(units[unit])
    units = [_unit_entry(es, confidence, margin) for es in by_unit.values()]
    judged = [_model_entry(by_model[n], seeds, [u for es in by_unit.values() if es[0].model == n for u in es],
                           confidence, margin, shares) for n in by_model]
    return {**{k: v for k, v in sims[0].items() if k not in ("models", "units")}, "seed": seeds[0], "seeds": seeds,
            "replications": len(sims), "confidence": confidence, "method": METHOD,
            "met": all(met for met, _ in judged), "models": [m for _, m in judged], "units": units}
