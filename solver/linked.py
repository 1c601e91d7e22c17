"""Linked blocks of ``solver.decompose``: models that share capped GPUs (or a budget), solved by
Lagrangian relaxation with repair (``solver.lagrange``) and, where that does not close within
``mip_gap``, by the joint MIP started from its plan and floored by its bound (see
``solver.decompose``'s module docstring, point 2)."""

from __future__ import annotations

import math

from hetinfra.solver import clock
from hetinfra.solver.block import Block, restrict, solve_block
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SafetyStopped


def solve_linked(p: AllocationProblem, models: list[str], alone: dict[str, Block], *, floor: float | None,
                 method: str, start: dict[str, int] | None, joint_max_units: int, mip_gap: float, max_nodes: int,
                 deadline: float, warm: bool = True) -> Block:
    """Models linked by shared caps (and ``p.budget`` when set): Lagrangian relaxation first
    (``solve_lagrangian``); where its plan is not within ``mip_gap`` of its bound and the block has
    at most ``joint_max_units`` units, the joint MIP, started from that plan with the better bound as
    its floor, so it returns no worse a plan and no weaker a bound. Committed bases and scale-out rows
    (multi-period problems) are not relaxed: those blocks are solved jointly."""
    kw = dict(mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, warm=warm)
    lag, cut = None, False
    if not (p.tied or p.nested):
        first = {m: (alone[m].bound, alone[m].objective, alone[m].n) for m in models
                 if alone[m].bound is not None and not alone[m].unmet}
        try:
            lag = solve_lagrangian(p, models, floor=floor, first=first, **kw)
        except SafetyStopped:  # the clock, not the problem, ended the Lagrangian: the joint MIP, reported
            cut = True
    if lag is not None:
        lag.method = "lagrangian" if method == "joint" else f"lagrangian {method.split(' ', 1)[1]}"
        if (lag.gap is not None and lag.gap <= mip_gap + 1e-9) or len(p.units) > joint_max_units:
            return lag
        if lag.bound is not None and math.isfinite(lag.bound):
            floor = lag.bound if floor is None else max(floor, lag.bound)
    blk = solve_block(p, models, method, floor=floor, start=start,
                      seeds=[("lagrangian", lag.n)] if lag is not None else [], **kw)
    blk.safety_stop |= cut
    if lag is not None:
        blk.iterations, blk.nodes = lag.iterations, blk.nodes + lag.nodes
        blk.safety_stop |= lag.safety_stop
    return blk


def solve_lagrangian(p: AllocationProblem, models: list[str], *, floor: float | None, mip_gap: float, max_nodes: int,
                     deadline: float, warm: bool = True, first: dict | None = None) -> Block | None:
    """A linked component by Lagrangian relaxation of its caps and repair (``solver.lagrange``); the
    routing per model from an LP with the repaired counts fixed. None when the repair finds no plan;
    SafetyStopped when the wall clock cut a step that had to answer."""
    from hetinfra.solver.direct import DirectModel
    from hetinfra.solver.lagrange import lagrangian

    lr = lagrangian(p, models, floor=floor, mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, first=first)
    if lr is None:
        return None
    blk = Block(models, "lagrangian", "optimal", iterations=lr.iterations, nodes=lr.nodes, safety_stop=lr.safety_stop)
    objective = 0.0
    for m in models:
        own = {u.id for u in p.units if u.model == m}
        mine = {u: c for u, c in lr.counts.items() if u in own}
        used = tuple(u for u in p.units if u.id in mine)
        sub = restrict(p, [m], budget=False).replace(units=used, caps={})
        dm = DirectModel(sub)
        o = dm.with_counts(mine, clock.remaining(deadline))
        if o.status == "time_limit":
            raise SafetyStopped("a fixed-count LP of the Lagrangian's plan was cut by the safety stop")
        if not (o.has_solution and o.status == "optimal"):
            return None
        objective += o.objective
        blk.n.update(dm.counts(o.values))
        blk.flow.update(dm.flows(o.values))
        blk.holds.update(dm.holds(o.values))
        blk.unmet.update(dm.unmet(o.values))
        for k, v in dm.size().items():
            blk.size[k] = blk.size.get(k, 0) + v
    blk.objective = objective
    blk.bound = min(lr.bound, objective)
    gap = blk.gap
    blk.status = "optimal" if gap is not None and gap <= mip_gap + 1e-9 else (
        "time_limit" if lr.safety_stop else "node_limit")
    return blk
