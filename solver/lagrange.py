r"""Lagrangian relaxation of the availability caps that link models, with a repair step.

For a component of models linked by shared caps whose per-model plans break some cap
(``solver.decompose``), each cap row ``sum_u a[u,g] n[u] <= cap[g]`` moves into the objective with a
price mu[g] >= 0:

    L(mu) = sum_m min { sum_u (cost[u] + sum_g mu[g] a[u,g]) n[u] + (churn, unmet) : model m's own rows }
            - sum_g mu[g] cap[g]

With a budget ``sum_u cost[u] n[u] <= B`` (when the component's plans break it), the budget row is
priced too, by lambda >= 0: every unit's cost gets lambda cost[u] added and L drops lambda B.

Every model's subproblem is independent (no caps, no budget), and L(mu, lambda) is a lower bound on
the joint optimum for every mu, lambda >= 0 (weak duality); with each subproblem's MIP *dual bound*
in place of its optimum it stays one. Without caps, units that differ only in their availability group
(the same template in several regions, outside the model's locality regions) are interchangeable:
only the cheapest at the current prices is kept (``solver.merge.merge_duplicates``), which makes the
subproblems a tenth of the size and exact.

mu (and lambda) follow projected subgradient steps (Polyak's rule against the best plan found, step factor
halved when the bound stalls), a fixed number of iterations: deterministic.

Each iteration's per-model plans are *repaired* into a plan that keeps every cap: models whose plan
fits in what the caps have left are kept (largest first), the others are re-solved one at a time
with the caps that remain as hard rows, on their units with room left (per interchangeable set,
the cheapest units until their room covers the model's demand). Then one fix-and-optimise pass
re-solves each model that uses a full group with all others fixed. A repaired plan over the budget
is no plan. The block reports the best repaired plan and the best L(mu) (and the per-model-with-caps floor) as its bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from hetinfra.solver import clock
from hetinfra.solver.ahead import ahead
from hetinfra.solver.memo import memo_has
from hetinfra.solver.merge import local_regions, merge_duplicates, network_profiles, set_key
from hetinfra.solver.result import SafetyStopped
from hetinfra.solver.problem import AllocationProblem, SolverUnit

#: subgradient iterations at most (each solves every model whose prices changed)
ITERATIONS = 12


@dataclass
class _Sub:
    bound: float
    objective: float
    counts: dict[str, int]
    nodes: int
    status: str


def _sub_key(p: AllocationProblem, extra: dict[str, float] | None, mip_gap: float, max_nodes: int) -> str:
    from hetinfra.solver.memo import memo_key

    return memo_key("sub", p, sorted((extra or {}).items()), mip_gap, max_nodes)


def _solve(p: AllocationProblem, extra: dict[str, float] | None, *, mip_gap: float, max_nodes: int,
           deadline: float, key: str | None = None, ready=None) -> _Sub | None:
    """One model's MIP, remembered by content (``solver.memo``); ``ready``: a future of ``_solve_mip``
    on these same arguments, started ahead (``solver.ahead``), taken in place of solving here."""
    from hetinfra.solver.memo import recall

    return recall(key or _sub_key(p, extra, mip_gap, max_nodes),
                  lambda: _solve_mip(p, extra, mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline), ready,
                  keep=lambda got: got is not None and got.status != "time_limit")


def _solve_mip(p: AllocationProblem, extra: dict[str, float] | None, *, mip_gap: float, max_nodes: int,
               deadline: float) -> _Sub | None:
    """``p``'s MIP (units priced up by ``extra``); a repair's from the greedy plan where that pays
    (``_repair_start``)."""
    from hetinfra.solver.direct import DirectModel

    dm = DirectModel(p, extra)
    values = _repair_start(dm, p, deadline) if extra is None else None
    o = dm.mip(time_limit_s=clock.remaining(deadline), mip_gap=mip_gap, max_nodes=max_nodes, start=values)
    if not o.has_solution:
        if o.status == "time_limit":
            raise SafetyStopped("a Lagrangian subproblem found no plan before the safety stop")
        return None
    bound = o.bound if o.bound is not None else -math.inf
    return _Sub(min(bound, o.objective), o.objective, dm.counts(o.values), o.nodes, o.status)


#: Units a repair's MIP needs for the greedy start to pay: on the 32-model capped fleet (issue 33)
#: the repairs' MIPs of 10 to 29 units took a third of the time from it (HiGHS skips its
#: first-solution heuristics, ``DirectModel._run``), those under 10 (the single-GPU baselines') as
#: long as without: there HiGHS runs as before. The MIP keeps its start unless it finds a strictly
#: cheaper plan, so among plans of equal cost the greedy's wins (its rule: the lowest $/h per req/s
#: first, i.e. more capacity for the money) where HiGHS's search order chose before: the 32-model
#: linked fleet --no-verify now runs one model on a10-x4 at TP 4 rather than TP 2 x PP 2, the same
#: instance and $/h (427.07 both); its verified plan and every golden plan are unchanged.
WARM_MIN_UNITS = 10


def _repair_start(dm, p: AllocationProblem, deadline: float) -> list[float] | None:
    """A repair's MIP start (one model with hard caps, no prices) of ``WARM_MIN_UNITS`` units or
    more: the feasibility-first greedy plan (``solver.heuristic``: a function of ``p`` alone, so the
    memo's key by content stays whole) completed by the fixed-count LP; None where there is none.
    Tried and not kept: each model's plan alone as the start of the first iteration's subproblems
    (the 32-model fleet's verified plan changed, $394.42 to $398.56/h)."""
    if len(p.units) < WARM_MIN_UNITS:
        return None
    from hetinfra.solver.heuristic import feasible_start

    found = feasible_start(p)
    if not found:
        return None
    o = dm.with_counts(found[0], clock.remaining(deadline))
    if o.status == "time_limit":  # a MIP without its start might find another plan: the cut must say so
        raise SafetyStopped("a repair's start was cut by the safety stop")
    return o.values if o.has_solution and o.status == "optimal" else None


def plan_cost(p: AllocationProblem, units: dict[str, SolverUnit], counts: dict[str, int]) -> float:
    """$/h of ``counts`` plus the churn penalty (unmet demand's penalty needs the routing)."""
    obj = sum(units[u].cost * c for u, c in counts.items())
    if p.running and p.churn_hours:
        obj += p.churn_hours * sum(units[u].cost * max(0, c - p.running.get(u, 0)) for u, c in counts.items())
    return obj


def _usage(units: dict[str, SolverUnit], counts: dict[str, int], groups) -> dict:
    used: dict = {}
    for uid, c in counts.items():
        for g, n in units[uid].gpu_use:
            if g in groups:
                used[g] = used.get(g, 0) + n * c
    return used


def capped_units(p: AllocationProblem, model: str, residual: dict, keep: dict[str, int]) -> AllocationProblem:
    """Model ``model`` alone with ``residual`` caps as hard rows, on its units with room left: per
    interchangeable set of a unit in ``keep`` (its plan before), the cheapest until their room covers
    the demand; of every other set the cheapest with room; ``keep``'s units always."""
    from hetinfra.solver.direct import instance_upper_bound

    local, network = local_regions(p), network_profiles(p)
    mine = [u for u in p.units if u.model == model]
    sets: dict[tuple, list[SolverUnit]] = {}
    for u in mine:
        if u.id not in keep and any(g in residual and residual[g] < n for g, n in u.gpu_use):
            continue
        sets.setdefault(set_key(p, u, local, network), []).append(u)
    chosen = []
    prefer = {set_key(p, u, local, network) for u in mine if u.id in keep}
    for k, members in sets.items():
        members.sort(key=lambda u: (u.cost, u.id))
        need = instance_upper_bound(p, members[0]) if k in prefer else 1
        room = 0
        for u in members:
            if room >= need and u.id not in keep:
                continue
            chosen.append(u)
            capped = [residual[g] // n for g, n in u.gpu_use if g in residual and n > 0]
            room += min(capped) if capped else need
    units = tuple(sorted(chosen, key=lambda u: u.id))
    groups = {g for u in units for g, _ in u.gpu_use if g in residual}
    return p.replace(units=units, caps={g: max(0, residual[g]) for g in groups}, budget=None,
                     demand={k: v for k, v in p.demand.items() if k[0] == model},
                     max_spot_fraction={m: f for m, f in p.max_spot_fraction.items() if m == model},
                     local_demand={k: v for k, v in p.local_demand.items() if k[0] == model},
                     running=p.running)  # the whole fleet: churn applies as in the joint problem


@dataclass
class LagrangeResult:
    counts: dict[str, int]  # the best repaired plan (keeps every cap)
    objective: float  # its objective (units' $/h + churn + unmet, per the ledger of each model's solve)
    bound: float  # best lower bound: max(floor, best L(mu))
    iterations: int
    nodes: int
    safety_stop: bool


def lagrangian(p: AllocationProblem, models: list[str], *, floor: float | None, mip_gap: float, max_nodes: int,
               deadline: float, iterations: int = ITERATIONS,
               first: dict[str, tuple[float, float, dict[str, int]]] | None = None) -> LagrangeResult | None:
    """Lagrangian bound and repaired plan for the component ``models`` of ``p`` (its own caps, and
    ``p.budget`` priced when set). ``first``: model -> (bound, objective, counts) of a solve alone
    (mu = 0; with the model's caps kept, which only strengthens the bound), used where within a tenth
    of ``mip_gap``. None when no repair keeps the caps and the budget."""
    units = {u.id: u for u in p.units}
    caps = {g: c for g, c in p.caps.items()}
    groups = set(caps)
    subs = {}
    for m in models:
        subs[m] = p.replace(units=tuple(u for u in p.units if u.model == m),
                            demand={k: v for k, v in p.demand.items() if k[0] == m},
                            max_spot_fraction={k: v for k, v in p.max_spot_fraction.items() if k == m},
                            local_demand={k: v for k, v in p.local_demand.items() if k[0] == m},
                            running=p.running, caps={}, budget=None)  # whole fleet: churn as in the joint problem
    kw = dict(mip_gap=mip_gap / 10, max_nodes=max_nodes, deadline=deadline)  # each subproblem's solve
    found = _search(p, models, subs, units, caps, groups, floor=floor, mip_gap=mip_gap, iterations=iterations,
                    first=first, kw=kw)
    if found is None:  # a model without a plan
        return None
    best, best_lb, size, done, nodes, stop = found
    if best is None:  # no repair kept the caps and the budget
        return None
    plan = best[1]
    if best[0] - best_lb <= mip_gap * max(abs(best[0]), 1e-9):
        counts = {u: c for cs in plan.values() for u, c in cs.items() if c > 0}
        return LagrangeResult(counts, best[0], best_lb, done, nodes, stop)
    nodes += _fix_and_optimise(p, models, plan, size, units, caps, groups, **kw)
    counts = {u: c for cs in plan.values() for u, c in cs.items() if c > 0}
    return LagrangeResult(counts, plan_cost(p, units, counts), best_lb, done, nodes, stop)


def _search(p: AllocationProblem, models: list[str], subs: dict[str, AllocationProblem], units: dict[str, SolverUnit],
            caps: dict, groups: set, *, floor: float | None, mip_gap: float, iterations: int, first, kw: dict):
    """The subgradient iterations (module docstring): (the best repaired plan as (objective, model ->
    counts) or None, the best bound, each model's first objective (the repair's order: largest
    first), the iterations done, the nodes spent, whether the clock cut a solve); None where a
    model has no plan."""
    budget = p.budget
    prices = _Prices({g: 0.0 for g in sorted(groups)})
    cache: dict[tuple, _Sub] = {}
    best_lb = floor if floor is not None else -math.inf
    best: tuple[float, dict[str, dict[str, int]]] | None = None
    nodes, stop, done, size = 0, False, 0, {}
    for it in range(iterations):
        done = it + 1
        solved = _solve_priced(models, subs, prices, first if it == 0 else None, cache, **kw)
        if solved is None:
            return None
        sols, spent, cut = solved
        nodes += spent
        stop |= cut
        lb = -sum(prices.mu[g] * caps[g] for g in prices.mu) - (prices.lam * budget if budget is not None else 0.0)
        for m in models:
            lb += sols[m].bound
        if it == 0:
            size = {m: sols[m].objective for m in models}
        improved = lb > best_lb + 1e-9 * max(1.0, abs(lb))
        best_lb = max(best_lb, lb)
        counts = {m: s.counts for m, s in sols.items()}
        order = sorted(models, key=lambda m: (-size[m], m))
        fixed = _repair(p, counts, order, caps, **kw)
        if fixed is not None and _within(budget, units, fixed):
            obj = sum(v[1] for v in fixed.values())
            if best is None or obj < best[0] - 1e-9:
                best = (obj, {m: v[0] for m, v in fixed.items()})
        if clock.now() > kw["deadline"]:
            stop = True
            break
        if best is not None and best[0] - best_lb <= mip_gap * max(abs(best[0]), 1e-9):
            break
        grad, over, norm = prices.subgradient(units, counts, caps, groups, budget)
        if norm == 0:
            break
        prices.step(grad, over, norm, improved, best[0] if best is not None else best_lb * (1 + 2 * mip_gap), lb)
    return best, best_lb, size, done, nodes, stop


@dataclass
class _Prices:
    """The caps' prices mu, the budget row's lambda, and the step rule's state: Polyak's step factor
    theta and the iterations since the bound last improved."""
    mu: dict
    lam: float = 0.0
    theta: float = 1.0
    stall: int = 0

    def subgradient(self, units: dict[str, SolverUnit], counts: dict[str, dict[str, int]], caps: dict, groups: set,
                    budget: float | None) -> tuple[dict, float, float]:
        """At the per-model plans ``counts``: each cap's excess and the budget's (0 where the row is
        slack and its price 0: the projection), and their squared norm."""
        used = _usage(units, {u: c for cs in counts.values() for u, c in cs.items()}, groups)
        grad = {g: used.get(g, 0) - caps[g] for g in self.mu}
        grad = {g: (s if (s > 0 or self.mu[g] > 0) else 0.0) for g, s in grad.items()}
        over = _spend(units, counts) - budget if budget is not None else 0.0
        over = over if (over > 0 or self.lam > 0) else 0.0
        return grad, over, sum(s * s for s in grad.values()) + over * over

    def step(self, grad: dict, over: float, norm: float, improved: bool, target: float, lb: float) -> None:
        """Polyak's step from the bound ``lb`` towards ``target``, projected onto prices >= 0; theta
        halved after two iterations without a better bound."""
        self.stall = 0 if improved else self.stall + 1
        if self.stall >= 2:
            self.theta, self.stall = self.theta / 2, 0
        step = self.theta * max(target - lb, 1e-6 * max(1.0, abs(lb))) / norm
        self.mu = {g: max(0.0, self.mu[g] + step * grad[g]) for g in self.mu}
        self.lam = max(0.0, self.lam + step * over)


def _solve_priced(models: list[str], subs: dict[str, AllocationProblem], prices: _Prices, first, cache: dict, *,
                  mip_gap: float, max_nodes: int, deadline: float) -> tuple[dict[str, _Sub], int, bool] | None:
    """Each model's subproblem at ``prices`` (its units priced up by them, merged), solved or taken from
    ``cache``, or ``first``'s solve alone where that is within ``mip_gap`` (a tenth of the block's);
    new solves run ahead in threads (``solver.ahead``). (model -> solve, nodes spent, whether the
    clock cut one); None where a model has no plan."""
    todo = {}  # model -> (its priced, merged subproblem, the prices, this run's key, the memo's key)
    for m in models:
        if first and m in first and first[m][1] - first[m][0] <= mip_gap * max(abs(first[m][1]), 1e-9):
            continue
        extra = {u.id: sum(prices.mu[g] * n for g, n in u.gpu_use if g in prices.mu) + prices.lam * u.cost
                 for u in subs[m].units}
        red = merge_duplicates(subs[m], extra)
        key = (m, tuple((u.id, extra[u.id]) for u in red.units))
        todo[m] = (red, extra, key, _sub_key(red, extra, mip_gap, max_nodes) if key not in cache else None)
    jobs = {m: partial(_solve_mip, red, extra, mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline)
            for m, (red, extra, _, mkey) in todo.items() if mkey is not None and not memo_has(mkey)}
    sols: dict[str, _Sub] = {}
    nodes, stop = 0, False
    with ahead(jobs) as ready:
        for m in models:
            if m not in todo:  # solved alone within a tenth of mip_gap, mu = 0
                b, o, c = first[m]
                sols[m] = _Sub(b, o, c, 0, "optimal")
                continue
            red, extra, key, mkey = todo[m]
            if key not in cache:
                got = _solve(red, extra, mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, key=mkey,
                             ready=ready.get(m))
                if got is None:
                    return None
                nodes += got.nodes
                stop |= got.status == "time_limit"
                cache[key] = got
            sols[m] = cache[key]
    return sols, nodes, stop


def _fix_and_optimise(p: AllocationProblem, models: list[str], plan: dict[str, dict[str, int]], size: dict,
                      units: dict[str, SolverUnit], caps: dict, groups: set, *, mip_gap: float, max_nodes: int,
                      deadline: float) -> int:
    """Each model on a full group re-solved with all others fixed, largest first (by ``size``), its
    plan in ``plan`` replaced where cheaper and within the budget; returns the nodes spent."""
    nodes = 0
    used = _usage(units, {u: c for cs in plan.values() for u, c in cs.items()}, groups)
    full = {g for g in groups if used.get(g, 0) >= caps[g]}
    for m in sorted(models, key=lambda m: (-size[m], m)):
        if not any(g in full for u in plan[m] for g, _ in units[u].gpu_use):
            continue
        mine = _usage(units, plan[m], groups)
        residual = {g: caps[g] - used.get(g, 0) + mine.get(g, 0) for g in groups}
        got = _solve(capped_units(p, m, residual, plan[m]), None, mip_gap=mip_gap, max_nodes=max_nodes,
                     deadline=deadline)
        if got is None:
            continue
        nodes += got.nodes
        cur, new = plan_cost(p, units, plan[m]), plan_cost(p, units, got.counts)
        if new < cur - 1e-9 and _within(p.budget, units, {**plan, m: got.counts}):
            plan[m] = got.counts
            used = _usage(units, {u: c for cs in plan.values() for u, c in cs.items()}, groups)
    return nodes


def _spend(units: dict[str, SolverUnit], plans: dict[str, dict[str, int]]) -> float:
    """$/h of per-model plans as the budget row counts it (instances only, no churn)."""
    return sum(units[u].cost * c for cs in plans.values() for u, c in cs.items())


def _within(budget: float | None, units: dict[str, SolverUnit], plans: dict) -> bool:
    """Per-model plans (model -> counts, or -> (counts, $/h)) keep the budget."""
    if budget is None:
        return True
    counts = {m: (v[0] if isinstance(v, tuple) else v) for m, v in plans.items()}
    return _spend(units, counts) <= budget * (1 + 1e-9)


def _repair(p: AllocationProblem, counts: dict[str, dict[str, int]], order: list[str], caps: dict, *,
            mip_gap: float, max_nodes: int, deadline: float) -> dict[str, tuple[dict[str, int], float]] | None:
    """Per-model plans made to keep every cap (see the module docstring); model -> (counts, $/h)."""
    units = {u.id: u for u in p.units}
    residual = dict(caps)
    out: dict[str, tuple[dict[str, int], float]] = {}
    misfit = []
    for m in order:
        use = _usage(units, counts[m], residual)
        if all(v <= residual[g] for g, v in use.items()):
            for g, v in use.items():
                residual[g] -= v
            out[m] = (counts[m], plan_cost(p, units, counts[m]))
        else:
            misfit.append(m)
    for m in misfit:
        got = _solve(capped_units(p, m, residual, counts[m]), None, mip_gap=mip_gap, max_nodes=max_nodes,
                     deadline=deadline)
        if got is None:
            return None
        for g, v in _usage(units, got.counts, residual).items():
            residual[g] -= v
        out[m] = (got.counts, plan_cost(p, units, got.counts))
    return out
