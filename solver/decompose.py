"""Exact decomposition of the allocation ILP into blocks of models.

What links models: an availability cap on a (cloud, region, gpu) group that units of more than one
model count under, the budget, and the max_throughput objective (one demand scale for all).
Spot fractions, locality, churn and unmet demand are per model, so they do not link.

min_cost (the default):

1. Each model alone, every cap in full and no budget: a relaxation of the joint problem, so the
   sum of the per-model bounds bounds the joint optimum from below.
2. Models linked by shared caps form components. A component whose per-model plans together keep
   every shared cap is solved: the relaxation's answer is feasible, so it is optimal within the
   per-model gaps (method ``independent``). Otherwise a component of up to ``JOINT_MAX_UNITS``
   units is solved jointly (``joint``), starting from the feasibility-first heuristic, with the sum
   of its per-model bounds as a valid floor under the objective (so the reported gap is against the
   better of the two bounds); a larger one by Lagrangian relaxation of its caps with repair
   (``lagrangian``, ``solver.lagrange``), falling back to ``joint`` when no repair keeps the caps.
   With caps, each model alone is first solved on merged units without them (``solve_alone``).
3. A budget that the combined plan keeps costs nothing; one it breaks makes the whole problem one
   block solved jointly the same way (``joint (budget)``).

Each block: one ``DirectModel`` in one HiGHS instance: LP relaxation (bound, rounded start), the
candidate starts completed by fixed-count LPs, then the MIP from the best start, skipped when the
start is already within ``mip_gap`` of the bound. HiGHS runs single-threaded with a fixed seed
and stops at ``max_nodes`` nodes (deterministic); the wall-clock limit is a safety stop.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

#: Branch-and-bound nodes per MIP: the deterministic stop (the wall clock is only a safety stop).
DEFAULT_MAX_NODES = 2000
#: A linked component with more units than this is solved by Lagrangian relaxation and repair
#: (``solver.lagrange``) rather than as one joint MIP.
JOINT_MAX_UNITS = 400
#: seconds the first complete warm start may take to price, even past the wall-clock safety stop
START_FLOOR_S = 10.0
SAFETY_WARNING = "time limit hit: plan may differ on a faster machine (raise planning.time_limit_s)"


@dataclass
class Block:
    models: list[str]
    method: str
    status: str  # optimal, node_limit, time_limit, infeasible, no_solution
    objective: float | None = None
    bound: float | None = None
    lp_bound: float | None = None
    n: dict = field(default_factory=dict)
    flow: dict = field(default_factory=dict)
    unmet: dict = field(default_factory=dict)
    extra_gpus: dict = field(default_factory=dict)
    scale: float | None = None
    warm_start: str | None = None
    warm_start_objective: float | None = None
    size: dict = field(default_factory=dict)
    nodes: int = 0
    safety_stop: bool = False
    iterations: int = 0  # Lagrangian iterations (method "lagrangian")

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "node_limit", "time_limit")

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        return max(0.0, abs(self.objective - self.bound) / max(abs(self.objective), 1e-9))

    def record(self) -> dict:
        r = lambda x: None if x is None else round(x, 6)  # noqa: E731
        return {"models": list(self.models), "method": self.method, "status": self.status,
                "objective": r(self.objective), "bound": r(self.bound), "gap": r(self.gap), "nodes": self.nodes,
                "warm_start": self.warm_start, "iterations": self.iterations}


def restrict(p: AllocationProblem, models: list[str], *, budget: bool) -> AllocationProblem:
    """The sub-problem of ``models``: their units, demand, spot fractions, locality, running units."""
    keep = set(models)
    units = tuple(u for u in p.units if u.model in keep)
    ids = {u.id for u in units}
    return p.replace(units=units, demand={k: v for k, v in p.demand.items() if k[0] in keep},
                     budget=p.budget if budget else None,
                     max_spot_fraction={m: f for m, f in p.max_spot_fraction.items() if m in keep},
                     local_demand={k: v for k, v in p.local_demand.items() if k[0] in keep},
                     running={u: c for u, c in p.running.items() if u in ids},
                     tied=tuple(g for g in p.tied if all(u in ids for u in g)),
                     nested=tuple(pair for pair in p.nested if all(u in ids for u in pair)))


def components(p: AllocationProblem) -> list[list[str]]:
    """Models linked by capped groups that units of several models count under (union-find)."""
    models = sorted({m for m, _ in p.demand})
    parent = {m: m for m in models}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    users: dict[tuple, set] = {}
    for u in p.units:
        if u.model in parent:
            for g, _ in u.gpu_use:
                if g in p.caps:
                    users.setdefault(g, set()).add(u.model)
    model_of = {u.id: u.model for u in p.units}
    for group in p.tied + p.nested:  # a committed base, a top-up's scale-out link the periods' copies
        users.setdefault(("linked", group[0]), set()).update(model_of[u] for u in group if model_of[u] in parent)
    for ms in users.values():
        first, *rest = sorted(ms)
        for m in rest:
            parent[find(m)] = find(first)
    comps: dict[str, list[str]] = {}
    for m in models:
        comps.setdefault(find(m), []).append(m)
    return sorted(comps.values())


def _links_kept(p: AllocationProblem, n: dict[str, int]) -> bool:
    """Per-model plans together keep the caps, every committed base (one count in all periods) and
    every scale-out row."""
    return (_caps_kept(p, n) and all(len({n.get(u, 0) for u in g}) == 1 for g in p.tied)
            and all(n.get(u, 0) <= n.get(v, 0) for u, v in p.nested))


def _caps_kept(p: AllocationProblem, n: dict[str, int]) -> bool:
    used: dict[tuple, int] = {}
    for u in p.units:
        c = n.get(u.id, 0)
        if c:
            for g, gp in u.gpu_use:
                if g in p.caps:
                    used[g] = used.get(g, 0) + gp * c
    return all(v <= p.caps[g] for g, v in used.items())


def _merge(blocks: list[Block], models: list[str], method: str) -> Block:
    out = Block(models, method, "optimal")
    order = ("infeasible", "no_solution", "time_limit", "node_limit", "optimal")
    out.status = min((b.status for b in blocks), key=order.index)
    for b in blocks:
        out.n.update(b.n)
        out.flow.update(b.flow)
        out.unmet.update(b.unmet)
        out.nodes += b.nodes
        out.safety_stop |= b.safety_stop
        for k, v in b.size.items():
            out.size[k] = out.size.get(k, 0) + v

    def total(attr):
        vals = [getattr(b, attr) for b in blocks]
        return None if any(v is None for v in vals) else sum(vals)

    out.objective, out.bound, out.lp_bound = total("objective"), total("bound"), total("lp_bound")
    starts = {b.warm_start for b in blocks}
    out.warm_start = starts.pop() if len(starts) == 1 else ("mixed" if starts else None)
    out.warm_start_objective = total("warm_start_objective") if out.warm_start else None
    return out


def solve_block(p: AllocationProblem, models: list[str], method: str, *, mip_gap: float, max_nodes: int,
                deadline: float, warm: bool = True, floor: float | None = None,
                start: dict[str, int] | None = None) -> Block:
    """One block in one persistent HiGHS model (see the module docstring). ``start``: an earlier
    plan's counts (``solve(start=...)``), tried last among the starts (so it wins only when strictly
    cheaper), on this block's units only."""
    from hetinfra.solver.direct import DirectModel
    from hetinfra.solver.heuristic import feasible_start

    def left() -> float:
        return max(1e-3, deadline - time.perf_counter())

    dm = DirectModel(p)
    blk = Block(models, method, "infeasible", size=dm.size())
    if dm.trivially_infeasible:
        return blk
    lp = dm.relaxation(left())
    if lp.status == "infeasible":
        return blk
    if lp.status == "time_limit":
        blk.safety_stop = True
    blk.lp_bound = lp.objective if lp.status == "optimal" else None

    if p.objective == "max_throughput" and not p.elastic_caps:
        first = dm.mip(time_limit_s=left(), mip_gap=mip_gap, max_nodes=max_nodes)
        blk.nodes = first.nodes
        blk.safety_stop |= first.status == "time_limit"
        if not first.has_solution:
            blk.status = "infeasible" if first.status == "infeasible" else "no_solution"
            return blk
        s_star = dm.scale(first.values)
        dm.keep_scale(s_star)
        second = dm.mip(time_limit_s=left(), mip_gap=mip_gap, max_nodes=max_nodes, start=first.values)
        blk.nodes += second.nodes
        blk.safety_stop |= second.status == "time_limit"
        values = second.values if second.has_solution else first.values
        blk.objective, blk.bound = s_star, first.bound
        if blk.lp_bound is not None and blk.bound is not None:
            blk.bound = min(blk.bound, blk.lp_bound)
        blk.status = first.status if first.status != "optimal" else (
            second.status if second.status in ("time_limit",) else "optimal")
        _load(blk, dm, values)
        return blk

    bound0 = blk.lp_bound
    if floor is not None:
        dm.add_objective_floor(floor)
        bound0 = floor if bound0 is None else max(bound0, floor)
    best = None  # (objective, values, name)
    if warm and not p.elastic_caps:
        cands = []
        if p.running:
            cands.append(("running", dict(p.running)))
        if lp.has_solution:
            cands.append(("rounded LP", {u: math.ceil(lp.values[c] - 1e-6) for u, c in dm.n.items()
                                         if lp.values[c] > 1e-6}))
        found = feasible_start(p)
        if found:
            cands.append(("greedy", found[0]))
        previous = {u: c for u, c in (start or {}).items() if u in dm.n and c > 0}
        if previous:
            cands.append(("previous", previous))
        for name, counts in cands:
            # pricing a complete start is one small LP: let it finish past the safety stop while no
            # start has, so that a loaded machine yields a (reported) plan rather than none
            o = dm.with_counts(counts, left() if best is not None else max(left(), START_FLOOR_S))
            if o.status == "time_limit":
                blk.safety_stop = True
            if o.has_solution and o.status == "optimal" and (best is None or o.objective < best[0] - 1e-9):
                best = (o.objective, o.values, name)
    if best is not None:
        blk.warm_start, blk.warm_start_objective = best[2], best[0]
    if best is not None and bound0 is not None and best[0] - bound0 <= mip_gap * max(abs(best[0]), 1e-9) + 1e-9:
        blk.objective, blk.bound, blk.status = best[0], min(bound0, best[0]), "optimal"
        _load(blk, dm, best[1])
        return blk
    o = dm.mip(time_limit_s=left(), mip_gap=mip_gap, max_nodes=max_nodes, start=best[1] if best else None)
    blk.nodes = o.nodes
    blk.safety_stop |= o.status == "time_limit"
    if o.has_solution and (best is None or o.objective <= best[0] + 1e-9):
        values, obj = o.values, o.objective
    elif best is not None:
        values, obj = best[1], best[0]
    else:
        blk.status = "infeasible" if o.status == "infeasible" else "no_solution"
        return blk
    bounds = [b for b in (o.bound, bound0) if b is not None]
    blk.objective = obj
    blk.bound = min(max(bounds), obj) if bounds else None
    gap = blk.gap
    blk.status = "optimal" if gap is not None and gap <= mip_gap + 1e-9 else (
        o.status if o.status in ("time_limit", "node_limit") else "node_limit")
    _load(blk, dm, values)
    return blk


