"""One block of ``solver.decompose``: a sub-problem of some models solved in one persistent HiGHS
model (LP relaxation, candidate starts completed by fixed-count LPs, the MIP from the best start,
skipped when that start is within ``mip_gap`` of the bound), and what it reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetinfra.solver import clock
from hetinfra.solver.problem import AllocationProblem

#: seconds the first complete warm start may take to price, even past the wall-clock safety stop
START_FLOOR_S = 10.0


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
    holds: dict = field(default_factory=dict)  # (unit, adapter) -> 1: LoRA adapters held
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
    """The sub-problem of ``models``: their units, demand, spot fractions, locality, running units.
    Every cap stays, also one that no unit of the block counts under: whether a problem has caps
    decides how a model alone is solved (``solve_alone``), so the memo's key (this problem) holds them."""
    keep = set(models)
    units = tuple(u for u in p.units if u.model in keep)
    ids = {u.id for u in units}
    return p.replace(units=units, demand={k: v for k, v in p.demand.items() if k[0] in keep},
                     budget=p.budget if budget else None,
                     max_spot_fraction={m: f for m, f in p.max_spot_fraction.items() if m in keep},
                     local_demand={k: v for k, v in p.local_demand.items() if k[0] in keep},
                     adapters=tuple(a for a in p.adapters if a.model in keep),
                     # the whole running fleet, not the block's share: whether new instances pay churn is
                     # a property of the problem (a block with no running unit of its own still does)
                     running=p.running,
                     tied=tuple(g for g in p.tied if all(u in ids for u in g)),
                     nested=tuple(pair for pair in p.nested if all(u in ids for u in pair)),
                     tied_holds=tuple(g for g in p.tied_holds if all(u in ids for u, _ in g)))


def solve_block(p: AllocationProblem, models: list[str], method: str, *, mip_gap: float, max_nodes: int,
                deadline: float, warm: bool = True, floor: float | None = None,
                start: dict[str, int] | None = None, seeds: list[tuple[str, dict[str, int]]] = ()) -> Block:
    """One block in one persistent HiGHS model (see the module docstring). ``seeds``: (name, counts)
    of plans found otherwise (the Lagrangian's), candidate starts after the usual ones; ``start``: an
    earlier plan's counts (``solve(start=...)``), tried last (so it wins only when strictly cheaper),
    on this block's units only."""
    from hetinfra.solver.direct import DirectModel

    def left() -> float:
        return clock.remaining(deadline)

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
        return _max_throughput(blk, dm, left, mip_gap=mip_gap, max_nodes=max_nodes)
    bound0 = blk.lp_bound
    if floor is not None:
        dm.add_objective_floor(floor)
        bound0 = floor if bound0 is None else max(bound0, floor)
    best = _best_start(blk, dm, p, lp, left, start, seeds) if warm and not p.elastic_caps else None
    if best is not None:
        blk.warm_start, blk.warm_start_objective = best[2], best[0]
    if best is not None and bound0 is not None and best[0] - bound0 <= mip_gap * max(abs(best[0]), 1e-9) + 1e-9:
        blk.objective, blk.bound, blk.status = best[0], min(bound0, best[0]), "optimal"
        _load(blk, dm, best[1])
        return blk
    return _min_cost_mip(blk, dm, left, best, bound0, mip_gap=mip_gap, max_nodes=max_nodes)


def _max_throughput(blk: Block, dm, left, *, mip_gap: float, max_nodes: int) -> Block:
    """max_throughput: the largest demand scale s* first, then the cheapest plan that serves s*."""
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


def _best_start(blk: Block, dm, p: AllocationProblem, lp, left, start: dict[str, int] | None,
                seeds: list[tuple[str, dict[str, int]]]) -> tuple[float, list[float], str] | None:
    """The cheapest candidate start, priced (objective, values, name): the block's running units,
    the rounded LP, the greedy plan, ``seeds``, then ``start``; None where none prices."""
    from hetinfra.solver.heuristic import feasible_start

    cands = []
    running = {u: c for u, c in p.running.items() if u in dm.n}  # the block's own running units
    if running:
        cands.append(("running", running))
    if lp.has_solution:
        cands.append(("rounded LP", {u: math.ceil(lp.values[c] - 1e-6) for u, c in dm.n.items()
                                     if lp.values[c] > 1e-6}))
    found = feasible_start(p)
    if found:
        cands.append(("greedy", found[0]))
    cands.extend(seeds)
    previous = {u: c for u, c in (start or {}).items() if u in dm.n and c > 0}
    if previous:
        cands.append(("previous", previous))
    best = None
    for name, counts in cands:
        floor = dm.objective_floor(counts) if best is not None else None
        if floor is not None and floor >= best[0] - 1e-9:
            continue  # its instances alone cost what the best start does: it cannot replace it
        # pricing a complete start is one small LP: let it finish past the safety stop while no
        # start has, so that a loaded machine yields a (reported) plan rather than none
        o = dm.with_counts(counts, left() if best is not None else max(left(), START_FLOOR_S))
        if o.status == "time_limit":
            blk.safety_stop = True
        if o.has_solution and o.status == "optimal" and (best is None or o.objective < best[0] - 1e-9):
            best = (o.objective, o.values, name)
    return best


def _min_cost_mip(blk: Block, dm, left, best, bound0: float | None, *, mip_gap: float, max_nodes: int) -> Block:
    """The MIP from the best start (kept where the MIP finds nothing cheaper), its bound and status."""
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


def _load(blk: Block, dm, values: list[float]) -> None:
    blk.n = dm.counts(values)
    blk.flow = dm.flows(values)
    blk.unmet = dm.unmet(values)
    blk.extra_gpus = dm.extra_gpus(values)
    blk.holds = dm.holds(values)
    blk.scale = dm.scale(values)
