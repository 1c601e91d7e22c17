r"""The allocation ILP, written once: sparse rows over named columns (PyPSA/linopy style).

Every constraint family is one ``add_<family>`` function below, with its math in its docstring.
``compile_rows`` runs them in a fixed order into a :class:`Rows` (columns with bounds, integrality and
objective; rows ``lb <= sum_j a[j] x[j] <= ub``). Everything that solves the problem reads that one
statement:

- ``solver.direct.DirectModel`` passes the arrays to HiGHS (``passModel``): the fast path;
- ``solver.model.build_model`` makes the Pyomo model of the same rows, which any Pyomo MIP solver
  takes (``planning.solver``);
- ``solver.heuristic`` books instances against the count rows (availability, budget, spot fraction).

``solver.solve.verify`` is the one deliberate second statement of the rules: it re-checks an answer
against what the problem means, independently of this module, so that a wrong compilation is caught.

Sets
    U       units u (template t instantiated in region r with a purchase option)
    K       demand keys k = (model m, request class w), with rate lambda[k] req/s
    P       pairs (u, k) where unit u serves class k with capacity h[u,k] > 0 req/s per instance
    G       availability groups g = (cloud, region, gpu) with a cap A[g] GPUs
Columns (``add_columns``, in this order)
    n[u]    in Z>=0, <= N[u] instances of unit u (N: ``instance_upper_bound``, raised over tied groups)
    y[u,k]  >= 0            req/s of class k routed to unit u                 (routing: fractional)
    z[u,k]  in {0..S}       slices of class k (of S) assigned to unit u       (routing: sliced)
    s       >= 0            uniform demand scale                              (objective: max_throughput)
    q[k]    in [0, lambda]  req/s of k left unserved                          (unmet demand allowed)
    c[u]    >= 0            instances started beyond those running            (a running fleet)
    e[g]    >= 0            GPUs over cap g                                   (elastic caps: diagnosis)
    x[u,a]  in {0, 1}       unit u holds LoRA adapter a on every instance     (adapters; a may be held by u)
Objective (``add_objective``; minimized, max_throughput as min -s)
    min_cost        sum_u (cost[u] + price[u]) n[u] + churn_hours sum_u cost[u] c[u] + penalty sum_k q[k]
                    + NETWORK_TIE sum_{u,k} rtt[u,k] y[u,k]
                    (price: Lagrangian prices of relaxed linking rows, ``solver.lagrange``; else 0;
                    rtt: a flow's round trip from its origin, routing by origin only: a tie-break)
    max_throughput  maximize s   (Demystifying's min makespan is T = 1/s)
    elastic caps    1e4 sum_g w[g] e[g] + the min_cost objective: fewest extra GPUs first, w[g] = 1,
                    or 1e3 for a cap of 0 (an empty cap is the last one blamed)

Routing by origin (``hetinfra.plan.origins``; ``AllocationProblem.flow_keys``): where a model
declares client origins o, its demand keys are flows k = (m, w@o) with lambda[k] = lambda[m,w]
share[o], and h[u,k] = h[u,w] rate(TTFT - rtt(o, region(u))) / rate(TTFT). Residency (region(u) in
area(o)) and the network's share of TTFT (rtt < TTFT) are restrictions of P, not rows: a flow that
may not exist has no column, so it can never be traded for cost.

Mélange's binary slice assignment x[slice, gpu] is replaced by the integer count z[u,k] of
identical slices of class k given to u: the same feasible loads without the slices' symmetry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetinfra.solver.problem import AllocationProblem, tied_bounds
from hetinfra.solver.rows_adapters import (add_adapter_area_cover, add_adapter_cover, add_adapter_once,
                                        add_adapter_routing, add_adapter_slots, add_adapter_tied)

INF = math.inf
#: $/h per req/s and millisecond of round trip of a flow routed by origin (min_cost): where the flows
#: of a fleet can be routed several ways at one cost, the LP was indifferent and routed across, e.g.
#: services/multi-region.yaml sent 47% of us-east-1's short chat to us-west-2 while us-west-2's went
#: to us-east-1 (45.6 ms each way for nothing). Small enough never to buy an instance: 10,000 req/s at
#: 100 ms cost $0.10/h, below any instance's price; large enough for the LP (5e-6 per req/s at 50 ms,
#: against HiGHS's dual feasibility tolerance of 1e-7).
NETWORK_TIE = 1e-7


def network_tie_most(p: AllocationProblem) -> float:
    """The most the tie-break (NETWORK_TIE) adds to ``p``'s objective: every req/s at the longest round
    trip. Objectives of two plans of ``p`` that differ by less than this may be of equal cost."""
    if not p.network_ms:
        return 0.0
    return NETWORK_TIE * max(p.network_ms.values()) * sum(p.demand.values())
#: Objective weight of a GPU over a cap in diagnosis mode (elastic caps).
ELASTIC_WEIGHT = 1e4
#: ... times this for a cap of 0: an empty cap (a quota of 0, a region the feed says has none) is
#: blamed only when no relaxation of the caps that hold GPUs serves the demand (issue 36)
EMPTY_CAP_FACTOR = 1e3


def instance_upper_bound(problem: AllocationProblem, unit) -> int:
    """Largest n[u] any optimal plan can use: enough to carry its model's whole servable demand
    alone (min_cost), or all the budget (max_throughput)."""
    if problem.objective == "max_throughput" and problem.budget is not None:
        return int(math.floor(problem.budget / unit.cost + 1e-9))
    load = sum(problem.demand[(unit.model, w)] / h for w, h in unit.rates.items() if (unit.model, w) in problem.demand)
    return max(1, int(math.ceil(load / (1.0 - problem.headroom) - 1e-9)), _holding_bound(problem, unit))


def _holding_bound(problem: AllocationProblem, unit) -> int:
    """Instances of ``unit`` a plan may need to hold adapters: one (a unit holds an adapter on every
    instance, ``add_adapter_once``); 0 without slots or adapters."""
    return 1 if unit.slots and problem.adapters else 0


def allows_unmet(p: AllocationProblem) -> bool:
    """Unserved demand q is a column only under min_cost with fractional routing."""
    return p.unmet_penalty is not None and p.objective == "min_cost" and p.routing == "fractional"


@dataclass
class Rows:
    """The compiled problem: columns (bounds, integrality, objective) and sparse rows, each row
    named by its family and key (``families[i]`` for ``rows[i]``)."""

    p: AllocationProblem
    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    #: (lb, ub, column indices ascending, coefficients)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    families: list[tuple[str, object]] = field(default_factory=list)
    n: dict = field(default_factory=dict)  # unit id -> column
    flow: dict = field(default_factory=dict)  # (unit id, demand key) -> column (y or z)
    s: int | None = None
    q: dict = field(default_factory=dict)  # demand key -> column
    c: dict = field(default_factory=dict)  # unit id -> column
    e: dict = field(default_factory=dict)  # group -> column
    x: dict = field(default_factory=dict)  # (unit id, adapter) -> column: instances of u holding the adapter
    pairs: list = field(default_factory=list)
    #: a row with no columns that cannot hold (locality in a region without units): no solve needed
    trivially_infeasible: bool = False

    def col(self, lb: float, ub: float, integer: bool = False) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.cost.append(0.0)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, family: str, key, lb: float, ub: float, terms: dict[int, float]) -> None:
        idx = sorted(terms)
        self.rows.append((lb, ub, idx, [terms[i] for i in idx]))
        self.families.append((family, key))

    def per(self, k) -> float:
        """req/s one unit of the flow column of key k carries (a slice under sliced routing)."""
        return self.p.demand[k] / self.p.slice_factor if self.p.routing == "sliced" else 1.0

    @property
    def maximizes(self) -> bool:
        """The objective is max s (stored as min -s)."""
        return self.s is not None and not self.p.elastic_caps and self.cost[self.s] < 0


def add_columns(r: Rows) -> None:
    """The columns of the module docstring, in that order (n, y|z, s, q, c, e, x)."""
    p = r.p
    ub = tied_bounds(p, {u.id: instance_upper_bound(p, u) for u in p.units})
    r.n = {u.id: r.col(0, ub[u.id], True) for u in p.units}
    r.pairs = p.pairs()
    sliced = p.routing == "sliced"
    r.flow = {(u, k): r.col(0, p.slice_factor if sliced else INF, sliced) for u, k in r.pairs}
    r.s = r.col(0, INF) if p.objective == "max_throughput" else None
    r.q = {k: r.col(0, p.demand[k]) for k in sorted(p.demand)} if allows_unmet(p) else {}
    r.c = {u.id: r.col(0, INF) for u in p.units} if p.running else {}
    groups = sorted({g for u in p.units for g, _ in u.gpu_use if g in p.caps})
    r.e = {g: r.col(0, INF) for g in groups} if p.elastic_caps else {}
    r.x = {(u.id, a.name): r.col(0, 1, True) for a in p.adapters for u in p.units if a.may_hold(u)}  # binary


def add_objective(r: Rows, extra_cost: dict[str, float] | None = None) -> None:
    """Objective coefficients (module docstring). ``extra_cost``: $/h added to a unit's instance
    cost in the objective only (Lagrangian prices); churn stays on the unit's own cost."""
    p, extra = r.p, extra_cost or {}
    min_cost = p.objective == "min_cost" or p.elastic_caps
    for u in p.units:
        r.cost[r.n[u.id]] = u.cost + extra.get(u.id, 0.0) if min_cost else 0.0
        if u.id in r.c:
            r.cost[r.c[u.id]] = p.churn_hours * u.cost if min_cost else 0.0
    if min_cost and p.adapters and p.running:  # LoRA: an adapter moved onto a running unit restarts it
        from hetinfra.solver.adapter_check import adapter_move_costs

        for key, penalty in adapter_move_costs(p).items():
            r.cost[r.x[key]] = penalty
    if r.s is not None:
        r.cost[r.s] = -1.0 if not p.elastic_caps else 0.0
    for col in r.q.values():
        r.cost[col] = p.unmet_penalty
    for g, col in r.e.items():
        r.cost[col] = ELASTIC_WEIGHT * (EMPTY_CAP_FACTOR if p.caps[g] <= 0 else 1.0)
    if min_cost and p.network_ms:  # routing by origin: a tie-break toward the clients (NETWORK_TIE)
        for u, k in r.pairs:
            ms = p.network_ms.get((u, k))
            if ms:
                r.cost[r.flow[(u, k)]] = NETWORK_TIE * ms * r.per(k)


