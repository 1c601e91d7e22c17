r"""The allocation ILP as a Pyomo model, made from the one statement of it in ``solver.rows``.

``build_model`` turns the compiled rows into a ``ConcreteModel`` any Pyomo MIP solver takes
(``planning.solver``; ``solver.solve.solve_pyomo``): the variables keep their names and indices
(``m.n[u]``, ``m.y[u, m, w]`` or ``m.z[u, m, w]``, ``m.s``, ``m.q[m, w]``, ``m.c[u]``, ``m.e[g]``) and
every row family of ``solver.rows`` becomes one indexed ``Constraint`` of that family's name,
indexed by its rows' keys. The math is in ``solver.rows``; nothing here restates it.
"""

from __future__ import annotations

import math

import pyomo.environ as pyo

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.rows import Rows, allows_unmet, compile_rows, instance_upper_bound

__all__ = ["allows_unmet", "build_model", "cost_expr", "instance_upper_bound"]


def _bound(x: float) -> float | None:
    return None if math.isinf(x) else x


def add_sets(m: pyo.ConcreteModel, p: AllocationProblem) -> None:
    m.U = pyo.Set(initialize=[u.id for u in p.units], ordered=True, doc="units")
    m.K = pyo.Set(initialize=sorted(p.demand), dimen=2, ordered=True, doc="demand keys (model, class)")
    m.P = pyo.Set(initialize=[(u, k[0], k[1]) for u, k in p.pairs()], dimen=3, ordered=True, doc="serving pairs")
    groups = sorted({g for u in p.units for g, _ in u.gpu_use if g in p.caps})
    m.G = pyo.Set(initialize=groups, dimen=3, ordered=True, doc="capped availability groups")


def add_variables(m: pyo.ConcreteModel, r: Rows) -> list:
    """One Pyomo variable per compiled column (bounds and integrality from the rows); returns
    them by column index."""
    def var(index_set, cols: dict, key, doc: str):
        def bounds(_, *i):
            c = cols[key(i)]
            return _bound(r.lb[c]), _bound(r.ub[c])

        def domain(_, *i):
            return pyo.Integers if r.integer[cols[key(i)]] else pyo.Reals

        return pyo.Var(index_set, domain=domain, bounds=bounds, doc=doc)

    flat = lambda i: i[0]  # noqa: E731
    m.n = var(m.U, r.n, flat, "instances per unit")
    flow = var(m.P, r.flow, lambda i: (i[0], (i[1], i[2])), "slices per (unit, class)" if r.p.routing == "sliced"
               else "req/s routed per (unit, class)")
    setattr(m, "z" if r.p.routing == "sliced" else "y", flow)
    columns: list = [None] * len(r.cost)
    for u, c in r.n.items():
        columns[c] = m.n[u]
    for (u, k), c in r.flow.items():
        columns[c] = flow[u, k[0], k[1]]
    if r.s is not None:
        m.s = pyo.Var(domain=pyo.Reals, bounds=(_bound(r.lb[r.s]), _bound(r.ub[r.s])), doc="uniform demand scale")
        columns[r.s] = m.s
    for name, cols, index, doc in (("q", r.q, m.K, "req/s left unserved"),
                                   ("c", r.c, m.U, "instances started beyond those running"),
                                   ("e", r.e, m.G, "GPUs beyond the cap (diagnosis only)")):
        if cols:
            setattr(m, name, var(index, cols, lambda i: i if len(i) > 1 else i[0], doc))
            component = getattr(m, name)
            for key, c in cols.items():
                columns[c] = component[key]
    if r.x:
        m.A = pyo.Set(initialize=list(r.x), dimen=2, ordered=True, doc="(unit, adapter) pairs that may hold")
        m.x = var(m.A, r.x, lambda i: i, "instances of a unit holding a LoRA adapter")
        for key, c in r.x.items():
            columns[c] = m.x[key]
    return columns


def add_rows(m: pyo.ConcreteModel, r: Rows, columns: list) -> None:
    """Each family's rows as one Constraint named after it, indexed by the rows' keys."""
    by_family: dict[str, dict] = {}
    for i, (family, key) in enumerate(r.families):
        by_family.setdefault(family, {})[key] = i
    for family, rows in by_family.items():
        rule = _row_rule(r, columns, rows)
        setattr(m, family, pyo.Constraint(rule=rule) if list(rows) == [None] else pyo.Constraint(list(rows), rule=rule))
    if r.trivially_infeasible:
        m.trivially_infeasible = True  # a family's row with no columns cannot hold (solve_pyomo checks)


def _row_rule(r: Rows, columns: list, rows: dict):
    """The Pyomo rule of one family: key -> lb <= sum_j a[j] x[j] <= ub."""
    def rule(_, *key):
        lb, ub, idx, val = r.rows[rows[None if not key else key if len(key) > 1 else key[0]]]
        body = pyo.quicksum(a * columns[j] for j, a in zip(idx, val))
        return body == lb if lb == ub else (_bound(lb), body, _bound(ub))

    return rule


def cost_expr(m: pyo.ConcreteModel, p: AllocationProblem):
    """$/h of the instances (max_throughput's second phase minimizes it)."""
    return sum(u.cost * m.n[u.id] for u in p.units)


def add_objective(m: pyo.ConcreteModel, r: Rows, columns: list) -> None:
    terms = [(a, columns[j]) for j, a in enumerate(r.cost) if a != 0.0]
    if r.maximizes:
        m.obj = pyo.Objective(expr=pyo.quicksum(-a * v for a, v in terms), sense=pyo.maximize, doc="uniform demand scale")
    else:
        m.obj = pyo.Objective(expr=pyo.quicksum(a * v for a, v in terms), sense=pyo.minimize, doc="$/h + penalties")


def build_model(p: AllocationProblem, *, cuts: bool = False) -> pyo.ConcreteModel:
    """The Pyomo model of ``solver.rows``; ``cuts``: with the cover cuts the fast path uses (valid
    inequalities: same optimum, a tighter LP relaxation)."""
    r = compile_rows(p, cuts=cuts)
    m = pyo.ConcreteModel(name="hetinfra_allocation")
    m.trivially_infeasible = False
    add_sets(m, p)
    columns = add_variables(m, r)
    add_rows(m, r, columns)
    add_objective(m, r, columns)
    return m