def solve_alone(p: AllocationProblem, model: str, start: dict[str, int] | None = None, **kw) -> Block:
    """One model with every cap in full and no budget (remembered by content, ``solver.memo``: the
    key is the block's problem and settings, never ``start``, which only speeds the search)."""
    from hetinfra.solver.memo import memo_get, memo_key, memo_put

    key = memo_key("alone", p, model, kw.get("mip_gap"), kw.get("max_nodes"), kw.get("warm", True))
    blk = memo_get(key)
    if blk is None:
        blk = _solve_alone(p, model, start=start, **kw)
        if not blk.safety_stop:
            memo_put(key, blk)
    return blk


def _solve_alone(p: AllocationProblem, model: str, start: dict[str, int] | None = None, **kw) -> Block:
    """One model with every cap in full and no budget. With caps, first without them on the
    interchangeable units merged (``solver.lagrange.merge_duplicates``; a tenth of the size at 12
    regions): when that plan keeps the caps on its own it is this problem's answer too (its bound
    bounds both); else the model is solved with its caps."""
    if p.caps and not p.elastic_caps:
        from hetinfra.solver.lagrange import capped_units, merge_duplicates, merged_counts

        merged = merge_duplicates(p)
        blk = solve_block(merged, [model], "independent", start=merged_counts(p, merged, start), **kw)
        if not blk.feasible or _caps_kept(p, blk.n):
            return blk
        # the caps on the units with room near that plan: a plan, checked against the merged bound
        near = solve_block(capped_units(p, model, dict(p.caps), blk.n), [model], "independent", start=start, **kw)
        if near.feasible and blk.bound is not None:
            near.bound = min(blk.bound, near.objective)
            near.lp_bound = blk.lp_bound
            if near.gap is not None and near.gap <= kw["mip_gap"] + 1e-9:
                near.status = "optimal"
                return near
    return solve_block(p, [model], "independent", start=start, **kw)


