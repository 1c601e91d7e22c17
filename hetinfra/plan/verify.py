"""Verified plans: the cheapest plan that keeps every objective in simulation at ONE stated load, and
from which no replica can be removed without a miss there (docs/verification.md).

The promise is made at one load L (:func:`verification_load`: planning.verify.load,
else the larger of 1 + planning.headroom and 1.2). The ILP sizes for exactly L x demand (its headroom is 1 - 1/L while
verifying, so headroom and load do not stack), the simulator checks at L x demand, and there is no
other factor: a model meets when its statistic (p99 by default) is <= its bound and its attainment
>= its target, up to 1 (``planning.verify.margin``, default 0, tightens this only when a spec
states it).

Rates are adjusted where the simulation says, per regime (:func:`regime_of`: a model's GPU type x
layout, whose units serve one class range): each regime r has a factor g[r] on its templates'
rates, starting at its confidence level's planning factor (planning.confidence). Per round, per
regime used:

* its units missed (or its model missed with no unit missing): it is derated by clamp(1 / miss
  ratio, 0.5, 0.92), or to the geometric midpoint of [largest factor met, smallest missed] once it
  has met, until that bracket is narrower than 25%; the model's regimes not simulated yet take the
  same step (see next_factors), the ones that met keep theirs;
* its units met with room to spare (worst ratio < CREDIT_BELOW) and it never missed: it is
  credited by min(1 / ratio, CREDIT_STEP), up to the top of its confidence interval
  (``hetinfra.perf.confidence.credit_ceiling``), so the simulation and not only the estimator's safe
  side sizes it; a credit under MIN_CREDIT (10%) is not taken.

The cheapest plan in which every model met is kept, even if a later round's solve fails (a budget,
caps); a min_cost budget is checked against that verified plan, not against a round's estimate.
Then the trim removes replicas one at a time (``hetinfra.sim.minimal.without_one_replica``, the
dearest first), or a whole allocation where one replica fewer misses (``without_allocation``), while
the simulation still meets, until a whole pass removes none: the final plan meets at L and every
single removal from it, of one replica or of one whole unit, misses. The over-provisioning ratio is the load the
final plan sustains (``hetinfra.sim.minimal.sustained_load``) over the demand. Everything is seeded
(``planning.verify.seed``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

from hetinfra.errors import InfeasibleError
from hetinfra.plan.plan_json import simulation_view
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.trim import trim

#: solves the plan again with templates' rates scaled: (template id -> factor, the last round's
#: counts to start from) -> the new plan (hetinfra.plan.pipeline binds planner.solve_units)
Resolve = Callable[[dict[str, float], dict[str, int]], PlanResult]

#: bounds of one round's derating factor: never more than halve a template's rated capacity at once,
#: and always take at least 8% off a template that misses (so a near miss converges in a few rounds)
FACTOR_MIN, FACTOR_MAX = 0.5, 0.92
#: stop refining a template's factor once the bracket [met, missed] is narrower than 25%
BRACKET = 1.25
#: credit a template whose units' worst ratio is under this, by at most CREDIT_STEP per round
CREDIT_BELOW, CREDIT_STEP = 0.8, 1.25
#: a credit smaller than this (its regime is that close to the top of its confidence interval: a
#: measured template's interval is +-5%) is not taken: it costs a re-solve and a simulation for at
#: most that much capacity, which the trim takes back where it is a whole replica. On Mélange V1
#: the +5% credits took two rounds and ended on a dearer plan ($29.42/h against $29.09/h)
MIN_CREDIT = 1.1




#: the load a verified plan keeps its objectives at when the spec states none larger: a fleet sized
#: to the edge of its objectives at exactly the declared demand collapses under a 20% burst (a
#: long-context plan trimmed to 1.1x met its p99 there and 17% of requests at 1.2x), so the default
#: promise covers one
DEFAULT_LOAD = 1.2


def verification_load(spec) -> float:
    """The ONE load (multiple of the declared demand) a verified plan keeps its objectives at:
    ``planning.verify.load`` when the spec sets it, else the larger of 1 + ``planning.headroom`` and
    DEFAULT_LOAD (see :func:`load_basis`)."""
    load = spec.planning.verify.load
    return float(load) if load is not None else max(1.0 + spec.planning.headroom, DEFAULT_LOAD)


def load_basis(spec) -> str:
    """Where :func:`verification_load` came from, as plan.json ``fidelity.load_basis`` says it."""
    if spec.planning.verify.load is not None:
        return "planning.verify.load"
    return "1 + planning.headroom" if 1.0 + spec.planning.headroom >= DEFAULT_LOAD else "the default load"


def verification_overrides(spec) -> dict:
    """How a verified plan's ILP differs from the spec's, so that margins do not stack: it sizes for
    exactly the verification load (headroom 1 - 1/load, no other headroom), and a min_cost budget is
    checked on the verified plan instead of each round's estimate."""
    out = {"headroom": 1.0 - 1.0 / verification_load(spec)}
    if spec.planning.objective == "min_cost" and not spec.planning.allow_unmet:
        out["budget"] = None
    return out


