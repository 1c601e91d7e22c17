"""Exact decomposition of the allocation ILP into blocks of models.

What links models: an availability cap on a (cloud, region, gpu) group that units of more than one
model count under, the budget, and the max_throughput objective (one demand scale for all).
Spot fractions, locality, churn and unmet demand are per model, so they do not link.

min_cost (the default):

1. Each model alone, every cap in full and no budget: a relaxation of the joint problem, so the
   sum of the per-model bounds bounds the joint optimum from below.
2. Models linked by shared caps form components. A component whose per-model plans together keep
   every shared cap is solved: the relaxation's answer is feasible, so it is optimal within the
   per-model gaps (method ``independent``). Otherwise it is solved by Lagrangian relaxation of its
   caps with repair (``lagrangian``, ``solver.lagrange``): its bound is valid for any prices, and
   where its plan is within ``mip_gap`` of that bound (or the component has more than
   ``JOINT_MAX_UNITS`` units) that is the answer. Else the joint MIP (``joint``) starts from the
   Lagrangian plan and the heuristic, with the better of the Lagrangian bound and the sum of the
   per-model bounds as a valid floor under the objective: never a worse plan or a weaker bound than
   either alone. With caps, each model alone is first solved on merged units without them
   (``solve_alone``).
3. A budget that the combined plan keeps costs nothing; one it breaks (churn or unmet-demand
   penalties, or per-block gaps, can make the cheapest blocks dearer than the budget) links every
   model: the same Lagrangian path with the budget row priced too, then the joint MIP where it does
   not close (``lagrangian (budget)``, ``joint (budget)``).

``solve(start=...)`` (an earlier plan, e.g. verification's previous round) is one more candidate
start in every block; per-model blocks are remembered by content (``solver.memo``), never by start.

Each block: one ``DirectModel`` in one HiGHS instance: LP relaxation (bound, rounded start), the
candidate starts completed by fixed-count LPs, then the MIP from the best start, skipped when the
start is already within ``mip_gap`` of the bound. HiGHS runs single-threaded with a fixed seed
and stops at ``max_nodes`` nodes (deterministic); the wall-clock limit is a safety stop.
"""

from __future__ import annotations

from functools import partial

from hetinfra.solver import clock
from hetinfra.solver.ahead import ahead
from hetinfra.solver.block import Block, restrict, solve_block
from hetinfra.solver.memo import memo_has
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

#: Branch-and-bound nodes per MIP: the deterministic stop (the wall clock is only a safety stop).
DEFAULT_MAX_NODES = 2000
#: A linked component with more units than this takes the Lagrangian's plan (``solver.linked``) even
#: where it is not within mip_gap of its bound, rather than the joint MIP.
JOINT_MAX_UNITS = 400
SAFETY_WARNING = "time limit hit: plan may differ on a faster machine (raise planning.time_limit_s)"


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
        out.holds.update(b.holds)
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


def alone_key(p: AllocationProblem, model: str, **kw) -> str:
    """The memo key of :func:`solve_alone`: the block's problem and settings, never ``start``."""
    from hetinfra.solver.memo import memo_key

    return memo_key("alone", p, model, kw.get("mip_gap"), kw.get("max_nodes"), kw.get("warm", True))


def solve_alone(p: AllocationProblem, model: str, start: dict[str, int] | None = None, *, key: str | None = None,
                ready=None, **kw) -> Block:
    """One model with every cap in full and no budget (remembered by content, ``solver.memo``: the
    key is the block's problem and settings, never ``start``, which only speeds the search).
    ``ready``: a future of ``_solve_alone`` on these same arguments, started ahead (``solver.ahead``), taken
    in place of solving here."""
    from hetinfra.solver.memo import recall

    return recall(key or alone_key(p, model, **kw), lambda: _solve_alone(p, model, start=start, **kw), ready,
                  keep=lambda blk: not blk.safety_stop)


def _solve_alone(p: AllocationProblem, model: str, start: dict[str, int] | None = None, **kw) -> Block:
    """One model with every cap in full and no budget. With caps, first without them on the
    interchangeable units merged (``solver.merge.merge_duplicates``; a tenth of the size at 12
    regions): when that plan keeps the caps on its own it is this problem's answer too (its bound
    bounds both); else the model is solved with its caps."""
    if p.caps and not p.elastic_caps:
        from hetinfra.solver.lagrange import capped_units
        from hetinfra.solver.merge import merge_duplicates, merged_counts

        merged = merge_duplicates(p)
        blk = solve_block(merged, [model], "independent", start=merged_counts(p, merged, start), **kw)
        if not blk.feasible or _caps_kept(p, blk.n):
            return blk
        # the caps on the units with room near that plan: a plan, checked against the merged bound
        near = solve_block(capped_units(p, model, dict(p.caps), blk.n), [model], "independent", start=start, **kw)
        near.safety_stop |= blk.safety_stop  # what the clock cut above chose ``near``'s units
        if near.feasible and blk.bound is not None:
            near.bound = min(blk.bound, near.objective)
            near.lp_bound = blk.lp_bound
            if near.gap is not None and near.gap <= kw["mip_gap"] + 1e-9:
                near.status = "optimal"
                return near
        whole = solve_block(p, [model], "independent", start=start, **kw)
        whole.safety_stop |= near.safety_stop  # the path here went through both
        return whole
    return solve_block(p, [model], "independent", start=start, **kw)


