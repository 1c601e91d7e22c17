r"""The allocation ILP (``solver.rows``) in one persistent HiGHS instance: the fast path.

``solver.rows.compile_rows`` states the problem once as sparse rows; this module hands those arrays
to ``highspy`` (``passModel``: no Pyomo import, no translation) and keeps the model in one ``Highs``
object for the LP bound, the fixed-count LPs that complete warm starts, and the MIP.
``solver.model.build_model`` makes the Pyomo model of the same rows (other solvers, tests); the
tests check both give the same optimum on every feature.

Determinism: ``threads=1``, a fixed ``random_seed`` and a node limit (``mip_max_nodes``) decide when
the MIP stops; the wall-clock ``time_limit`` is only a safety stop, reported as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetinfra.solver import clock
from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.rows import ELASTIC_WEIGHT, allows_unmet, compile_rows, instance_upper_bound

__all__ = ["ELASTIC_WEIGHT", "DirectModel", "Outcome", "allows_unmet", "instance_upper_bound"]


def stale(vector_objective: float, reported: float) -> bool:
    """The solution vector's objective is not the one the solver reported (``DirectModel._run``)."""
    return abs(vector_objective - reported) > 1e-6 * max(1.0, abs(reported))


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
    """The ILP for one AllocationProblem (``solver.rows``) in one Highs instance."""

    def __init__(self, p: AllocationProblem, extra_cost: dict[str, float] | None = None):
        """``extra_cost``: $/h added to a unit's instance cost in the objective only (Lagrangian
        prices of relaxed linking rows, ``solver.lagrange``); churn stays on the unit's own cost."""
        self.p = p
        self.extra_cost = extra_cost or {}
        r = compile_rows(p, self.extra_cost)
        self.compiled = r
        self.cols_lb, self.cols_ub, self.cost, self.integer, self.rows = r.lb, r.ub, r.cost, r.integer, r.rows
        self.n, self.flow, self.s, self.q, self.c, self.e = r.n, r.flow, r.s, r.q, r.c, r.e
        self.pairs = r.pairs
        self.x = r.x  # (unit, adapter) -> its binary column: LoRA adapters held (solver.rows)
        self.trivially_infeasible = r.trivially_infeasible
        self._highs = None
        self._floor_ok: bool | None = None

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
        deadline = clock.now() + time_limit_s  # a re-run below gets what is left of this call's limit
        h = self.highs()
        h.setOptionValue("solve_relaxation", bool(relax))
        h.setOptionValue("time_limit", float(max(time_limit_s, 1e-3)))
        h.setOptionValue("mip_rel_gap", float(mip_gap))
        h.setOptionValue("mip_max_nodes", int(max_nodes) if max_nodes is not None else 2147483647)
        # feasibility jump only looks for a first feasible point, which a start already is; HiGHS runs
        # it at every root and sub-MIP root, where it took a third of a 32-model fleet's solve time
        h.setOptionValue("mip_heuristic_run_feasibility_jump", start is None)
        h.setOptionValue("mip_heuristic_run_rins", start is None)
        h.setOptionValue("mip_heuristic_run_rens", start is None)
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
            if start is not None and not relax and stale(self.objective_of(out.values), out.objective):
                # HiGHS 1.16: when presolve alone solves a MIP given a start, it reports the optimum's
                # objective with the start's vector. Solve it again without the start.
                h.clearSolver()
                return self._run(relax=relax, time_limit_s=clock.remaining(deadline), mip_gap=mip_gap,
                                 max_nodes=max_nodes)
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

    def objective_floor(self, counts: dict[str, int]) -> float | None:
        """A lower bound on the objective of :meth:`with_counts` (``counts``) without solving it: the
        instances' own cost, when every other column costs nothing or more and cannot go below 0
        (min_cost: churn, unmet demand, extra GPUs); None where that does not hold."""
        if self._floor_ok is None:
            fixed = set(self.n.values())
            self._floor_ok = self._sign() > 0 and all(
                c >= 0.0 and self.cols_lb[i] >= 0.0 for i, c in enumerate(self.cost) if i not in fixed)
        if not self._floor_ok:
            return None
        return sum(self.cost[self.n[u]] * c for u, c in counts.items() if u in self.n)

    def mip(self, *, time_limit_s: float, mip_gap: float, max_nodes: int | None,
            start: list[float] | None = None) -> Outcome:
        from hetinfra.solver.mip_hooks import mip_starting

        mip_starting()  # HiGHS holds no GIL while it runs: a caller's waiting Python can start (solver.mip_hooks)
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
        from hetinfra.solver.result import settle_flows

        # no tolerance-sized flow to a unit that does not run; an adapter's key settles on its holders,
        # as the Pyomo path's does (solver.solve.solve_pyomo)
        return settle_flows(self.p, self.counts(values), out, self.holds(values))

    def holds(self, values: list[float]) -> dict[tuple[str, str], int]:
        """(unit, adapter) -> 1 where the unit holds the LoRA adapter (``SolveResult.holds``)."""
        return {key: 1 for key, c in self.x.items() if values[c] > 0.5}  # binary columns

    def unmet(self, values: list[float]) -> dict[tuple[str, str], float]:
        return {k: values[c] for k, c in self.q.items() if values[c] > 1e-9}

    def extra_gpus(self, values: list[float]) -> dict[tuple[str, str, str], float]:
        return {g: values[c] for g, c in self.e.items() if values[c] > 1e-6}

    def scale(self, values: list[float]) -> float | None:
        return values[self.s] if self.s is not None else None

    def objective_of(self, values: list[float]) -> float:
        return sum(c * v for c, v in zip(self.cost, values)) * self._sign()