@dataclass
class Verification:
    """What verification found: the plan it keeps, that plan's simulation, the rounds, the trim's
    removals and the load each model sustains."""
    pr: PlanResult
    sim: dict
    history: list[dict]
    stopped: bool
    stop_reason: str | None = None
    trimmed: list[dict] = field(default_factory=list)
    checked_removals: int = 0
    sustained: dict[str, float] = field(default_factory=dict)
    #: per model, the round whose plan (before the trim) it keeps (hetinfra.plan.blocks)
    round_by_model: dict[str, int] = field(default_factory=dict)


def verify(pr: PlanResult, resolve: Resolve, progress=None,
           on_rounds: Callable[[PlanResult], None] | None = None) -> Verification:
    """Simulate ``pr`` at the verification load, re-solve (``resolve``) with the regimes' new factors
    until every model meets or the rounds run out, trim, and measure the over-provisioning (see the
    module docstring). Rounds work on :func:`simulation_view`, never on the whole document.
    ``progress``: see hetinfra.plan.progress (None: silent); ``on_rounds``: called with the rounds'
    plan before the trim (its factors are the final plan's)."""
    from hetinfra.sim import WorkloadConfig

    spec = pr.inputs.spec
    settings = spec.planning.verify
    load = verification_load(spec)
    config = WorkloadConfig(requests=settings.requests, load=load, burst_cv=settings.burst_cv, seed=settings.seed)
    sim_of = _Simulator(pr, config, settings.margin, progress)
    out = _rounds(pr, sim_of, resolve, settings.max_rounds, progress)
    if on_rounds is not None:  # the factors are final from here (the pipeline starts the baselines)
        on_rounds(out.pr)
    # the memo is exact (hetinfra.sim.plan_sim._unit_key): the trim reuses what the rounds simulated
    if out.sim["met"] and out.pr.problem.objective == "min_cost":
        out.pr, out.sim, out.trimmed = trim(out.pr, sim_of)
    else:
        out.sim = sim_of(simulation_view(out.pr))
    out.checked_removals = len(sim_of.last_pass)
    if progress is not None:
        progress.stage("over-provisioning")
    out.sustained = _sustained(out.pr, sim_of, load) if out.sim["met"] else {}
    _check_budget(out.pr, out.sim["met"])
    return out


class _Simulator:
    """Simulates simulation views at the verification load, sharing one per-unit memo (see
    hetinfra.sim.plan_sim) and records the removals the trim's last pass checked."""

    def __init__(self, pr: PlanResult, config, margin: float, progress=None):
        self.spec, self.path, self.config, self.margin = pr.inputs.spec, pr.inputs.spec_path, config, margin
        self.memo: dict = {}
        self.last_pass: list[str] = []
        self.progress = progress

    def __call__(self, view: dict) -> dict:
        """The simulation of ``view`` (:func:`simulation_view`, a copy the trim edited, or one whose
        rates the over-provisioning search scaled: the memo's keys hold the rates)."""
        from hetinfra.sim import simulate_plan

        ticks = self.progress.requests if self.progress is not None else None
        sim = simulate_plan(view, self.spec, self.path, self.config, ticks, memo=self.memo, detail=False)
        return with_margin(sim, self.margin)


def regime_of(t) -> str:
    """A template's regime: its model (and variant), GPU type and layout (TP x PP over its nodes). The
    same GPU and layout on another instance type or cloud runs the same engine, so it shares the
    factor; the regime's units serve one class range (what the ILP routes to that layout)."""
    pd = getattr(t, "bundle", None)  # a prefill/decode bundle runs other engines than a colocated layout
    return f"{t.model}|{t.variant or ''}|{t.gpu}|tp{t.tp}|pp{t.pp}|n{t.nodes}" + (f"|pd{pd.prefill_tp}{pd.ratio}" if pd else "")