def solve_lagrangian(p: AllocationProblem, models: list[str], *, floor: float | None, mip_gap: float, max_nodes: int,
                     deadline: float, warm: bool = True, first: dict | None = None) -> Block | None:
    """A linked component by Lagrangian relaxation of its caps and repair (``solver.lagrange``); the
    routing per model from an LP with the repaired counts fixed. None when the repair finds no plan."""
    from hetinfra.solver.direct import DirectModel
    from hetinfra.solver.lagrange import lagrangian

    lr = lagrangian(p, models, floor=floor, mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, first=first)
    if lr is None:
        return None
    blk = Block(models, "lagrangian", "optimal", iterations=lr.iterations, nodes=lr.nodes, safety_stop=lr.safety_stop)
    objective = 0.0
    for m in models:
        own = _ids(p, m)
        mine = {u: c for u, c in lr.counts.items() if u in own}
        used = tuple(u for u in p.units if u.id in mine)
        sub = restrict(p, [m], budget=False).replace(units=used, caps={})
        dm = DirectModel(sub)
        o = dm.with_counts(mine, max(1e-3, deadline - time.perf_counter()))
        if not (o.has_solution and o.status == "optimal"):
            return None
        objective += o.objective
        blk.n.update(dm.counts(o.values))
        blk.flow.update(dm.flows(o.values))
        blk.unmet.update(dm.unmet(o.values))
        for k, v in dm.size().items():
            blk.size[k] = blk.size.get(k, 0) + v
    blk.objective = objective
    blk.bound = min(lr.bound, objective)
    gap = blk.gap
    blk.status = "optimal" if gap is not None and gap <= mip_gap + 1e-9 else (
        "time_limit" if lr.safety_stop else "node_limit")
    return blk


