"""The adapter rules re-checked on a solution, from the problem alone (``solver.solve.verify``'s
second statement of ``solver.rows.add_adapter_*``; a wrong compilation of them is caught here)."""

from __future__ import annotations

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

__all__ = ["adapter_move_costs", "verify_adapters"]

TOL = 1e-6


def verify_adapters(problem: AllocationProblem, r: SolveResult) -> list[str]:
    """Violations of: a unit holds an adapter on all its instances or none (at most once, only while it
    runs) and at most its slots; an adapter is held only where it may be; its requests go only to
    units holding it; each area holds its copies (units)."""
    bad: list[str] = []
    units = {u.id: u for u in problem.units}
    adapters = {a.name: a for a in problem.adapters}
    held: dict[str, int] = {}
    for (u, a), cnt in r.holds.items():
        if a not in adapters or not adapters[a].may_hold(units[u]):
            bad.append(f"adapter {a} held on {u}, which may not hold it")
        if cnt != 1 or r.n.get(u, 0) < 1:
            bad.append(f"adapter {a} held {cnt} times by {u}, which runs {r.n.get(u, 0)} instances")
        held[u] = held.get(u, 0) + 1
    for u, total in held.items():
        if total > units[u].slots:
            bad.append(f"unit {u} holds {total} adapters > its {units[u].slots} slots")
    for a in problem.adapters:
        keys = set(a.keys)
        for (u, mod, w), val in r.flow.items():
            if (mod, w) in keys and val > TOL and (u, a.name) not in r.holds:
                bad.append(f"adapter {a.name}: {val:.4g} req/s on {u}, which does not hold it")
        for area, copies in a.cover:
            have = sum(1 for (u, name) in r.holds if name == a.name and (not area or units[u].region in area))
            if have < copies:
                bad.append(f"adapter {a.name} held by {have} units in {'/'.join(area) or 'all regions'} < {copies}")
    return bad


def adapter_move_costs(problem: AllocationProblem) -> dict[tuple[str, str], float]:
    """The change penalty of holding each adapter on a unit that runs now but does not hold it
    ((unit, adapter) -> $/h in the objective, on x[u,a]): its engines restart with the new
    ``--lora-modules``, so each of its running instances pays what a started one pays (churn:
    ``churn_hours x cost[u]``). A unit that does not run yet pays nothing here (its instances are
    started, and pay churn, anyway); an adapter kept where it is pays nothing. So a re-plan moves an
    adapter only where the move saves more than the restarts cost."""
    out = {}
    for a in problem.adapters:
        for u in problem.units:
            running = problem.running.get(u.id, 0)
            if running > 0 and u.id not in a.held_now and a.may_hold(u):
                out[(u.id, a.name)] = problem.churn_hours * u.cost * running
    return out