def add_demand(r: Rows) -> None:
    r"""Every class is routed in full:

    fractional  sum_u y[u,k] + q[k] = lambda[k]   (q only where unmet demand is allowed)
    max_throughput  sum_u y[u,k] - lambda[k] s = 0
    sliced      sum_u z[u,k] = S
    """
    p = r.p
    serving: dict = {k: {} for k in p.demand}
    for u, k in r.pairs:
        serving[k][r.flow[(u, k)]] = 1.0
    for k in sorted(p.demand):
        terms = dict(serving[k])
        if p.routing == "sliced":
            r.row("demand", k, p.slice_factor, p.slice_factor, terms)
            continue
        if k in r.q:
            terms[r.q[k]] = 1.0
        if r.s is not None:
            terms[r.s] = -p.demand[k]
            r.row("demand", k, 0, 0, terms)
        else:
            r.row("demand", k, p.demand[k], p.demand[k], terms)


def add_capacity(r: Rows) -> None:
    r"""Routed load within the instances' capacity (Mélange's load):

    sum_k y[u,k] / h[u,k] - (1 - headroom) n[u] <= 0      (sliced: y[u,k] = z[u,k] lambda[k] / S)
    """
    p = r.p
    rates = {u.id: u.rates for u in p.units}
    load: dict[str, dict[int, float]] = {u.id: {} for u in p.units}
    for u, k in r.pairs:
        load[u][r.flow[(u, k)]] = r.per(k) / rates[u][k[1]]
    for u in p.units:
        if load[u.id]:
            terms = dict(load[u.id])
            terms[r.n[u.id]] = -(1.0 - p.headroom)
            r.row("capacity", u.id, -INF, 0, terms)


