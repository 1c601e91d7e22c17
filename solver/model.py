r"""Build the allocation ILP as a Pyomo model: a pure function of an :class:`AllocationProblem`.

Sets
    U       units u (template t instantiated in region r with a purchase option)
    K       demand keys k = (model m, request class w), with rate lambda[k] req/s
    P       pairs (u, k) where unit u serves class k with capacity h[u,k] > 0 req/s per instance
    G       availability groups g = (cloud, region, gpu) with a cap A[g] GPUs
Variables
    n[u]    in Z>=0   instances of unit u
    y[u,k]  >= 0      req/s of class k routed to unit u                     (routing: fractional)
    z[u,k]  in Z>=0   slices of class k (of S) assigned to unit u           (routing: sliced)
    s       >= 0      uniform demand scale                                   (objective: max_throughput)
Constraints (one ``add_*`` function each)
    demand        sum_u y[u,k] = lambda[k]      (x s under max_throughput);  sliced: sum_u z[u,k] = S
    capacity      sum_k y[u,k] / h[u,k] <= (1 - headroom) n[u]              (Mélange's load; sliced:
                  y[u,k] = z[u,k] lambda[k] / S)
    availability  sum_{u in g} gpus[u] n[u] <= A[g]
    budget        sum_u cost[u] n[u] <= B
Objective
    min_cost        minimize sum_u cost[u] n[u]
    max_throughput  maximize s   (Demystifying's min makespan is T = 1/s)

Mélange's binary slice assignment x[slice, gpu] is replaced by the integer count z[u,k] of
identical slices of class k given to u: the same feasible loads without the slices' symmetry.
"""

from __future__ import annotations

import math

import pyomo.environ as pyo

from hetinfra.solver.problem import AllocationProblem


def instance_upper_bound(problem: AllocationProblem, unit) -> int:
    """Largest n[u] any optimal plan can use: enough to carry its model's whole servable demand
    alone (min_cost), or all the budget (max_throughput)."""
    if problem.objective == "max_throughput" and problem.budget is not None:
        return int(math.floor(problem.budget / unit.cost + 1e-9))
    load = sum(problem.demand[(unit.model, w)] / h for w, h in unit.rates.items() if (unit.model, w) in problem.demand)
    return max(1, int(math.ceil(load / (1.0 - problem.headroom) - 1e-9)))


def add_sets(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    m.U = pyo.Set(initialize=[u.id for u in p.units], ordered=True, doc="units")
    m.K = pyo.Set(initialize=sorted(p.demand), dimen=2, ordered=True, doc="demand keys (model, class)")
    m.P = pyo.Set(initialize=[(u, k[0], k[1]) for u, k in p.pairs()], dimen=3, ordered=True, doc="serving pairs")
    groups = sorted({u.cap_key for u in p.units if u.cap_key in p.caps})
    m.G = pyo.Set(initialize=groups, dimen=3, ordered=True, doc="capped availability groups")


def add_variables(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    by_id = {u.id: u for u in p.units}
    m.n = pyo.Var(m.U, within=pyo.NonNegativeIntegers, bounds=lambda _, u: (0, instance_upper_bound(p, by_id[u])),
                  doc="instances per unit")
    if p.routing == "sliced":
        m.z = pyo.Var(m.P, within=pyo.NonNegativeIntegers, bounds=(0, p.slice_factor), doc="slices per (unit, class)")
    else:
        m.y = pyo.Var(m.P, within=pyo.NonNegativeReals, doc="req/s routed per (unit, class)")
    if p.objective == "max_throughput":
        m.s = pyo.Var(within=pyo.NonNegativeReals, doc="uniform demand scale")


def routed(m: pyo.ConcreteModel, p: AllocationProblem, u: str, mod: str, w: str):
    """Expression for the req/s of class (mod, w) routed to unit u."""
    if p.routing == "sliced":
        return m.z[u, mod, w] * (p.demand[(mod, w)] / p.slice_factor)
    return m.y[u, mod, w]


def add_demand(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    serving: dict[tuple[str, str], list[str]] = {k: [] for k in p.demand}
    for u, mod, w in m.P:
        serving[(mod, w)].append(u)

    def rule(_, mod, w):
        us = serving[(mod, w)]
        if p.routing == "sliced":
            return sum(m.z[u, mod, w] for u in us) == p.slice_factor
        target = p.demand[(mod, w)] * (m.s if p.objective == "max_throughput" else 1.0)
        return sum(m.y[u, mod, w] for u in us) == target

    m.demand = pyo.Constraint(m.K, rule=rule, doc="every class fully routed")


def add_capacity(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    rates = {u.id: u.rates for u in p.units}
    by_unit: dict[str, list[tuple[str, str]]] = {u: [] for u in m.U}
    for u, mod, w in m.P:
        by_unit[u].append((mod, w))

    def rule(_, u):
        if not by_unit[u]:
            return pyo.Constraint.Skip
        load = sum(routed(m, p, u, mod, w) / rates[u][w] for mod, w in by_unit[u])
        return load <= (1.0 - p.headroom) * m.n[u]

    m.capacity = pyo.Constraint(m.U, rule=rule, doc="routed load within instances' capacity")


def add_availability(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    members: dict[tuple, list] = {g: [] for g in m.G}
    for u in p.units:
        if u.cap_key in members:
            members[u.cap_key].append(u)
    if p.elastic_caps:
        m.e = pyo.Var(m.G, within=pyo.NonNegativeReals, doc="GPUs beyond the cap (diagnosis only)")
    m.availability = pyo.Constraint(
        m.G, rule=lambda _, c, r, g: sum(u.gpus * m.n[u.id] for u in members[(c, r, g)])
        <= p.caps[(c, r, g)] + (m.e[c, r, g] if p.elastic_caps else 0),
        doc="GPUs per (cloud, region, gpu) within the cap")


def cost_expr(m: pyo.ConcreteModel, p: AllocationProblem):
    return sum(u.cost * m.n[u.id] for u in p.units)


def add_budget(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.budget is not None:
        m.budget = pyo.Constraint(expr=cost_expr(m, p) <= p.budget, doc="$/h within budget")


def add_objective(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.elastic_caps:
        # Fewest extra GPUs first; cost only breaks ties among those.
        extra = sum(m.e[g] for g in m.G)
        m.obj = pyo.Objective(expr=1e4 * extra + cost_expr(m, p), sense=pyo.minimize, doc="GPUs over caps, then $/h")
    elif p.objective == "max_throughput":
        m.obj = pyo.Objective(expr=m.s, sense=pyo.maximize, doc="uniform demand scale")
    else:
        m.obj = pyo.Objective(expr=cost_expr(m, p), sense=pyo.minimize, doc="$/h")


def build_model(p: AllocationProblem) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="hetinfra_allocation")
    add_sets(m, p)
    add_variables(m, p)
    add_demand(m, p)
    add_capacity(m, p)
    add_availability(m, p)
    add_budget(m, p)
    add_objective(m, p)
    return m
