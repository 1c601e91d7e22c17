r"""The allocation ILP of ``solver.model`` written straight into one persistent HiGHS instance.

``solver.model.build_model`` (Pyomo) is the readable reference formulation; this module builds the
same variables, constraints and objective as a sparse matrix for ``highspy`` (no Pyomo import, no
translation), and keeps the model in one ``Highs`` object for the LP bound, the fixed-count LPs
that complete warm starts, and the MIP. ``tests/solver/test_direct.py`` checks both give the same
optimum on every feature.

Determinism: ``threads=1``, a fixed ``random_seed`` and a node limit (``mip_max_nodes``) decide when
the MIP stops; the wall-clock ``time_limit`` is only a safety stop, reported as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetinfra.solver.problem import AllocationProblem, tied_bounds

#: Objective weight of a GPU over a cap in diagnosis mode (as in solver.model).
ELASTIC_WEIGHT = 1e4


def instance_upper_bound(problem: AllocationProblem, unit) -> int:
    """Largest n[u] any optimal plan can use (same rule as ``solver.model.instance_upper_bound``)."""
    if problem.objective == "max_throughput" and problem.budget is not None:
        return int(math.floor(problem.budget / unit.cost + 1e-9))
    load = sum(problem.demand[(unit.model, w)] / h for w, h in unit.rates.items() if (unit.model, w) in problem.demand)
    return max(1, int(math.ceil(load / (1.0 - problem.headroom) - 1e-9)))


def allows_unmet(p: AllocationProblem) -> bool:
    return p.unmet_penalty is not None and p.objective == "min_cost" and p.routing == "fractional"


@dataclass
class Outcome:
    """One HiGHS run on the model."""

    status: str  # "optimal", "node_limit", "time_limit", "infeasible", "error"
    has_solution: bool = False
    objective: float | None = None  # in the problem's sense (max_throughput: s; else $/h + penalties)
    bound: float | None = None
    values: list[float] = field(default_factory=list)
    nodes: int = 0


class DirectModel:
    """The ILP for one AllocationProblem in one Highs instance."""

    def __init__(self, p: AllocationProblem, extra_cost: dict[str, float] | None = None):
        """``extra_cost``: $/h added to a unit's instance cost in the objective only (Lagrangian
        prices of relaxed linking rows, ``solver.lagrange``); churn stays on the unit's own cost."""
        self.p = p
        self.extra_cost = extra_cost or {}
        self.cols_lb: list[float] = []
        self.cols_ub: list[float] = []
        self.cost: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[tuple[float, float, list[int], list[float]]] = []
        self.trivially_infeasible = False
        self._build()
        self._highs = None

    # ---- building -------------------------------------------------------------------------------
    def _col(self, lb: float, ub: float, cost: float = 0.0, integer: bool = False) -> int:
        self.cols_lb.append(lb)
        self.cols_ub.append(ub)
        self.cost.append(cost)
        self.integer.append(integer)
        return len(self.cost) - 1

    def _row(self, lb: float, ub: float, terms: dict[int, float]) -> None:
        idx = sorted(terms)
        self.rows.append((lb, ub, idx, [terms[i] for i in idx]))

    def _build(self) -> None:
        p, inf = self.p, math.inf
        min_cost = p.objective == "min_cost" or p.elastic_caps
        extra = self.extra_cost
        ub = tied_bounds(p, {u.id: instance_upper_bound(p, u) for u in p.units})
        self.n = {u.id: self._col(0, ub[u.id], u.cost + extra.get(u.id, 0.0) if min_cost else 0.0, True)
                  for u in p.units}
        self.pairs = p.pairs()
        if p.routing == "sliced":
            self.flow = {(u, k): self._col(0, p.slice_factor, 0.0, True) for u, k in self.pairs}
        else:
            self.flow = {(u, k): self._col(0, inf) for u, k in self.pairs}
        self.s = self._col(0, inf, -1.0 if p.objective == "max_throughput" and not p.elastic_caps else 0.0) \
            if p.objective == "max_throughput" else None
        self.q = {k: self._col(0, p.demand[k], p.unmet_penalty) for k in sorted(p.demand)} if allows_unmet(p) else {}
        self.c = {}
        if p.running:
            w = p.churn_hours if min_cost else 0.0
            self.c = {u.id: self._col(0, inf, w * u.cost) for u in p.units}
        groups = sorted({g for u in p.units for g, _ in u.gpu_use if g in p.caps})
        self.e = {g: self._col(0, inf, ELASTIC_WEIGHT) for g in groups} if p.elastic_caps else {}
        units = {u.id: u for u in p.units}
        per = {k: (p.demand[k] / p.slice_factor if p.routing == "sliced" else 1.0) for k in p.demand}

        # demand
        serving: dict = {k: {} for k in p.demand}
        for u, k in self.pairs:
            serving[k][self.flow[(u, k)]] = 1.0
        for k in sorted(p.demand):
            terms = dict(serving[k])
            if p.routing == "sliced":
                self._row(p.slice_factor, p.slice_factor, terms)
                continue
            if k in self.q:
                terms[self.q[k]] = 1.0
            if self.s is not None:
                terms[self.s] = -p.demand[k]
                self._row(0, 0, terms)
            else:
                self._row(p.demand[k], p.demand[k], terms)
        # capacity
        load: dict[str, dict[int, float]] = {u.id: {} for u in p.units}
        for u, k in self.pairs:
            load[u][self.flow[(u, k)]] = per[k] / units[u].rates[k[1]]
        for u in p.units:
            if load[u.id]:
                terms = dict(load[u.id])
                terms[self.n[u.id]] = -(1.0 - p.headroom)
                self._row(-inf, 0, terms)
        # availability
        for g in groups:
            terms = {self.n[u.id]: float(gp) for u in p.units for gg, gp in u.gpu_use if gg == g}
            if g in self.e:
                terms[self.e[g]] = -1.0
            self._row(-inf, p.caps[g], terms)
        # budget
        if p.budget is not None:
            self._row(-inf, p.budget, {self.n[u.id]: u.cost for u in p.units})
        # spot fraction
        for mod in sorted(p.max_spot_fraction):
            f = p.max_spot_fraction[mod]
            mine = [u for u in p.units if u.model == mod]
            if f >= 1.0 or not any(u.spot for u in mine):
                continue
            self._row(-inf, 0, {self.n[u.id]: u.gpus * ((1.0 if u.spot else 0.0) - f) for u in mine})
        # locality
        if p.locality > 0 and p.local_demand:
            for (mod, region) in sorted(p.local_demand):
                need = p.locality * p.local_demand[(mod, region)]
                terms = {self.flow[(u, k)]: per[k] for u, k in self.pairs
                         if k[0] == mod and units[u].region == region}
                if not terms:
                    if need > 0:
                        self.trivially_infeasible = True
                    continue
                if self.s is not None:
                    terms[self.s] = -need
                    self._row(0, inf, terms)
                else:
                    self._row(need, inf, terms)
        # cover rows (valid inequalities, not in solver.model): an instance of u serves at most
        # (1 - headroom) x max_w h[u, w] req/s, so a model needs at least ceil(demand / the best such
        # rate) instances, and a locality region ceil(its local need / the best rate there). They
        # change no optimum; they give HiGHS the integer rounding its LP bound lacks (a model of
        # 2 req/s needs a whole instance), about halving the per-model MIPs at 12 regions.
        if p.objective == "min_cost" and not self.q:
            self._cover_rows(units)
        # churn
        for u in p.units if p.running else ():
            self._row(-float(p.running.get(u.id, 0)), inf, {self.c[u.id]: 1.0, self.n[u.id]: -1.0})
        # committed base (solver.periods): a committed unit's copies in every period have one count
        for group in p.tied:
            for u in group[1:]:
                self._row(0.0, 0.0, {self.n[u]: 1.0, self.n[group[0]]: -1.0})
        # scale-out (solver.periods): a top-up grows with its model's demand
        for u, v in p.nested:
            self._row(0.0, inf, {self.n[v]: 1.0, self.n[u]: -1.0})

    def _cover_rows(self, units: dict) -> None:
        p = self.p
        by_model: dict[str, list] = {}
        for u in p.units:
            by_model.setdefault(u.model, []).append(u)
        needs = [(by_model.get(m, []), sum(v for k, v in p.demand.items() if k[0] == m)) for m in sorted(by_model)]
        if p.locality > 0:
            needs += [([u for u in by_model.get(m, []) if u.region == r], p.locality * lam)
                      for (m, r), lam in sorted(p.local_demand.items())]
        for mine, need in needs:
            rates = [max(u.rates.values()) for u in mine if u.rates]
            if need <= 0 or not rates or max(rates) <= 0:
                continue
            k = math.ceil(need / ((1.0 - p.headroom) * max(rates)) - 1e-9)
            if k >= 1:
                self._row(float(k), math.inf, {self.n[u.id]: 1.0 for u in mine})

    @property
    def num_integer(self) -> int:
        return sum(self.integer)

    def size(self) -> dict:
        return {"variables": len(self.cost), "integer_variables": self.num_integer, "constraints": len(self.rows)}

    # ---- HiGHS ----------------------------------------------------------------------------------
    def highs(self):
        if self._highs is not None:
            return self._highs
        import highspy
        import numpy as np

        from hetinfra.solver.highs_quiet import new_highs

        h = new_highs()
        for opt, val in (("output_flag", False), ("threads", 1), ("random_seed", 0), ("mip_rel_gap", 0.0)):
            h.setOptionValue(opt, val)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.cost), len(self.rows)
        lp.col_cost_ = np.array(self.cost, dtype=float)
        lp.col_lower_ = np.array(self.cols_lb, dtype=float)
        lp.col_upper_ = np.array(self.cols_ub, dtype=float)
        lp.row_lower_ = np.array([r[0] for r in self.rows], dtype=float)
        lp.row_upper_ = np.array([r[1] for r in self.rows], dtype=float)
        starts, index, value = [0], [], []
        for _, _, idx, val in self.rows:
            index.extend(idx)
            value.extend(val)
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=float)
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in self.integer]
        h.passModel(lp)
        self._highs = h
        return h

    def _sign(self) -> float:
        return -1.0 if self.s is not None and not self.p.elastic_caps and self.cost[self.s] < 0 else 1.0

    def _run(self, *, relax: bool, time_limit_s: float, mip_gap: float = 0.0,
             max_nodes: int | None = None, start: list[float] | None = None) -> Outcome:
        import highspy

        if self.trivially_infeasible:
            return Outcome("infeasible")
        h = self.highs()
        h.setOptionValue("solve_relaxation", bool(relax))
        h.setOptionValue("time_limit", float(max(time_limit_s, 1e-3)))
        h.setOptionValue("mip_rel_gap", float(mip_gap))
        h.setOptionValue("mip_max_nodes", int(max_nodes) if max_nodes is not None else 2147483647)
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = list(start)
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        ms = h.getModelStatus()
        info = h.getInfo()
        has = info.primal_solution_status == 2
        S = highspy.HighsModelStatus
        status = {S.kOptimal: "optimal", S.kTimeLimit: "time_limit", S.kSolutionLimit: "node_limit",
                  S.kIterationLimit: "node_limit", S.kInfeasible: "infeasible",
                  S.kUnboundedOrInfeasible: "infeasible"}.get(ms, "error")
        out = Outcome(status, has)
        sign = self._sign()
        if has:
            out.values = list(h.getSolution().col_value)
            out.objective = sign * info.objective_function_value
        if relax:
            out.bound = out.objective if status == "optimal" else None
        else:
            b = info.mip_dual_bound
            out.bound = sign * b if b is not None and math.isfinite(b) else None
            out.nodes = int(info.mip_node_count)
        return out

    def relaxation(self, time_limit_s: float) -> Outcome:
        """The LP relaxation (every integer relaxed): a bound, and counts to round."""
        return self._run(relax=True, time_limit_s=time_limit_s)

    def with_counts(self, counts: dict[str, int], time_limit_s: float) -> Outcome:
        """The best routing (and the other continuous variables) for fixed instance counts: a
        complete point for a warm start, or infeasible when those counts cannot serve the demand."""
        h = self.highs()
        cols = [self.n[u.id] for u in self.p.units]
        fixed = [float(int(counts.get(u.id, 0))) for u in self.p.units]
        if any(f > self.cols_ub[c] for f, c in zip(fixed, cols)):
            return Outcome("infeasible")
        h.changeColsBounds(len(cols), cols, fixed, fixed)
        try:
            return self._run(relax=self.p.routing != "sliced", time_limit_s=time_limit_s)
        finally:
            h.changeColsBounds(len(cols), cols, [self.cols_lb[c] for c in cols], [self.cols_ub[c] for c in cols])

    def mip(self, *, time_limit_s: float, mip_gap: float, max_nodes: int | None,
            start: list[float] | None = None) -> Outcome:
        return self._run(relax=False, time_limit_s=time_limit_s, mip_gap=mip_gap, max_nodes=max_nodes, start=start)

    def add_objective_floor(self, floor: float) -> None:
        """A valid lower bound on the min_cost objective known from elsewhere (the sum of the
        per-model optima's bounds) as a constraint, so HiGHS's own bound starts there."""
        import numpy as np

        h = self.highs()
        idx = [i for i, c in enumerate(self.cost) if c != 0.0]
        h.addRow(float(floor), math.inf, len(idx), np.array(idx, dtype=np.int32),
                 np.array([self.cost[i] for i in idx], dtype=float))

    def keep_scale(self, s_star: float) -> None:
        """max_throughput phase 2: hold s >= s* (1 - 1e-7) and minimize $/h."""
        import numpy as np

        h = self.highs()
        h.addRow(s_star * (1 - 1e-7), math.inf, 1, np.array([self.s], dtype=np.int32), np.array([1.0]))
        ids = list(range(len(self.cost)))
        self.cost = [0.0] * len(self.cost)
        for u in self.p.units:
            self.cost[self.n[u.id]] = u.cost
        h.changeColsCost(len(ids), np.array(ids, dtype=np.int32), np.array(self.cost, dtype=float))

    # ---- reading a point ------------------------------------------------------------------------
    def counts(self, values: list[float]) -> dict[str, int]:
        return {u: int(round(values[c])) for u, c in self.n.items() if values[c] > 0.5}

    def flows(self, values: list[float]) -> dict[tuple[str, str, str], float]:
        out = {}
        for (u, k), c in self.flow.items():
            v = values[c]
            if self.p.routing == "sliced":
                v = round(v) * self.p.demand[k] / self.p.slice_factor
            if v > 1e-9:
                out[(u, k[0], k[1])] = v
        return out

    def unmet(self, values: list[float]) -> dict[tuple[str, str], float]:
        return {k: values[c] for k, c in self.q.items() if values[c] > 1e-9}

    def extra_gpus(self, values: list[float]) -> dict[tuple[str, str, str], float]:
        return {g: values[c] for g, c in self.e.items() if values[c] > 1e-6}

    def scale(self, values: list[float]) -> float | None:
        return values[self.s] if self.s is not None else None

    def objective_of(self, values: list[float]) -> float:
        return sum(c * v for c, v in zip(self.cost, values)) * self._sign()