def solve_decomposed(problem: AllocationProblem, *, time_limit_s: float, mip_gap: float, warm: bool = True,
                     max_nodes: int = DEFAULT_MAX_NODES, decompose: bool = True,
                     start: dict[str, int] | None = None) -> SolveResult:
    from hetinfra.solver.linked import solve_linked

    t0 = clock.now()
    deadline = t0 + time_limit_s
    p = problem
    if p.unserved() and not (p.unmet_penalty is not None and p.objective == "min_cost"):
        return SolveResult(status="infeasible", max_nodes=max_nodes)
    models = sorted({m for m, _ in p.demand})
    kw = dict(mip_gap=mip_gap, max_nodes=max_nodes, deadline=deadline, warm=warm)
    if p.objective == "max_throughput" or p.elastic_caps or not decompose or len(models) <= 1:
        final = solve_block(p, models, "joint", start=start, **kw)
        return _result(p, final, [final], "joint", clock.now() - t0, max_nodes)
    alone, failed = _alone_blocks(p, models, start, kw)
    if failed is not None:  # a relaxation without a plan: neither has the joint problem
        return _result(p, failed, [failed], "decomposed", clock.now() - t0, max_nodes)
    blocks = _component_blocks(p, alone, start, kw)
    if not blocks[-1].feasible:  # only a linked block can lack a plan: the per-model ones all have one
        return _result(p, blocks[-1], blocks, "decomposed", clock.now() - t0, max_nodes)
    final = _merge(blocks, models, "decomposed")
    # a linked block starts from its models' alone plans and bounds: a cut there steered it
    final.safety_stop |= any(a.safety_stop for a in alone.values())
    if p.budget is not None and sum(p_cost(p, final.n)) > p.budget * (1 + 1e-9):
        cut = final.safety_stop
        final = solve_linked(p, models, alone, floor=final.bound, method="joint (budget)", start=start,
                             joint_max_units=JOINT_MAX_UNITS, **kw)
        final.safety_stop |= cut
        return _result(p, final, [final], "joint", clock.now() - t0, max_nodes)
    return _result(p, final, blocks, "decomposed", clock.now() - t0, max_nodes)


def _alone_blocks(p: AllocationProblem, models: list[str], start: dict[str, int] | None,
                  kw: dict) -> tuple[dict[str, Block], Block | None]:
    """Step 1 (module docstring): each model alone, those the memo lacks run ahead in threads
    (``solver.ahead``); (model -> its block, so far; the first block without a plan, or None)."""
    alone = {}
    subs = {m: restrict(p, [m], budget=False) for m in models}
    keys = {m: alone_key(subs[m], m, **kw) for m in models}
    with ahead({m: partial(_solve_alone, subs[m], m, start=start, **kw)
                for m in models if not memo_has(keys[m])}) as ready:
        for m in models:
            alone[m] = solve_alone(subs[m], m, start=start, key=keys[m], ready=ready.get(m), **kw)
            if not alone[m].feasible:
                return alone, alone[m]
    return alone, None


def _component_blocks(p: AllocationProblem, alone: dict[str, Block], start: dict[str, int] | None,
                      kw: dict) -> list[Block]:
    """Step 2 (module docstring): one block per component of linked models, from the models' blocks
    alone; up to the first linked block without a plan, which is then the last."""
    from hetinfra.solver.linked import solve_linked

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
        blocks.append(solve_linked(restrict(p, comp, budget=False), comp, alone, floor=union.bound,
                                   method="joint", start=start, joint_max_units=JOINT_MAX_UNITS, **kw))
        blocks[-1].safety_stop |= union.safety_stop
        if not blocks[-1].feasible:
            break
    return blocks


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
    out.holds = final.holds
    out.lp_bound = final.lp_bound
    out.warm_start, out.warm_start_objective = final.warm_start, final.warm_start_objective
    if p.objective == "max_throughput" and not p.elastic_caps:
        out.scale = final.scale
    out.objective, out.bound = final.objective, final.bound
    if out.bound is not None and out.objective:
        out.gap = final.gap
    return out
