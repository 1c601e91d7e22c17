"""Verification's rounds (docs/verification.md, "Derate where the miss is, credit where there is
slack"): solve, judge, adjust each regime's factor, re-solve; the cheapest plan in which every model
met, by block of linked models. ``hetinfra.plan.verify`` drives them, and resumes them where the
confirmation on fresh seeds vetoes their plan (:meth:`Search.veto`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from hetinfra.errors import InfeasibleError
from hetinfra.plan.budget import current
from hetinfra.plan.factors import (BRACKET, CREDIT_BELOW, CREDIT_STEP, FACTOR_MAX, FACTOR_MIN,  # noqa: F401
                                    MIN_CREDIT, displaced_credit, next_factors, record_slack)
from hetinfra.plan.floors import Floors
from hetinfra.plan.library import regime_of
from hetinfra.plan.planner import PlanResult

#: what the work budget names when it stops the rounds before a re-solve (plan.json work_budget.stopped)
ROUNDS_CUT = "verification's rounds"






def simulation_view(pr: PlanResult) -> dict:
    """:func:`hetinfra.plan.plan_json.simulation_view`, imported at the first call: plan.json's typed
    sections load beside the first solve (hetinfra.cli.preload), not with the rounds."""
    from hetinfra.plan import plan_json

    return plan_json.simulation_view(pr)


def template_entry(t) -> dict:
    """What :class:`hetinfra.plan.ceiling.Ceilings` reads of a template (plan.json ``templates[]``'s
    keys), at its estimated rates (derate 1)."""
    return {"id": t.id, "gpu": t.gpu, "tp": t.tp, "pp": t.pp, "engines_per_instance": t.engines,
            "variant": t.variant, "capacity_rps": dict(t.rates), "sources": dict(t.sources), "derate": 1.0}


@dataclass
class Search:
    """The rounds' state, kept across a confirmation's veto (hetinfra.plan.verify): each regime's factor
    ``g``, the factors at which it met (``ok``) and missed (``bad``), its credit ceiling, the history
    and each fleet's simulation."""
    regimes: dict[str, tuple[str, str]]
    g: dict[str, float]
    ceiling: dict[str, float]
    ok: dict[str, float] = field(default_factory=dict)
    bad: dict[str, float] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    seen: dict[str, dict] = field(default_factory=dict)
    #: every round's plan and judgement, across vetoes (a vetoed model counts as missed in the earlier ones)
    done: list[tuple[PlanResult, dict]] = field(default_factory=list)
    #: each round's rank: its cost, then the demand it serves (most first: a max_throughput budget)
    ranks: list[tuple[float, float]] = field(default_factory=list)
    #: the rounds ran out with no plan met, and go on settling: no factor rises from then on (:func:`rounds`)
    settling: bool = False
    #: the layouts at a latency floor, and what shows one (hetinfra.plan.floors)
    floors: Floors = field(default_factory=Floors)
    #: each regime's latest room: (factor, worst ratio) where its model met under CREDIT_BELOW (factors.record_slack)
    slack: dict[str, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def start(cls, pr: PlanResult, ceilings) -> "Search":
        """Each regime at its templates' starting factor; credit up to its trust level's top, its
        roofline and its measured interval (hetinfra.plan.ceiling), computed for a regime the first
        time a round weighs it (:class:`CreditCeilings`)."""
        regimes = {u.template.id: (regime_of(u.template), u.model) for u in pr.all_units}
        g: dict[str, float] = {}
        units: dict[str, list] = {}
        for u in pr.all_units:
            r = regimes[u.template.id][0]
            g[r] = min(g.get(r, math.inf), pr.derate.get(u.template.id, 1.0))
            units.setdefault(r, []).append(u)
        return cls(regimes, g, CreditCeilings(pr, ceilings, units), floors=Floors(initial=dict(g)))

    @property
    def regimes_model(self) -> dict[str, str]:
        """Regime -> its model."""
        return {r: m for r, m in self.regimes.values()}

    def derate(self) -> dict[str, float]:
        """Template id -> factor, for the solver."""
        return {t: self.g[r] for t, (r, _m) in self.regimes.items() if self.g[r] != 1.0}

    def veto(self, judged: dict, doc: dict) -> bool:
        """Take a judgement the search did not decide on (the confirmation) as a round's: the regimes
        of its missed models are derated. False where nothing changes."""
        new = next_factors(judged, doc, self.g, self.ok, self.bad, self.ceiling, self.regimes, rise=not self.settling,
                           floors=self.floors)
        changed = new != self.g
        self.g = new
        missed = {m["model"] for m in judged["models"] if not m["met"]}
        self.done = [(pr, _missing(sim, missed)) for pr, sim in self.done]
        self.seen = {k: _missing(sim, missed) for k, sim in self.seen.items()}
        # the room those rounds showed for a vetoed model was on the seeds the confirmation overruled
        self.slack = {r: v for r, v in self.slack.items() if self.regimes_model.get(r) not in missed}
        return changed


class CreditCeilings(dict):
    """Regime -> the factor its credit stops at: the lowest over its units of their trust level's top
    (hetinfra.perf.confidence.credit_ceiling), and of their template's roofline and measured interval
    at their model's class mix (hetinfra.plan.ceiling.Ceilings.credit_limit). Computed for a regime
    the first time a round asks (``get``; next_factors reads only the regimes of the plan's units),
    then kept: a 32-model fleet's pool holds some 3,400 templates, a plan a hundred, and computing
    every regime's at the start was a tenth of a verified plan's Python time. The same values in
    any order (the rooflines are pure; Ceilings only remembers them)."""

    def __init__(self, pr: PlanResult, ceilings, units: dict[str, list]):
        super().__init__()
        self._pr, self._ceilings, self._units = pr, ceilings, units
        self._models: dict | None = None
        self._roof: dict[str, float] = {}  # template id -> its credit limit (its units share it)

    def get(self, regime: str, default=None):
        if regime not in self and regime in self._units:
            self[regime] = self._of(regime)
        return super().get(regime, default)

    def _of(self, regime: str) -> float:
        from hetinfra.perf.confidence import credit_ceiling

        if self._models is None:
            self._models = {m["name"]: m for m in simulation_view(self._pr)["models"]}
        out = math.inf
        for u in self._units[regime]:
            t = u.template
            level = t.confidence[0] if t.confidence else "calibrated"
            # the trust level's top, not the regime's: a tighter regime ceiling leaves slack the trim must
            # take back, and the trim does not run on multi-period plans (committed.yaml would stay +28%);
            # and never past the template's roofline or measured interval at its model's class mix
            if t.id not in self._roof:
                self._roof[t.id] = self._ceilings.credit_limit(template_entry(t), self._models.get(u.model))
            out = min(out, credit_ceiling(level), self._roof[t.id])
        return out


def _missing(sim: dict, models: set[str]) -> dict:
    """``sim`` with ``models`` missed: a confirmation missed them in a plan the rounds judged met, so no
    earlier round vouches for them (the cheapest-round choice takes them from rounds after the veto)."""
    if not any(m["model"] in models and m["met"] for m in sim["models"]):
        return sim
    out = [{**m, "met": False} if m["model"] in models else m for m in sim["models"]]
    return {**sim, "models": out, "met": all(m["met"] for m in out)}


def rounds(pr: PlanResult, sim_of, resolve, max_rounds: int, progress, search: Search, settle: int = 0) -> tuple:
    """Solve, simulate, adjust the regimes' factors (``search``, resumed); the cheapest met plan of every
    round so far (else the one closest to meeting, :func:`_closest`), by block of linked models: (plan,
    its judgement, round by model, stopped, stop reason). Where ``max_rounds`` run out with no plan
    met (:func:`_none_met`), up to ``settle`` more rounds settle (once per search): no factor rises,
    so the rounds only derate what misses until a plan meets."""
    stopped, stop_reason = pr.result.safety_stop, None
    rnd = first = len(search.history)
    last = first + max_rounds
    while rnd < last:
        rnd += 1
        if progress is not None:
            progress.round(rnd, last, pr.result)
        doc = simulation_view(pr)
        key = _fleet_key(doc)
        if key not in search.seen:  # a factor that changes no count or route changes no simulation
            search.seen[key] = sim_of(doc)
        sim = search.seen[key]
        search.history.append(_round(rnd, doc, sim, pr.derate, search.settling))
        search.done.append((pr, sim))
        search.ranks.append((doc["cost_usd_per_hour"], -(doc["demand_scale"] or 0.0)))
        if rnd == last and settle and not search.settling and _none_met(search):
            search.settling, last = True, last + settle
        record_slack(sim, doc, search.g, search.regimes, search.slack)
        new = next_factors(sim, doc, search.g, search.ok, search.bad, search.ceiling, search.regimes, floors=search.floors,
                           rise=not search.settling)
        if new == search.g and not search.settling:  # the rules change nothing: try a layout they left behind
            new = displaced_credit(doc, search.g, search.bad, search.ceiling, search.regimes, search.slack)
        if new == search.g:
            break
        if rnd == last:  # no round is left to simulate a re-solve: the factors are kept for a
            search.g = new  # confirmation's veto to resume from (hetinfra.plan.verify), the solve is not run
            break
        if not current().check(ROUNDS_CUT):  # keep the cheapest met round so far, as for a failed solve
            break
        before, search.g = search.g, new
        try:
            pr = _resolved_within_caps(pr, doc, sim, search, resolve, before)
        except InfeasibleError as exc:  # e.g. derated templates no longer fit the caps: keep what met
            if not search.settling and not any(s["met"] for _, s in search.done):
                raise  # (settling keeps the closest round for the padding, as the rounds running out do)
            stop_reason = f"verification stopped after round {rnd}: {exc.message}"
            break
        stopped |= pr.result.safety_stop
    met = [k for k, (p, s) in enumerate(search.done) if s["met"]]
    # the cheapest round in which every model met; among equals the most served (a budget), the earliest
    kept = min(met, key=lambda k: (search.ranks[k], k)) if met else _closest(search)
    (pr, sim), round_by_model = _by_block(kept, search.done, sim_of, resolve)
    return pr, sim, round_by_model, stopped | pr.result.safety_stop, stop_reason


def _none_met(search: Search) -> bool:
    """Whether no plan of the rounds so far met, as the choice by block keeps them: no round in which
    every model met, and (where models are in several unlinked groups) some group that met in no
    round. Then the rounds settle: on a linked 32-model fleet whose caps bind in a few regions
    (``benchmarks/bench_scale.py --shared --mix other --seed 5``) each of 6 rounds credited some
    models to their edge while others missed, none met, and the padding of the closest round shipped
    a plan that missed at $503.76/h; 16 rounds met at $386.28/h."""
    from hetinfra.plan import blocks

    return not any(s["met"] for _, s in search.done) and blocks.picks_by_group(search.done)[1] is None


#: a miss by at most this ratio of bound to objective is a near one (see _closest)
NEAR_MISS = 1.25


def _closest(search: Search) -> int:
    """Where no round met: the round closest to meeting, which the padding (hetinfra.plan.pad) then
    completes: the fewest models missed, then those whose every miss is a near one (a model's bound
    within NEAR_MISS of its objective: what a padded replica or two mends), then the cheapest, the
    earliest. The last round was kept before: on benchmarks/bench_scale.py's linked 32-model fleet
    its one miss was a collapse (42x) that four padded replicas did not mend, where round 2's one
    miss was a model at its objective's edge."""
    def closeness(k: int) -> tuple:
        missed = [m for m in search.done[k][1]["models"] if not m["met"]]
        far = any(_miss_ratio(m) > NEAR_MISS for m in missed)
        return len(missed), far, search.ranks[k], k

    return min(range(len(search.done)), key=closeness)


def _miss_ratio(model: dict) -> float:
    """A judged model's worst bound over its objective (inf where it has none: a collapse, an unstable unit)."""
    ratio = model.get("ratio_bound")
    if ratio is None:
        ratio = (model.get("objective") or {}).get("ratio")
    return math.inf if ratio is None else float(ratio)


#: at most this many derating steps per round without a simulation (see _past_unchanged)
UNCHANGED_STEPS = 8
#: how often a round's re-solve that no longer fits the caps takes half its derating step back
#: (:func:`_resolved_within_caps`): the step, at most halving, goes to 71%, 84%, then 92% of the factor
BACKOFFS = 3


def _resolved_within_caps(pr: PlanResult, doc: dict, sim: dict, search: Search, resolve,
                          before: dict[str, float]) -> PlanResult:
    """The next round's plan (a re-solve at ``search.g``, then :func:`_past_unchanged`). Where it does not
    fit the caps (InfeasibleError), the factors that fell from ``before`` (the round just judged) take
    half their step back, geometrically, up to BACKOFFS times before the error stands: a layout that
    missed far is derated by half, and a fleet twice its size may pass a cap that a fleet between the
    two fits. Held-out h108b (8B, 20k-28k-token prompts, H100 capped at 8): its first fleet (5 GPUs)
    missed by x35, the halved factor needed 10 GPUs and the spec was refused (exit 3), while 8 GPUs
    meet (the uncapped spec's own plan)."""
    backoffs = 0
    while True:
        try:
            return _past_unchanged(resolve(search.derate(), dict(pr.result.n)), doc, sim, search, resolve)
        except InfeasibleError:
            fell = {r: f for r, f in search.g.items() if f < before.get(r, 1.0)}
            if not fell or backoffs == BACKOFFS:
                raise
            backoffs += 1
            search.g = {**search.g, **{r: math.sqrt(f * before.get(r, 1.0)) for r, f in fell.items()}}


def _model_fleet(doc: dict, model: str) -> str:
    """What a model's simulation depends on in a simulation view: its units' counts, its routing and
    the demand scale (a model's units and traffic are simulated apart from the others')."""
    return json.dumps([sorted((a["unit"], a["count"]) for a in doc["allocations"] if a["model"] == model),
                       doc["routing"].get(model), doc["demand_scale"]], sort_keys=True)


def _past_unchanged(pr: PlanResult, doc: dict, sim: dict, search: Search, resolve) -> PlanResult:
    """The re-solve after a round that derated a model that missed, past the factors that leave that
    model's fleet as it was: its simulation would be the one that missed, so simulating it again
    spends a round to learn nothing (multi-region's 70B H100 TP2 units kept their count of 2 through
    four rounds of 8% steps and the rounds ran out on a miss). Each such model's regimes take their
    next step on the same judgement, until its fleet changes or UNCHANGED_STEPS steps.

    A step that only lowers factors, after which the plan's own flows still fit its units
    (:func:`_still_carries`), is not solved: rates only fell, so no plan is cheaper than before, and
    this one is still feasible at its cost, so the solve's answer is this fleet (or one of equal cost
    within the gap). The last step is always solved, so the plan returned is a solve at the factors
    the search holds. A demand profile's linked 4-period problem spent 35 s of a 92 s plan in
    these re-solves (a 2-model multi-region spec with a chat profile), 5 to 9 s each."""
    missed = {m["model"] for m in sim["models"] if not m["met"]}
    unsolved = False  # search.g moved since pr was solved
    for _ in range(UNCHANGED_STEPS):
        view = simulation_view(pr)
        stuck = {m for m in missed if _model_fleet(view, m) == _model_fleet(doc, m)}
        if not stuck:
            break
        new = next_factors(sim, doc, search.g, search.ok, search.bad, search.ceiling, search.regimes, floors=search.floors,
                           rise=not search.settling)
        theirs = {r for r, m in search.regimes.values() if m in stuck}
        step = {r: f for r, f in new.items() if r in theirs and f != search.g.get(r, 1.0)}
        if not step:
            break
        search.g = {**search.g, **step}
        unsolved = _still_carries(pr, search.derate())
        if not unsolved:
            pr = resolve(search.derate(), dict(pr.result.n))
    return resolve(search.derate(), dict(pr.result.n)) if unsolved else pr


def _still_carries(pr: PlanResult, derate: dict[str, float]) -> bool:
    """Whether ``derate`` only lowers ``pr``'s factors and ``pr``'s flows still fit its units at the
    rates that gives: each unit's load within its replicas less the headroom, as the solver's capacity
    rows read (solver.recheck). A demand profile's levels each keep their load at the rates their rows
    read (solver.periods.fold; per origin where clients' origins are routed, the round trip's share of
    the TTFT taken: hetinfra.plan.origins), and the peak is one of them; a factor scales a unit's
    rates, per origin too, so each load grows by old / new. Without levels, a plan routed per origin
    is left to the solver: its folded flows read class rates, which overstate the per-origin ones."""
    from hetinfra.solver.recheck import TOL

    old = pr.derate
    if any(derate.get(t, 1.0) > old.get(t, 1.0) for t in set(old) | set(derate)):
        return False

    def fits(load: dict[str, float], counts: dict[str, int]) -> bool:
        room = 1.0 - pr.problem.headroom
        return all(used * old.get(tid := pr.units[uid].template.id, 1.0) / derate.get(tid, 1.0)
                   <= room * counts.get(uid, 0) * (1 + TOL) + TOL for uid, used in load.items())

    if pr.result.periods:
        return all(fits(lv.get("load") or {}, lv["counts"]) for lv in pr.result.periods)
    if pr.result.origin_flow:
        return False
    units = {u.id: u for u in pr.problem.units}
    load: dict[str, float] = {}
    for (uid, _model, cls), f in pr.result.flow.items():
        rate = units[uid].rates.get(cls, 0.0)
        if rate <= 0.0:
            return False  # not a flow the capacity rows read: let the solver decide
        load[uid] = load.get(uid, 0.0) + f / rate
    return fits(load, pr.result.n)


def _by_block(at: int, rounds: list[tuple[PlanResult, dict]], sim_of,
              resolve) -> tuple[tuple[PlanResult, dict], dict[str, int]]:
    """Round ``at`` (an index in ``rounds``: the cheapest round in which every model met, else the
    one closest to meeting), or the plan composed of each group of linked models' cheapest met round
    (hetinfra.plan.blocks) where that one meets in simulation and is cheaper (or round ``at``
    misses), with the round each model's plan is from."""
    from hetinfra.plan import blocks

    kept = rounds[at]
    as_kept = kept, {pm.spec.name: at + 1 for pm in kept[0].inputs.models}
    groups, picks = blocks.picks_by_group(rounds)
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


def _fleet_key(doc: dict) -> str:
    """What a simulation of plan.json depends on besides the spec: counts, routing, demand scale."""
    return json.dumps([[(a["unit"], a["count"]) for a in doc["allocations"]], doc["routing"], doc["demand_scale"]],
                      sort_keys=True)


def _round(rnd: int, doc: dict, sim: dict, g: dict[str, float], settling: bool) -> dict:
    used = {a["template"] for a in doc["allocations"]}
    return {"round": rnd, **({"settling": True} if settling else {}),
            "cost_usd_per_hour": doc["cost_usd_per_hour"], "met": sim["met"],
            "derate": {t: round(f, 6) for t, f in sorted(g.items()) if t in used},
            "models_met": {m["model"]: m["met"] for m in sim["models"]},
            "missed_units": sorted(u["unit"] for u in sim["units"] if u.get("count") and not u["objective"]["met"])}
