"""The plan stage's resolve, templates and solve steps (``hetinfra.plan.pipeline`` runs them, then
verification and the document): spec -> inputs -> units -> AllocationProblem -> solve -> PlanResult.

I/O happens only at the ends (reading the spec and its files; the CLI writes artifacts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.errors import InfeasibleError
from hetinfra.plan.inputs import PlanInputs
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.spec.origins import origin_shares
from hetinfra.plan.library import Template, TemplateUnit, with_fields
from hetinfra.facts import MAX_GPUS
from hetinfra.plan.plausible import plausibility_warnings
from hetinfra.plan.origins import (class_problem, declares_origins, describe_key, flow_rated, fold, unknown_places,
                                   with_origins)
from hetinfra.plan.purchase import demand_periods
from hetinfra.plan.prune import prune_copies, prune_dominated, resident_regions
from hetinfra.plan.adapters import adapter_problem
from hetinfra.plan.variants import raise_floors
# moved out of this module; importers keep importing them from here
from hetinfra.plan.running import read_running, running_allocations, running_factors, state_file  # noqa: F401
from hetinfra.plan.staging import Staged, prepare, start_factors  # noqa: F401


@dataclass
class Baseline:
    gpu: str
    feasible: bool
    cost: float | None = None
    instances: int = 0
    allocation: dict[str, int] | None = None  # unit id -> count
    reason: str | None = None
    #: the shared wall-clock limit cut this baseline's solve (or left it no time): it may differ on a faster machine
    safety_stop: bool = False


@dataclass
class PlanResult:
    inputs: PlanInputs
    units: dict[str, TemplateUnit]
    problem: AllocationProblem
    result: "object"  # hetinfra.solver.solve.SolveResult
    baselines: list[Baseline]
    template_cache: dict | None = None  # where libraries came from (hetinfra.plan.template_cache)
    #: every unit before pruning, rates as estimated: one list that every round's plan shares, never edited
    all_units: list[TemplateUnit] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)  # unit -> count of the deployment re-planned against
    derate: dict[str, float] = field(default_factory=dict)  # template id -> factor its rates were scaled by
    warnings: list[str] = field(default_factory=list)  # the solve's (safety stop, fleet size)
    #: $/h of the plan without committed terms (plan.purchase.without_committed), with the baselines
    flexible_cost: float | None = None


def derated(units: list[TemplateUnit], derate: dict[str, float], memo: dict | None = None) -> list[TemplateUnit]:
    """``units`` with the rates of the templates in ``derate`` scaled by their factor (verification
    found them slower than estimated: hetinfra.plan.verify). A template's units share one derated
    template, as they share the estimated one. ``memo`` (a dict kept by the caller, e.g. the inputs'
    ``reuse``): a unit derated by the same factor before is that same object again, so what is
    remembered by identity downstream (``prune.prune_dominated``) is found again."""
    if not derate:
        return units
    memo = {} if memo is None else memo
    scaled: dict[int, Template] = {}  # id of an estimated template -> its derated copy
    out = []
    for u in units:
        t = u.template
        f = derate.get(t.id)
        if f is None:
            out.append(u)
            continue
        hit = memo.get(id(u))  # (the unit, so its id stays its own; factor; the derated unit)
        if hit is None or hit[1] != f:
            new = scaled.get(id(t))
            if new is None:
                new = scaled[id(t)] = with_fields(t, rates={w: r * f for w, r in t.rates.items()})
            hit = memo[id(u)] = (u, f, u.with_template(new))
        out.append(hit[2])
    return out


def to_problem(inputs: PlanInputs, units: list[TemplateUnit], running: dict[str, int] | None = None) -> AllocationProblem:
    spec = inputs.spec
    settings = spec.planning
    demand = {(pm.spec.name, c.name): c.rate_rps for pm in inputs.models for c in pm.classes}
    data = tuple(SolverUnit(u.id, u.model, u.cost, u.gpus, tuple(sorted(u.gpu_use.items())), dict(u.template.rates),
                          u.region, u.spot, u.committed)
                 for u in units)
    unit_ids = {x.id for x in data}
    local: dict[tuple[str, str], float] = {}
    for pm in inputs.models:
        origins = origin_shares(pm.spec.demand.origins)
        total = sum(origins.values())
        for region, share in origins.items():
            local[(pm.spec.name, region)] = pm.spec.demand.rate_rps * share / total
    return adapter_problem(inputs, units, AllocationProblem(  # LoRA: slots and adapters to place
        units=data, demand=demand, caps=dict(inputs.caps), budget=spec.budget_usd_per_hour,
        headroom=settings.headroom, objective=settings.objective, routing=settings.routing,
        slice_factor=settings.slice_factor,
        max_spot_fraction={pm.spec.name: pm.spec.max_spot_fraction for pm in inputs.models},
        local_demand=local, locality=settings.locality,
        running={u: n for u, n in (running or {}).items() if u in unit_ids},
        churn_hours=settings.churn_penalty_hours / settings.churn_payback_hours,  # one-off, per hour of payback
        unmet_penalty=settings.unmet_penalty_usd_per_rps_hour if settings.allow_unmet else None,
        periods=demand_periods(spec), solver=settings.solver))


def unlocal(problem: AllocationProblem) -> tuple[str, str] | None:
    """The first (model, region) whose local demand no unit of ``problem`` in that region can serve
    under ``planning.locality`` (None: every one can): the plan, and each single-GPU baseline, is
    then infeasible whatever the counts."""
    if problem.locality <= 0:
        return None
    for (model, region), lam in sorted(problem.local_demand.items()):
        if lam > 0 and not any(u.model == model and u.region == region for u in problem.units):
            return model, region
    return None


def _check_locality(problem: AllocationProblem) -> None:
    missing = unlocal(problem)
    if missing is not None:
        model, region = missing
        raise InfeasibleError(
            f"model {model}: locality {problem.locality:g} needs capacity in {region}, but no allowed offer there "
            "can serve it", hint=f"allow a GPU offered in {region}, drop it from demand.origins, or lower locality")


def plan(spec_path: str | Path, *, with_baselines: bool = True, **prepare_kwargs) -> PlanResult:
    """Plan the spec at ``spec_path`` without verification (:func:`prepare`, then :func:`solve_units`);
    ``hetinfra plan`` runs the whole pipeline, ``hetinfra.plan.pipeline``."""
    staged = prepare(spec_path, **prepare_kwargs)
    return solve_units(staged.inputs, staged.units, staged.running, with_baselines=with_baselines,
                       derate=staged.derate, template_cache=staged.template_cache)


def solve_units(inputs: PlanInputs, all_units: list[TemplateUnit], running: dict[str, int], *, with_baselines: bool = True,
                derate: dict[str, float] | None = None, template_cache: dict | None = None,
                overrides: dict | None = None, start: dict[str, int] | None = None) -> PlanResult:
    """Prune ``all_units`` (rates scaled by ``derate``), solve the allocation, diagnose infeasibility,
    and (``with_baselines``) solve the single-GPU-type baselines. ``overrides``: AllocationProblem
    fields replaced (hetinfra.plan.verify.verification_overrides); ``start``: unit id -> count of a
    plan to start the solver from (the last verification round's)."""
    spec = inputs.spec
    pool = pool_at(inputs, all_units, running, derate)
    settings = spec.planning
    unit_list, problem, result = _solve_pool(inputs, pool, running, overrides, start)
    if not result.feasible:
        if result.status == "no_solution":
            raise InfeasibleError(f"the solver found no plan within time_limit_s={settings.time_limit_s:g} "
                                  f"and max_nodes={settings.max_nodes}",
                                  hint="raise planning.time_limit_s or planning.max_nodes")
        from hetinfra.plan.diagnose import diagnose
        from hetinfra.plan.origins import residency_diagnosis, residency_note

        from hetinfra.plan.budget import current

        raise residency_diagnosis(inputs, problem) or residency_note(  # hetinfra.plan.diagnose
            inputs, diagnose(problem, current().solve_limit(settings.time_limit_s), settings.mip_gap))
    if problem.objective == "max_throughput" and (result.scale or 0) <= 1e-9:
        cheapest = min(u.cost for u in unit_list)
        raise InfeasibleError(
            f"budget ${problem.budget:g}/h buys no serving capacity within the availability caps "
            f"(cheapest usable instance: ${cheapest:.2f}/h)",
            hint="raise budget_usd_per_hour or the availability caps")
    unit_list, problem, result = raise_floors(inputs, pool, (unit_list, problem, result),
                                              lambda units: _solve_pool(inputs, units, running, overrides, start))
    units = {u.id: u for u in unit_list}
    warnings = list(result.warnings) + unknown_places(inputs, list(units.values()))
    gpus = sum(units[u].gpus * c for u, c in result.n.items())
    if gpus > WARN_GPUS:
        warnings.append(f"this plan needs {gpus:,} GPUs; is rate_rps right?")
    warnings += plausibility_warnings(inputs, gpus, result.leaves_unmet)
    pr = PlanResult(inputs, units, problem, result, [], template_cache, all_units, dict(running),
                    dict(derate or {}), warnings)
    if with_baselines:
        pr.baselines, pr.flexible_cost = compared_with(pr, pool)
    return pr


def candidates(inputs: PlanInputs, all_units: list[TemplateUnit], running: dict[str, int]) -> list[TemplateUnit]:
    """``all_units`` less the copies another copy of their template dominates at any factor
    (``prune.prune_copies``; none where origins judge each region on its own rates), once per unit
    list and running fleet (kept on ``inputs.reuse``): what each round derates and prunes."""
    # by the list's identity (the memo holds it, so no other list takes its id; plans share it, unchanged)
    key = (id(all_units), tuple(sorted(running.items())))
    hit = inputs.reuse.get("candidates")
    if hit is not None and hit[0] == key:
        return hit[2]
    if declares_origins(inputs):
        pool = list(all_units)
    else:
        pool = prune_copies(all_units, capped=set(inputs.caps), regional=inputs.spec.planning.locality > 0,
                            keep=set(running), resident=resident_regions(inputs.spec))
    inputs.reuse["candidates"] = (key, all_units, pool)
    return pool


def pool_at(inputs: PlanInputs, all_units: list[TemplateUnit], running: dict[str, int],
            derate: dict[str, float] | None) -> list[TemplateUnit]:
    """What a solve at these factors prunes and a plan's baselines are priced over: the
    :func:`candidates` with their templates' rates scaled by ``derate`` (:func:`derated`, remembered
    on the inputs' ``reuse``)."""
    return derated(candidates(inputs, all_units, running), derate or {}, inputs.reuse.setdefault("derated", {}))


def prune_by_flows(inputs: PlanInputs, pool: list[TemplateUnit], *, regional: bool = False,
                   keep: set[str] = frozenset(), memo: object = "pruned") -> list[TemplateUnit]:
    """``prune_dominated`` over ``pool``; with origins, per region and judged on the per-origin rates
    the ILP uses (``origins.flow_rated``), the units returned as they are (in pruning's order).
    ``memo``: the name on the inputs' ``reuse`` of the pruning memo (one pruning per bucket): a pool
    whose buckets hold other units than the plan's (a single-GPU baseline's) keeps its own, so that
    neither evicts the other's."""
    resident = resident_regions(inputs.spec)  # an adapter's residency regions keep their own base units
    if not declares_origins(inputs):
        return prune_dominated(pool, capped=set(inputs.caps), regional=regional, keep=keep,
                               memo=inputs.reuse.setdefault(memo, {}), resident=resident)
    rated = flow_rated(inputs, pool, to_problem(inputs, pool))
    kept = prune_dominated(rated, capped=set(inputs.caps), regional=True, keep=keep, resident=resident)
    by_id = {u.id: u for u in pool}
    return [by_id[u.id] for u in kept]


def _solve_pool(inputs: PlanInputs, pool: list[TemplateUnit], running: dict[str, int], overrides: dict | None = None,
                start: dict[str, int] | None = None):
    """Prune ``pool`` and solve its allocation: (kept units, problem, result), within what is left of
    the plan's work budget (``hetinfra.plan.budget``; a cut solve is recorded there)."""
    from hetinfra.plan.budget import current
    from hetinfra.solver.solve import solve

    settings = inputs.spec.planning
    unit_list = prune_by_flows(inputs, pool, regional=settings.locality > 0, keep=set(running))
    problem = to_problem(inputs, unit_list, running)
    if overrides:
        problem = problem.replace(**overrides)
    _check_locality(problem)
    check_scale(problem)
    routed = with_origins(inputs, unit_list, problem)  # per (origin, class) where origins are declared
    budget = current()
    result = solve(routed, time_limit_s=budget.solve_limit(settings.time_limit_s), mip_gap=settings.mip_gap,
                   with_lp_bound=True, max_nodes=settings.max_nodes, start=start)
    if result.safety_stop:
        budget.stop("a solve")
    if routed is problem or not result.feasible:
        return unit_list, routed, result
    return unit_list, class_problem(routed, problem), fold(routed, result)


#: a single-GPU baseline's reason where the time limit left it with no plan
CUT_BASELINE = "no plan within the baselines' time limit"


def baselines(inputs: PlanInputs, all_units: list[TemplateUnit], time_limit_s: float, mip_gap: float,
              max_nodes: int | None = None, headroom: float | None = None,
              stale: Callable[[], bool] | None = None) -> list[Baseline]:
    """Mélange's comparison: the cheapest plan using one GPU type only (caps and locality kept, no
    budget: a fleet the spec's rules forbid is no comparison; an H100-only baseline that served a
    us-central1 origin from eastus under locality 0.5 read "this plan saves -16.7%"), sized
    with ``headroom`` (None: the spec's), the plan's own: a verified plan's ILP sizes for the
    verification load (hetinfra.plan.verify.verification_overrides), and its factors are what meets
    there, so a baseline at the spec's headroom was sized for less demand than the plan it is
    compared with (a 32B coder's H100-only baseline read $34.90/h, 20% below its $41.88/h plan: the
    very fleet verification's round 4 had seen miss).

    Each GPU type's units are pruned among themselves: a unit dominated by another GPU type's
    unit in the joint problem may be the best of its own type. All GPU types share one
    ``time_limit_s`` (a safety stop: what is left of the plan's budget; ``max_nodes`` is the deterministic limit), and each solve
    decomposes per model (no budget; locality is per model: nothing links them unless a cap is shared).
    ``stale()`` true: the plan they compare has been replaced (a veto sent verification's search back),
    so no further GPU type is solved and what is returned is thrown away. Once ``time_limit_s`` has
    passed no further GPU type's model is built either: each is listed with no plan, as cut (its
    ``safety_stop``, which the caller records in the work budget)."""
    from hetinfra.solver import clock

    deadline = clock.now() + time_limit_s
    out = []
    by_gpu: dict[str, list[TemplateUnit]] = {}
    for u in all_units:
        if len(u.gpu_use) == 1:  # one GPU type (not a heterogeneous bundle's two)
            by_gpu.setdefault(u.template.gpu, []).append(u)
    for gpu in sorted({u.template.gpu for u in all_units if not u.template.mixed and u.template.gpu in by_gpu}):
        if stale is not None and stale():
            break
        if clock.now() >= deadline:  # building a model only to give it a solve's floor (solver.solve.MIP_FLOOR_S)
            out.append(Baseline(gpu, False, reason=CUT_BASELINE, safety_stop=True))
            continue
        own = prune_by_flows(inputs, by_gpu[gpu], memo=("pruned", gpu))  # beside the rounds' own memo
        sub = with_origins(inputs, own, to_problem(inputs, own)).replace(
            budget=None, objective="min_cost", running={}, unmet_penalty=None)
        if headroom is not None:
            sub = sub.replace(headroom=headroom)
        reason = _unservable(sub, gpu)
        nodes = {u.id: u.template.nodes for u in own}
        out.append(Baseline(gpu, False, reason=reason) if reason else
                   _solved(sub, gpu, nodes, clock.remaining(deadline), mip_gap, max_nodes))
    return out


def _solved(sub: AllocationProblem, gpu: str, nodes: dict[str, int], time_limit_s: float, mip_gap: float,
            max_nodes: int | None) -> Baseline:
    """The single-GPU baseline ``sub`` of ``gpu`` solved: its cost, counts and instances (each unit's
    replicas x its ``nodes`` per replica, as allocations[].instances counts them: summing replicas
    showed a 3-node H200 bundle's 12 instances as 4), or why it has none."""
    from hetinfra.solver.solve import solve

    r = solve(sub, time_limit_s=time_limit_s, mip_gap=mip_gap, max_nodes=max_nodes)
    stop = r.safety_stop or r.status in ("time_limit", "no_solution")
    if not r.feasible:
        caps = "availability caps too small to serve all demand" + (
            f" with locality {sub.locality:g}" if sub.locality > 0 and sub.local_demand else "")
        return Baseline(gpu, False, reason=caps if r.status == "infeasible" else CUT_BASELINE, safety_stop=stop)
    instances = sum(c * nodes[u] for u, c in r.n.items())
    return Baseline(gpu, True, cost=r.cost(sub), instances=instances, allocation=dict(r.n), safety_stop=stop)


def _unservable(sub: AllocationProblem, gpu: str) -> str | None:
    """Why a single-GPU baseline ``sub`` cannot serve its demand whatever its counts (None: it may)."""
    missing = sub.unserved()
    if missing:
        return f"cannot serve {missing[0][0]} requests {describe_key(sub, missing[0])} under the SLOs"
    unmet = unlocal(sub)
    if unmet is not None:
        return f"locality {sub.locality:g}: no {gpu} offer in {unmet[1]} can serve {unmet[0]}"
    return None


def compared_with(pr: PlanResult, pool: list[TemplateUnit], stale: Callable[[], bool] | None = None
                  ) -> tuple[list[Baseline], float | None]:
    """What the plan is compared with (min_cost only; else nothing): the cheapest plan on each single
    GPU type over ``pool`` (Mélange's baselines) and the plan's cost without committed terms;
    ``stale``: see :func:`baselines`."""
    from hetinfra.plan.purchase import without_committed

    if pr.problem.objective != "min_cost":
        return [], None
    return single_gpu_baselines(pr.inputs, pool, pr.problem.headroom, stale), without_committed(pr)


def single_gpu_baselines(inputs: PlanInputs, pool: list[TemplateUnit], headroom: float | None = None,
                         stale: Callable[[], bool] | None = None) -> list[Baseline]:
    """:func:`baselines` over ``pool`` (sized with ``headroom``: the plan's; None, the spec's) within
    what is left of the plan's work budget (a cut is recorded there); ``stale``: see :func:`baselines`."""
    from hetinfra.plan.budget import current

    settings = inputs.spec.planning
    budget = current()
    found = baselines(inputs, pool, budget.solve_limit(settings.time_limit_s), settings.mip_gap, settings.max_nodes,
                      headroom, stale)
    if any(b.safety_stop for b in found):
        budget.stop("the single-GPU baselines")  # hetinfra.plan.pipeline.BASELINES
    return found


#: A plan needing more GPUs than this gets a warning; one certain to need more than MAX_GPUS
#: (hetinfra.facts: plan.json's bound on an allocation's replicas too) is refused.
WARN_GPUS = 10_000


def fewest_gpus(problem: AllocationProblem) -> dict[str, float]:
    """Per model, a lower bound on the GPUs any plan needs: each class on the unit with the most req/s
    per GPU for it (capacity is additive, so no mix of units does better)."""
    out: dict[str, float] = {}
    peak = {m: max(per.multiplier(m) for per in problem.periods) for m, _ in problem.demand} if problem.periods else {}
    by_model: dict[str, list] = {}
    for u in problem.units:
        by_model.setdefault(u.model, []).append(u)
    for (model, w), lam in problem.demand.items():
        lam *= peak.get(model, 1.0)
        best = max((u.rates[w] * (1 - problem.headroom) / u.gpus for u in by_model.get(model, ())
                    if u.rates.get(w, 0) > 0 and u.gpus > 0), default=None)
        if best:
            out[model] = out.get(model, 0.0) + lam / best
    return out


def check_scale(problem: AllocationProblem) -> None:
    """Refuse demand no sane fleet serves (before the solver spends its time on it)."""
    from hetinfra.errors import InvalidInputError

    need = fewest_gpus(problem)
    if problem.objective == "min_cost" and sum(need.values()) > MAX_GPUS:
        # name the model that needs most, at the rate that needs it: its profile's peak where it has
        # one (a profile [1e-300, 1000000] read "demand 12 req/s needs 1,128,965 GPUs")
        model = max(need, key=need.get)
        rate = sum(v for (m, _), v in problem.demand.items() if m == model)
        peak = max((per.multiplier(model) for per in problem.periods), default=1.0)
        at = f"{rate * peak:,.6g} req/s" + (f" at its profile's peak ({rate:,.6g} x {peak:,.6g})" if peak != 1 else "")
        total = f"; {math.ceil(sum(need.values())):,} for all models" if len(need) > 1 else ""
        raise InvalidInputError(
            f"model {model}: demand {at} needs at least {math.ceil(need[model]):,} GPUs{total}, more than "
            f"hetinfra plans ({MAX_GPUS:,} GPUs in all); is rate_rps right?",
            hint="check demand.rate_rps (requests per second, not per day or month)"
                 + (" and demand.profile (multipliers of rate_rps)" if peak != 1 else ""))