def add_availability(r: Rows) -> None:
    r"""GPUs per capped (cloud, region, gpu) group within its cap:

    sum_u gpus[u,g] n[u] - e[g] <= A[g]     (gpus[u,g]: GPUs of g in one instance of u; e: elastic caps)
    """
    p = r.p
    members: dict[tuple, dict[int, float]] = {}
    for u in p.units:
        for g, gpus in u.gpu_use:
            if g in p.caps:
                members.setdefault(g, {})[r.n[u.id]] = float(gpus)
    for g in sorted(members):
        terms = dict(members[g])
        if g in r.e:
            terms[r.e[g]] = -1.0
        r.row("availability", g, -INF, p.caps[g], terms)


def add_budget(r: Rows) -> None:
    r"""$/h within the budget:  sum_u cost[u] n[u] <= B."""
    p = r.p
    if p.budget is not None:
        r.row("budget", None, -INF, p.budget, {r.n[u.id]: u.cost for u in p.units})


def add_spot_fraction(r: Rows) -> None:
    r"""At most a fraction f[m] of each model's GPUs on spot units:

    sum_{u of m} gpus[u] (spot[u] - f[m]) n[u] <= 0
    """
    p = r.p
    for mod in sorted(p.max_spot_fraction):
        f = p.max_spot_fraction[mod]
        mine = [u for u in p.units if u.model == mod]
        if f >= 1.0 or not any(u.spot for u in mine):
            continue
        r.row("spot_fraction", mod, -INF, 0, {r.n[u.id]: u.gpus * ((1.0 if u.spot else 0.0) - f) for u in mine})