def _rounds(pr: PlanResult, sim_of: _Simulator, resolve: Resolve, max_rounds: int, progress) -> Verification:
    """Solve, simulate, adjust the regimes' factors; the cheapest met plan (else the last)."""
    from hetinfra.perf.confidence import credit_ceiling

    regimes = {u.template.id: (regime_of(u.template), u.model) for u in pr.all_units}
    g: dict[str, float] = {}
    ceiling: dict[str, float] = {}
    for u in pr.all_units:
        r = regimes[u.template.id][0]
        g[r] = min(g.get(r, math.inf), pr.derate.get(u.template.id, 1.0))
        level = u.template.confidence[0] if u.template.confidence else "calibrated"
        # the trust level's top, not the regime's: a tighter regime ceiling leaves slack the trim must
        # take back, and the trim does not run on multi-period plans (committed.yaml would stay +28%)
        ceiling[r] = min(ceiling.get(r, math.inf), credit_ceiling(level))
    ok: dict[str, float] = {}
    bad: dict[str, float] = {}
    history: list[dict] = []
    best = None  # (rank, index in rounds) of the cheapest round in which every model met
    rounds: list[tuple[PlanResult, dict]] = []  # each round's plan and simulation
    seen: dict[str, dict] = {}
    stopped, stop_reason = pr.result.safety_stop, None
    for rnd in range(1, max_rounds + 1):
        if progress is not None:
            progress.round(rnd, max_rounds, pr.result)
        doc = simulation_view(pr)
        key = _fleet_key(doc)
        if key not in seen:  # a factor that changes no count or route changes no simulation
            seen[key] = sim_of(doc)
        sim = seen[key]
        history.append(_round(rnd, doc, sim, pr.derate))
        rounds.append((pr, sim))
        rank = (doc["cost_usd_per_hour"], -(doc["demand_scale"] or 0.0))  # cheapest; most served at a budget
        if sim["met"] and (best is None or rank < best[0]):
            best = (rank, len(rounds) - 1)
        new = next_factors(sim, doc, g, ok, bad, ceiling, regimes)
        if new == g:
            break
        g = new
        derate = {t: g[r] for t, (r, _m) in regimes.items() if g[r] != 1.0}
        try:
            pr = resolve(derate, dict(pr.result.n))
        except InfeasibleError as exc:  # e.g. derated templates no longer fit the caps: keep what met
            if best is None:
                raise
            stop_reason = f"verification stopped after round {rnd}: {exc.message}"
            break
        stopped |= pr.result.safety_stop
    kept = best[1] if best is not None else len(rounds) - 1
    (pr, sim), round_by_model = _by_block(kept, rounds, sim_of, resolve)
    stopped |= pr.result.safety_stop
    return Verification(pr, sim, history, stopped, stop_reason, round_by_model=round_by_model)


def _by_block(at: int, rounds: list[tuple[PlanResult, dict]], sim_of: _Simulator,
              resolve: Resolve) -> tuple[tuple[PlanResult, dict], dict[str, int]]:
    """Round ``at`` (an index in ``rounds``: the cheapest round in which every model met, else the
    last), or the plan composed of each group of linked models' cheapest met round
    (hetinfra.plan.blocks) where that one meets in simulation and is cheaper (or round ``at``
    misses), with the round each model's plan is from."""
    from hetinfra.plan import blocks

    kept = rounds[at]
    as_kept = kept, {pm.spec.name: at + 1 for pm in kept[0].inputs.models}
    groups = blocks.model_groups([r[0] for r in rounds])
    picks = blocks.choose(rounds, groups) if groups and len(groups) > 1 else None
    if picks is None or len(set(picks)) == 1:
        return as_kept
    try:
        pr = blocks.compose(rounds, groups, picks, resolve)
    except InfeasibleError:
        return as_kept
    sim = sim_of(simulation_view(pr))
    cost, kept_cost = pr.result.cost(pr.problem), kept[0].result.cost(kept[0].problem)
    if not sim["met"] or (kept[1]["met"] and cost >= kept_cost - 1e-9):
        return as_kept
    return (pr, sim), {m: 1 + pick for g, pick in zip(groups, picks) for m in g}


def next_factors(sim: dict, doc: dict, g: dict[str, float], ok: dict[str, float], bad: dict[str, float],
                 ceiling: dict[str, float], regimes: dict[str, tuple[str, str]]) -> dict[str, float]:
    """Each regime's factor for the next round (see the module docstring); records the factors at
    which regimes met (``ok``) and missed (``bad``). ``regimes``: template id -> (regime, model).
    A model that missed also derates its regimes never simulated yet, by its worst step: what
    its traffic does to one layout (queueing at a percentile, bursts, the spread inside a bucket) it
    does to the untried ones, which would otherwise be picked next, as optimistic."""
    model_met = {m["model"]: m["met"] for m in sim["models"]}
    unit_regime = {a["unit"]: regimes[a["template"]] for a in doc["allocations"]}
    worst: dict[str, float] = {}
    missed_units = {unit_regime[u["unit"]][1] for u in sim["units"] if u["unit"] in unit_regime
                    and u.get("count") and not u["objective"]["met"]}
    model_of: dict[str, str] = {}
    for u in sim["units"]:
        if u["unit"] not in unit_regime or not u.get("count"):
            continue
        r, model = unit_regime[u["unit"]]
        ratio = u["objective"].get("ratio")
        worst[r] = max(worst.get(r, 0.0), math.inf if ratio is None else ratio)
        model_of[r] = model
    out = dict(g)
    step: dict[tuple[str, bool], float] = {}  # (model, bundle?) -> its worst derating step this round
    for r, ratio in sorted(worst.items()):
        model, f = model_of[r], g.get(r, 1.0)
        if not model_met.get(model, True) and (ratio > 1.0 or model not in missed_units):
            bad[r] = min(bad.get(r, math.inf), f)
            if ok.get(r, 0.0) >= f:  # it met at this factor in another plan: that no longer vouches for it
                del ok[r]
        else:
            ok[r] = max(ok.get(r, 0.0), f)
        out[r] = _factor(r, f, ratio, ok, bad, ceiling.get(r, 1.0))
        if r in bad and r not in ok:
            kind = (model, "|pd" in r)  # a bundle's regime learns from bundles, a colocated one from colocated
            step[kind] = min(step.get(kind, 1.0), out[r] / f)
    for r, model in sorted({v for v in regimes.values()}):
        kind = (model, "|pd" in r)  # the split removes the interference a colocated miss shows
        if kind in step and r not in ok and r not in bad:
            out[r] = g.get(r, 1.0) * step[kind]
    return out


