"""The adapter rules re-checked on a solution, from the problem alone (``solver.solve.verify``'s
second statement of ``solver.rows.add_adapter_*``; a wrong compilation of them is caught here)."""

from __future__ import annotations

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

__all__ = ["verify_adapters"]

TOL = 1e-6


def verify_adapters(problem: AllocationProblem, r: SolveResult) -> list[str]:
    """Violations of: an instance holds at most its slots and an adapter once; an adapter is held only
    where it may be; its requests go only to holders, within their capacity; each area holds its copies."""
    bad: list[str] = []
    units = {u.id: u for u in problem.units}
    adapters = {a.name: a for a in problem.adapters}
    held: dict[str, int] = {}
    for (u, a), cnt in r.holds.items():
        if a not in adapters or not adapters[a].may_hold(units[u]):
            bad.append(f"adapter {a} held on {u}, which may not hold it")
        if cnt > r.n.get(u, 0):
            bad.append(f"adapter {a} held by {cnt} instances of {u}, which has {r.n.get(u, 0)}")
        held[u] = held.get(u, 0) + cnt
    for u, total in held.items():
        if total > units[u].slots * r.n.get(u, 0):
            bad.append(f"unit {u} holds {total} adapters > {units[u].slots} slots x {r.n.get(u, 0)} instances")
    for a in problem.adapters:
        keys = set(a.keys)
        for (u, mod, w), val in r.flow.items():
            if (mod, w) not in keys or val <= TOL:
                continue
            cap = (1 - problem.headroom) * units[u].rates[w] * r.holds.get((u, a.name), 0)
            if val > cap + TOL * max(1.0, cap):
                bad.append(f"adapter {a.name}: {val:.4g} req/s on {u}, whose holders carry {cap:.4g}")
        for area, copies in a.cover:
            have = sum(c for (u, name), c in r.holds.items() if name == a.name and (not area or units[u].region in area))
            if have < copies:
                bad.append(f"adapter {a.name} held by {have} instances in {'/'.join(area) or 'all regions'} < {copies}")
    return bad
