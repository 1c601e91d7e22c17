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
    availability  sum_u gpus[u,g] n[u] <= A[g]     (gpus[u,g]: GPUs of group g in one instance of u)
    budget        sum_u cost[u] n[u] <= B
    spot_fraction sum_{u spot of m} gpus[u] n[u] <= f[m] sum_{u of m} gpus[u] n[u]
    locality      sum_{u in region r, k of m} y[u,k] >= epsilon lambda_local[m,r]   (SageServe)
    churn         c[u] >= n[u] - running[u], c >= 0                                  (Coral's initialization)
    unmet         (when allowed) demand becomes sum_u y[u,k] + q[k] = lambda[k], q >= 0
    committed_base  n[u] = n[v] for the copies u, v of one committed unit in the periods of a
                  multi-period problem (``solver.periods``: base b paid every hour, top-ups per period)
    scale_out     n[u] <= n[v] for the pairs ``nested`` (a top-up grows with its model's demand)
Objective
    min_cost        minimize sum_u cost[u] n[u] + churn_hours sum_u cost[u] c[u] + penalty sum_k q[k]
    max_throughput  maximize s   (Demystifying's min makespan is T = 1/s)

Routing by origin (``hetinfra.plan.origins``; ``AllocationProblem.flow_keys``)
    Where a model declares client origins o, its demand keys are flows k = (m, w@o) with
    lambda[k] = lambda[m,w] share[o], and h[u,k] = h[u,w] rate(TTFT - rtt(o, region(u))) / rate(TTFT):
    the capacity a replica has for requests that spend rtt of their TTFT on the network. The two
    new families are restrictions of P, not rows (a flow that may not exist has no variable, so it
    can never be traded for cost):
    residency     (u, k) in P only if region(u) is in area(o)   (the origin's region or continent)
    network TTFT  (u, k) in P only if rtt(o, region(u)) < TTFT and h[u,k] > 0
    Capacity then reads sum_k y[u,k] / h[u,k] <= (1 - headroom) n[u] over the flows, and the plan's
    class routing is y[u,(m,w)] = sum_o y[u,(m,w@o)].

Mélange's binary slice assignment x[slice, gpu] is replaced by the integer count z[u,k] of
identical slices of class k given to u: the same feasible loads without the slices' symmetry.
"""

from __future__ import annotations

import math

import pyomo.environ as pyo

from hetinfra.solver.problem import AllocationProblem, tied_bounds


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
    groups = sorted({g for u in p.units for g, _ in u.gpu_use if g in p.caps})
    m.G = pyo.Set(initialize=groups, dimen=3, ordered=True, doc="capped availability groups")


def add_variables(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    ub = tied_bounds(p, {u.id: instance_upper_bound(p, u) for u in p.units})
    m.n = pyo.Var(m.U, within=pyo.NonNegativeIntegers, bounds=lambda _, u: (0, ub[u]), doc="instances per unit")
    if p.routing == "sliced":
        m.z = pyo.Var(m.P, within=pyo.NonNegativeIntegers, bounds=(0, p.slice_factor), doc="slices per (unit, class)")
    else:
        m.y = pyo.Var(m.P, within=pyo.NonNegativeReals, doc="req/s routed per (unit, class)")
    if p.objective == "max_throughput":
        m.s = pyo.Var(within=pyo.NonNegativeReals, doc="uniform demand scale")
    if allows_unmet(p):
        m.q = pyo.Var(m.K, within=pyo.NonNegativeReals, bounds=lambda _, mod, w: (0, p.demand[(mod, w)]),
                      doc="req/s left unserved")
    if p.running:
        m.c = pyo.Var(m.U, within=pyo.NonNegativeReals, doc="instances started beyond those running")


def allows_unmet(p: AllocationProblem) -> bool:
    return p.unmet_penalty is not None and p.objective == "min_cost" and p.routing == "fractional"


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
        unmet = m.q[mod, w] if allows_unmet(p) else 0
        return sum(m.y[u, mod, w] for u in us) + unmet == target

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
        for g, gpus in u.gpu_use:
            if g in members:
                members[g].append((u, gpus))
    if p.elastic_caps:
        m.e = pyo.Var(m.G, within=pyo.NonNegativeReals, doc="GPUs beyond the cap (diagnosis only)")
    m.availability = pyo.Constraint(
        m.G, rule=lambda _, c, r, g: sum(gpus * m.n[u.id] for u, gpus in members[(c, r, g)])
        <= p.caps[(c, r, g)] + (m.e[c, r, g] if p.elastic_caps else 0),
        doc="GPUs per (cloud, region, gpu) within the cap")


def cost_expr(m: pyo.ConcreteModel, p: AllocationProblem):
    return sum(u.cost * m.n[u.id] for u in p.units)


def add_budget(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.budget is not None:
        m.budget = pyo.Constraint(expr=cost_expr(m, p) <= p.budget, doc="$/h within budget")


def add_spot_fraction(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    limited = sorted(mod for mod, f in p.max_spot_fraction.items() if f < 1.0
                     and any(u.spot and u.model == mod for u in p.units))
    if not limited:
        return

    def rule(_, mod):
        units = [u for u in p.units if u.model == mod]
        spot = sum(u.gpus * m.n[u.id] for u in units if u.spot)
        return spot <= p.max_spot_fraction[mod] * sum(u.gpus * m.n[u.id] for u in units)

    m.spot_fraction = pyo.Constraint(limited, rule=rule, doc="spot share of each model's GPUs")


def add_locality(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.locality <= 0 or not p.local_demand:
        return
    keys = sorted(p.local_demand)
    region_of = {u.id: u.region for u in p.units}
    scale = m.s if p.objective == "max_throughput" else 1.0

    def rule(_, mod, region):
        local = [(u, mm, w) for u, mm, w in m.P if mm == mod and region_of[u] == region]
        need = p.locality * p.local_demand[(mod, region)] * scale
        if not local:
            return pyo.Constraint.Infeasible if p.local_demand[(mod, region)] > 0 else pyo.Constraint.Skip
        return sum(routed(m, p, u, mm, w) for u, mm, w in local) >= need

    m.locality = pyo.Constraint(keys, rule=rule, doc="in-region service of local demand")


def add_churn(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.running:
        m.churn = pyo.Constraint(m.U, rule=lambda _, u: m.c[u] >= m.n[u] - p.running.get(u, 0),
                                 doc="new instances beyond the running ones")


def add_committed_base(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    pairs = [(g[0], u) for g in p.tied for u in g[1:]]
    if pairs:
        m.committed_base = pyo.Constraint(range(len(pairs)), rule=lambda _, i: m.n[pairs[i][1]] == m.n[pairs[i][0]],
                                          doc="one committed base in every period")


def add_scale_out(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.nested:
        m.scale_out = pyo.Constraint(range(len(p.nested)), rule=lambda _, i: m.n[p.nested[i][0]] <= m.n[p.nested[i][1]],
                                     doc="a top-up grows with its model's demand")


def objective_expr(m: pyo.ConcreteModel, p: AllocationProblem):
    """min_cost objective: $/h plus the churn and unmet-demand penalties."""
    expr = cost_expr(m, p)
    if p.running and p.churn_hours > 0:
        expr += p.churn_hours * sum(u.cost * m.c[u.id] for u in p.units)
    if allows_unmet(p):
        expr += p.unmet_penalty * sum(m.q[k] for k in m.K)
    return expr


def add_objective(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    if p.elastic_caps:
        # Fewest extra GPUs first; cost only breaks ties among those.
        extra = sum(m.e[g] for g in m.G)
        m.obj = pyo.Objective(expr=1e4 * extra + objective_expr(m, p), sense=pyo.minimize, doc="GPUs over caps, then $/h")
    elif p.objective == "max_throughput":
        m.obj = pyo.Objective(expr=m.s, sense=pyo.maximize, doc="uniform demand scale")
    else:
        m.obj = pyo.Objective(expr=objective_expr(m, p), sense=pyo.minimize, doc="$/h + penalties")


def build_model(p: AllocationProblem) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="hetinfra_allocation")
    add_sets(m, p)
    add_variables(m, p)
    add_demand(m, p)
    add_capacity(m, p)
    add_availability(m, p)
    add_budget(m, p)
    add_spot_fraction(m, p)
    add_locality(m, p)
    add_churn(m, p)
    add_committed_base(m, p)
    add_scale_out(m, p)
    add_objective(m, p)
    return m