def _factor(r: str, f: float, ratio: float, ok: dict[str, float], bad: dict[str, float], ceiling: float) -> float:
    if r in bad and r not in ok:
        step = FACTOR_MAX if not math.isfinite(ratio) or ratio <= 1 else 1.0 / ratio
        return f * min(max(step, FACTOR_MIN), FACTOR_MAX)
    if r in bad:
        return math.sqrt(ok[r] * bad[r]) if bad[r] / ok[r] >= BRACKET else ok[r]
    if ratio < CREDIT_BELOW and f < ceiling:
        up = min(f * min(1.0 / max(ratio, 1e-9), CREDIT_STEP), ceiling)
        return up if up >= f * MIN_CREDIT else f
    return f


def _sustained(pr: PlanResult, sim_of: _Simulator, load: float) -> dict[str, float]:
    from hetinfra.sim.minimal import sustained_load

    # one simulation of all models per step: simulating them apart in a process pool (their results
    # are independent, tests/sim/test_plan_sim_memo.py) did not pay on 2 shared cores
    # (docs/internals/plan-stage.md)
    def meets(d: dict) -> dict[str, bool]:
        return {m["model"]: m["met"] for m in sim_of(d)["models"]}

    return sustained_load(simulation_view(pr), load, meets)


def _check_budget(pr: PlanResult, met: bool) -> None:
    """A min_cost budget is a limit on the verified plan (the rounds solve without it)."""
    spec = pr.inputs.spec
    budget = spec.budget_usd_per_hour
    if budget is None or "budget" not in verification_overrides(spec):
        return
    cost = pr.result.cost(pr.problem)
    if cost > budget + 1e-9:
        what = "the cheapest verified plan" if met else "the cheapest plan found (it misses an objective)"
        raise InfeasibleError(f"budget ${budget:g}/h is below {what}, ${cost:.2f}/h",
                              hint=f"raise budget_usd_per_hour to at least {cost:.2f}, lower demand, or loosen the SLOs",
                              details={"relax": [{"budget_usd_per_hour": {"current": budget, "needed": round(cost, 4)}}]})


def with_margin(sim: dict, margin: float) -> dict:
    """``sim`` with each model's ``met`` requiring its miss ratio <= 1 - margin (a stated margin,
    planning.verify.margin; 0 leaves ``sim`` as it is)."""
    if margin <= 0:
        return sim
    models = []
    for m in sim["models"]:
        ratio = m["objective"].get("ratio")
        scaled = None if ratio is None else ratio / (1.0 - margin)
        models.append({**m, "met": m["met"] and scaled is not None and scaled <= 1.0,
                       "objective": {**m["objective"], "ratio": scaled}})
    return {**sim, "models": models, "met": all(m["met"] for m in models)}


def _fleet_key(doc: dict) -> str:
    """What a simulation of plan.json depends on besides the spec: counts, routing, demand scale."""
    return json.dumps([[(a["unit"], a["count"]) for a in doc["allocations"]], doc["routing"], doc["demand_scale"]],
                      sort_keys=True)


def _round(rnd: int, doc: dict, sim: dict, g: dict[str, float]) -> dict:
    used = {a["template"] for a in doc["allocations"]}
    return {"round": rnd, "cost_usd_per_hour": doc["cost_usd_per_hour"], "met": sim["met"],
            "derate": {t: round(f, 6) for t, f in sorted(g.items()) if t in used},
            "models_met": {m["model"]: m["met"] for m in sim["models"]},
            "missed_units": sorted(u["unit"] for u in sim["units"] if u.get("count") and not u["objective"]["met"])}