def add_locality(r: Rows) -> None:
    r"""In-region service of local demand (SageServe):

    sum_{u in region rg, k of m} y[u,k] >= epsilon lambda_local[m,rg]   (x s under max_throughput)

    A region with local demand but no units there makes the problem trivially infeasible.
    """
    p = r.p
    if p.locality <= 0 or not p.local_demand:
        return
    region = {u.id: u.region for u in p.units}
    for (mod, rg) in sorted(p.local_demand):
        need = p.locality * p.local_demand[(mod, rg)]
        terms = {r.flow[(u, k)]: r.per(k) for u, k in r.pairs if k[0] == mod and region[u] == rg}
        if not terms:
            r.trivially_infeasible |= need > 0
            continue
        if r.s is not None:
            terms[r.s] = -need
            r.row("locality", (mod, rg), 0, INF, terms)
        else:
            r.row("locality", (mod, rg), need, INF, terms)


def add_cover(r: Rows) -> None:
    r"""Cover cuts (valid inequalities; min_cost without unmet demand only). An instance of u
    serves at most (1 - headroom) max_w h[u,w] req/s, so

    sum_{u of m} n[u] >= ceil(lambda[m] / ((1 - headroom) max_{u of m, w} h[u,w]))

    and likewise per locality region over its units for epsilon lambda_local[m,rg]. They change no
    optimum; they give the LP bound the integer rounding it lacks (a model of 2 req/s needs a whole
    instance), about halving the per-model MIPs at 12 regions.
    """
    p = r.p
    if p.objective != "min_cost" or r.q:
        return
    by_model: dict[str, list] = {}
    for u in p.units:
        by_model.setdefault(u.model, []).append(u)
    needs = [((m, ""), by_model.get(m, []), sum(v for k, v in p.demand.items() if k[0] == m)) for m in sorted(by_model)]
    if p.locality > 0:
        needs += [((m, rg), [u for u in by_model.get(m, []) if u.region == rg], p.locality * lam)
                  for (m, rg), lam in sorted(p.local_demand.items())]
    for key, mine, need in needs:
        rates = [max(u.rates.values()) for u in mine if u.rates]
        if need <= 0 or not rates or max(rates) <= 0:
            continue
        k = math.ceil(need / ((1.0 - p.headroom) * max(rates)) - 1e-9)
        if k >= 1:
            r.row("cover", key, float(k), INF, {r.n[u.id]: 1.0 for u in mine})


def add_churn(r: Rows) -> None:
    r"""Instances started beyond those running (Coral's initialization):  c[u] - n[u] >= -running[u]."""
    p = r.p
    for u in p.units if p.running else ():
        r.row("churn", u.id, -float(p.running.get(u.id, 0)), INF, {r.c[u.id]: 1.0, r.n[u.id]: -1.0})


def add_committed_base(r: Rows) -> None:
    r"""One committed base in every period (``solver.periods``): the copies u of a committed unit
    in a tied group (first member v) have one count,  n[u] - n[v] = 0."""
    for group in r.p.tied:
        for u in group[1:]:
            r.row("committed_base", (group[0], u), 0.0, 0.0, {r.n[u]: 1.0, r.n[group[0]]: -1.0})


def add_scale_out(r: Rows) -> None:
    r"""A top-up grows with its model's demand (``solver.periods``):  n[v] - n[u] >= 0 for (u, v) nested."""
    for u, v in r.p.nested:
        r.row("scale_out", (u, v), 0.0, INF, {r.n[v]: 1.0, r.n[u]: -1.0})


#: The row families in the order they are compiled (the order fixes HiGHS's path: keep it).
FAMILIES = (add_demand, add_capacity, add_availability, add_budget, add_spot_fraction, add_locality, add_cover,
            add_churn, add_committed_base, add_scale_out, add_adapter_slots, add_adapter_once,
            add_adapter_tied, add_adapter_routing, add_adapter_cover, add_adapter_area_cover)
#: The families over instance counts only that the heuristic books against (``count_rows``).
COUNT_FAMILIES = (add_availability, add_budget, add_spot_fraction)


def compile_rows(p: AllocationProblem, extra_cost: dict[str, float] | None = None, *, cuts: bool = True) -> Rows:
    """The whole problem as rows; ``cuts``: with the per-model cover cuts (``add_cover``)."""
    r = Rows(p)
    add_columns(r)
    add_objective(r, extra_cost)
    for add in FAMILIES:
        if cuts or add is not add_cover:
            add(r)
    return r


def count_rows(p: AllocationProblem) -> Rows:
    """The rows over instance counts alone (availability, budget, spot fraction; caps strict), with
    only the n columns: what a count-level heuristic must keep."""
    r = Rows(p.replace(elastic_caps=False))
    ub = {u.id: instance_upper_bound(p, u) for u in p.units}
    r.n = {u.id: r.col(0, ub[u.id], True) for u in p.units}
    for add in COUNT_FAMILIES:
        add(r)
    return r