def _ids(p: AllocationProblem, model: str) -> set[str]:
    return {u.id for u in p.units if u.model == model}


def _load(blk: Block, dm, values: list[float]) -> None:
    blk.n = dm.counts(values)
    blk.flow = dm.flows(values)
    blk.unmet = dm.unmet(values)
    blk.extra_gpus = dm.extra_gpus(values)
    blk.scale = dm.scale(values)


def solve_decomposed(problem: AllocationProblem, *, time_limit_s: float, mip_gap: float, warm: bool = True,
                     max_nodes: int = DEFAULT_MAX_NODES, decompose: bool = True,
                     start: dict[str, int] | None = None) -> SolveResult:
    t0 = time.perf_counter()
    deadline = t0 + time_limit_s
    p = problem
    if p.unserved() and not (p.unmet_penalty is not None and p.objective == "min_cost"):
        return SolveResult(status="infeasible", max_nodes=max_nodes)
    models = sorted({m for m, _ in p.demand})
    kw = dict(mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, warm=warm)
    if p.objective == "max_throughput" or p.elastic_caps or not decompose or len(models) <= 1:
        final = solve_block(p, models, "joint", start=start, **kw)
        method = "joint"
        blocks = [final]
    else:
        method = "decomposed"
        alone = {}
        for m in models:
            alone[m] = solve_alone(restrict(p, [m], budget=False), m, start=start, **kw)
            if not alone[m].feasible:  # a relaxation without a plan: neither has the joint problem
                return _result(p, alone[m], [alone[m]], "decomposed", time.perf_counter() - t0, max_nodes)
        blocks = []
        for comp in components(p):
            mine = [alone[m] for m in comp]
            if len(comp) == 1:
                blocks.append(mine[0])
                continue
            union = _merge(mine, comp, "independent")
            if _links_kept(p, union.n):
                blocks.append(union)
                continue
            floor = union.bound
            sub = restrict(p, comp, budget=False)
            blk = None
            if len(sub.units) > JOINT_MAX_UNITS and not (sub.tied or sub.nested):  # Lagrange relaxes caps only
                first = {m: (alone[m].bound, alone[m].objective, alone[m].n) for m in comp
                         if alone[m].bound is not None and not alone[m].unmet}
                blk = solve_lagrangian(sub, comp, floor=floor, first=first, **kw)
            if blk is None:
                blk = solve_block(sub, comp, "joint", floor=floor, start=start, **kw)
            blocks.append(blk)
            if not blocks[-1].feasible:
                return _result(p, blocks[-1], blocks, method, time.perf_counter() - t0, max_nodes)
        final = _merge(blocks, models, method)
        if p.budget is not None and sum(p_cost(p, final.n)) > p.budget * (1 + 1e-9):
            floor = final.bound
            final = solve_block(p, models, "joint (budget)", floor=floor, start=start, **kw)
            blocks = [final]
            method = "joint"
    return _result(p, final, blocks, method, time.perf_counter() - t0, max_nodes)


