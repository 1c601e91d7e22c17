"""The solver's re-check of an answer, from the problem alone (``verify``; ``solver.solve`` believes
no answer that fails it and re-exports it as ``solver.solve.verify``)."""

from __future__ import annotations

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.result import SolveResult

__all__ = ["TOL", "count_breaches", "unit_load", "verify"]

#: Feasibility tolerance used when re-checking a returned solution (relative where it makes sense).
TOL = 1e-6


def verify(problem: AllocationProblem, r: SolveResult, *, capacity: bool = True) -> list[str]:
    """Re-check every constraint on the solution against what the problem means.

    This is the one deliberate second statement of the rules: every other path (the HiGHS matrix,
    the Pyomo model, the heuristic) reads the rows compiled once in ``solver.rows``; this check reads
    only the problem, so a wrong compilation is caught here rather than believed. ``capacity=False``
    leaves out each unit's load against its estimated rates: verification's trim, where the
    simulation judges whether the replicas carry their load, checks every other rule with it."""
    units = {u.id: u for u in problem.units}
    scale = r.scale if (problem.objective == "max_throughput" and r.scale is not None) else 1.0
    bad, load = _routing_breaches(problem, r, units, scale)
    if not capacity:  # still: nothing may be routed to a unit with no instance
        bad += [f"flow on {u}, which has no instance" for u, used in sorted(load.items())
                if used > TOL and not r.n.get(u, 0)]
    for u, used in load.items() if capacity else ():
        cap = (1 - problem.headroom) * r.n.get(u, 0)
        if used > cap + TOL * max(1.0, cap):
            bad.append(f"unit {u} loaded {used:.6g} > capacity {cap:.6g}")
    for u, cnt in r.n.items():
        if cnt < 0 or cnt != int(cnt):
            bad.append(f"unit {u} count {cnt} is not a whole number")
    bad += count_breaches(problem, r.n)
    if not problem.elastic_caps and problem.budget is not None and r.cost(problem) > problem.budget * (1 + TOL):
        bad.append(f"cost {r.cost(problem):.4f} > budget {problem.budget}")
    for group in problem.tied:
        if len({r.n.get(u, 0) for u in group}) > 1:
            bad.append(f"committed base {group[0]}: counts differ across periods")
    for u, v in problem.nested:
        if r.n.get(u, 0) > r.n.get(v, 0):
            bad.append(f"top-up {u}: {r.n.get(u, 0)} instances > {r.n.get(v, 0)} at a higher demand")
    if problem.adapters:
        from hetinfra.solver.adapter_check import verify_adapters

        bad += verify_adapters(problem, r)
    if problem.locality > 0:
        for (mod, region), lam in problem.local_demand.items():
            local = sum(v for (u, mm, _), v in r.flow.items() if mm == mod and units[u].region == region)
            if local < problem.locality * lam * scale - TOL * max(1.0, lam):
                bad.append(f"model {mod}: {local:.4g} req/s served in {region} < {problem.locality:g} x {lam * scale:.4g}")
    return bad


def unit_load(flow: dict, unit) -> float:
    """What ``flow``'s entries ((unit, model, class) -> req/s) on ``unit`` take of one instance's rates:
    its load in instances, as :func:`verify` counts it against ``(1 - headroom) x`` its count
    (``_routing_breaches`` sums the same for every unit in one pass)."""
    return sum(v / unit.rates[k[2]] for k, v in flow.items() if k[0] == unit.id and v > 0)


def count_breaches(problem: AllocationProblem, n: dict[str, int], units: set[str] | None = None) -> list[str]:
    """What the instance counts ``n`` break of the rules on counts alone: the availability caps (unless
    elastic) and each model's max_spot_fraction (of its GPUs). ``units``: only the caps those units use
    and those units' models (a check of one unit added: hetinfra.plan.levels), every rule otherwise."""
    by_id = {u.id: u for u in problem.units}
    bad = []
    if not problem.elastic_caps:
        for g, cap in problem.caps.items():
            if units is not None and not any(dict(by_id[u].gpu_use).get(g) for u in units):
                continue
            used = sum(dict(by_id[u].gpu_use).get(g, 0) * c for u, c in n.items())
            if used > cap:
                bad.append(f"{'/'.join(g)} uses {used} GPUs > cap {cap}")
    models = None if units is None else {by_id[u].model for u in units}
    for mod, frac in problem.max_spot_fraction.items():
        if models is not None and mod not in models:
            continue
        total = sum(by_id[u].gpus * c for u, c in n.items() if by_id[u].model == mod)
        spot = sum(by_id[u].gpus * c for u, c in n.items() if by_id[u].model == mod and by_id[u].spot)
        if spot > frac * total + TOL:
            bad.append(f"model {mod}: {spot} of {total} GPUs on spot > {frac:.0%}")
    return bad


def _routing_breaches(problem: AllocationProblem, r: SolveResult, units: dict, scale: float) -> tuple[list[str], dict]:
    """What breaks the routing (a negative flow, a flow on a pair outside P, a class not served in
    full at ``scale``), and each unit's load in instances (what its flows take of one instance's rates)."""
    bad: list[str] = []
    served: dict[tuple[str, str], float] = {k: 0.0 for k in problem.demand}
    load: dict[str, float] = {}
    for (u, mod, w), val in r.flow.items():
        if val < -TOL:
            bad.append(f"negative flow {val} on {u}")
        if w not in units[u].rates:  # a pair outside P: residency or the round trip in TTFT forbids it
            bad.append(f"flow of {mod}/{w} on {u}, which may not serve it")
            continue
        served[(mod, w)] += val
        load[u] = load.get(u, 0.0) + val / units[u].rates[w]
    for k, lam in problem.demand.items():
        if abs(served[k] + r.unmet.get(k, 0.0) - lam * scale) > TOL * max(1.0, lam * scale):
            bad.append(f"class {k[0]}/{k[1]} served {served[k]:.6g} of {lam * scale:.6g} req/s")
    return bad, load
