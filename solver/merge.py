"""Interchangeable units merged: without caps, units that differ only in their availability group
and cost (the same template in several regions, outside the model's locality regions) are one
choice, and the cheapest stands for them (``solver.lagrange``'s subproblems, ``solver.decompose``'s
uncapped models: a tenth of the size at 12 regions, and exact)."""

from __future__ import annotations

from hetinfra.solver.problem import AllocationProblem, SolverUnit

__all__ = ["local_regions", "merge_duplicates", "merged_counts", "network_profiles", "set_key"]


def set_key(p: AllocationProblem, u: SolverUnit, local: set, network: dict[str, tuple]) -> tuple:
    """The interchangeable set ``u`` belongs to (``local``: :func:`local_regions` of ``p``; ``network``:
    :func:`network_profiles` of ``p``): units whose flows travel differently (routing by origin) are
    not interchangeable either, or the stand-in's round trips would price the others' flows (and its
    bound exceed theirs)."""
    return (u.model, u.gpus, u.spot, u.committed, tuple(sorted(u.rates.items())),
            u.region if (u.model, u.region) in local else None, u.id if u.id in p.running else None,
            network.get(u.id, ()))


def network_profiles(p: AllocationProblem) -> dict[str, tuple]:
    """Unit id -> its flows' round trips (``network_ms``), sorted: what :func:`set_key` compares."""
    out: dict[str, list] = {}
    for (unit, key), ms in p.network_ms.items():
        out.setdefault(unit, []).append((key, ms))
    return {unit: tuple(sorted(rows)) for unit, rows in out.items()}


def local_regions(p: AllocationProblem) -> set:
    """(model, region) pairs with local demand under locality: their units keep their region."""
    return {k for k, lam in p.local_demand.items() if lam > 0} if p.locality > 0 else set()


def merge_duplicates(p: AllocationProblem, extra: dict[str, float] | None = None) -> AllocationProblem:
    """The cap-free, budget-free relaxation of ``p`` with interchangeable units merged: of the
    units with the same model, GPUs, purchase option, rates (and region, where the model has local
    demand under locality; running units always stay) only the cheapest stays, counting
    ``extra`` $/h per instance and the churn penalty. Exact for that relaxation: those units differ
    only in availability groups (dropped) and cost."""
    extra = extra or {}
    local, network = local_regions(p), network_profiles(p)
    w = p.churn_hours if p.running else 0.0
    best: dict[tuple, tuple] = {}
    for u in p.units:
        c = u.cost + extra.get(u.id, 0.0) + (w * u.cost if u.id not in p.running else 0.0)
        k = set_key(p, u, local, network)
        if k not in best or (c, u.id) < best[k][0]:
            best[k] = ((c, u.id), u)
    units = tuple(sorted((v[1] for v in best.values()), key=lambda u: u.id))
    return p.replace(units=units, caps={}, budget=None)


def merged_counts(p: AllocationProblem, merged: AllocationProblem, counts: dict[str, int] | None) -> dict[str, int] | None:
    """``counts`` of ``p``'s units carried onto ``merge_duplicates(p)``: each unit's instances on the
    unit that stands for its interchangeable set (an earlier plan as a start for the merged problem)."""
    if not counts:
        return None
    local, network = local_regions(p), network_profiles(p)
    stand_in = {set_key(p, u, local, network): u.id for u in merged.units}
    out: dict[str, int] = {}
    for u in p.units:
        c = counts.get(u.id, 0)
        if c > 0 and set_key(p, u, local, network) in stand_in:
            rep = stand_in[set_key(p, u, local, network)]
            out[rep] = out.get(rep, 0) + c
    return out