def p_cost(p: AllocationProblem, n: dict[str, int]):
    costs = {u.id: u.cost for u in p.units}
    return [costs[u] * c for u, c in n.items()]


def _result(p: AllocationProblem, final: Block, blocks: list[Block], method: str, solve_s: float,
            max_nodes: int) -> SolveResult:
    stop = final.safety_stop or any(b.safety_stop for b in blocks)
    status = final.status
    if status in ("optimal", "node_limit") and stop and final.gap is not None and final.gap > 0:
        status = "time_limit"
    out = SolveResult(status=status, build_s=0.0, solve_s=solve_s, size=dict(final.size), method=method,
                      blocks=[b.record() for b in blocks], safety_stop=stop, max_nodes=max_nodes)
    if stop:
        out.warnings.append(SAFETY_WARNING)
    if not final.feasible:
        return out
    out.n, out.flow, out.unmet, out.extra_gpus = final.n, final.flow, final.unmet, final.extra_gpus
    out.lp_bound = final.lp_bound
    out.warm_start, out.warm_start_objective = final.warm_start, final.warm_start_objective
    if p.objective == "max_throughput" and not p.elastic_caps:
        out.scale = final.scale
    out.objective, out.bound = final.objective, final.bound
    if out.bound is not None and out.objective:
        out.gap = final.gap
    return out
