"""``planning.solver``: any MIP solver Pyomo can drive, on the Pyomo model of ``solver.rows``.

``highs`` (the default) never comes here: it is the fast direct path (``solver.direct``). Any other
name goes to ``pyomo.environ.SolverFactory(name)``: gurobi, cplex, cbc, scip, glpk, xpress, their
``*_direct``/``*_persistent`` variants, or any AMPL solver executable on PATH. The time limit and the
relative gap are passed under each solver's own option names where we know them (``LIMITS``); other
solvers run to their own defaults. ``cbc`` without a ``cbc`` on PATH uses the binary bundled in
PuLP's wheel (``pip install pulp``). A solver that is not available is an input error (exit 2).

The answer comes back through :class:`Result`, which reads like Pyomo's contrib results
(``solution_status``, ``termination_condition``, ``objective_bound``, ``solution_loader``), so
``solver.solve.solve_pyomo`` handles every solver alike.
"""

from __future__ import annotations

import logging
import math
import os
import shutil

from hetinfra.errors import InvalidInputError

#: option names for (time limit s, relative MIP gap) per solver family
LIMITS = {
    "cbc": ("sec", "ratio"),
    "glpk": ("tmlim", "mipgap"),
    "gurobi": ("TimeLimit", "MIPGap"),
    "cplex": ("timelimit", "mipgap"),
    "scip": ("limits/time", "limits/gap"),
    "xpress": ("maxtime", "miprelstop"),
}


def bundled_cbc() -> str | None:
    """PuLP's bundled CBC binary, when PuLP is installed and ships one for this platform."""
    try:
        from pulp.apis.coin_api import PULP_CBC_CMD
    except ImportError:
        return None
    path = os.path.normpath(PULP_CBC_CMD.pulp_cbc_path)  # a class attribute: no deprecation warning
    return path if os.access(path, os.X_OK) else None


def pyomo_solver(name: str):
    """The available Pyomo solver ``name``; an input error naming planning.solver otherwise."""
    from pyomo.environ import SolverFactory  # pyomo.environ registers the solver plugins

    kwargs = {}
    if name == "cbc" and shutil.which("cbc") is None and bundled_cbc():
        kwargs["executable"] = bundled_cbc()
    quiet = logging.getLogger("pyomo")  # an unknown name logs a traceback before it says unavailable
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        opt = SolverFactory(name, **kwargs)
        ok = opt is not None and opt.available(exception_flag=False) and opt.license_is_valid()
    except Exception:  # noqa: BLE001 -- a plugin that cannot even start is just as unavailable
        ok = False
    finally:
        quiet.setLevel(level)
    if not ok:
        raise InvalidInputError(
            f"planning.solver: {name!r} is not available to Pyomo (not installed, not on PATH, or no licence)",
            hint="install it (cbc: pip install pulp, or a cbc on PATH) or use planning.solver: highs (the default)")
    return opt


def solver_limits(name: str, time_limit_s: float, mip_gap: float) -> dict:
    family = next((f for f in LIMITS if name.startswith(f) or name.startswith(f"appsi_{f}")), None)
    if family is None:
        return {}
    t, g = LIMITS[family]
    return {t: int(math.ceil(time_limit_s)) if family == "glpk" else float(time_limit_s), g: float(mip_gap)}


def run_pyomo(m, name: str, time_limit_s: float, mip_gap: float) -> "Result":
    """Solve the Pyomo model ``m`` with solver ``name`` (loading nothing yet)."""
    from hetinfra.solver.highs_quiet import FD_CAPTURE

    opt = pyomo_solver(name)
    with FD_CAPTURE:  # Pyomo's solvers capture the process's output descriptors: one solve at a time
        results = opt.solve(m, load_solutions=False, tee=False, options=solver_limits(name, time_limit_s, mip_gap))
    return Result(m, results)


class _Loader:
    def __init__(self, m, results):
        self.m, self.results = m, results

    def load_vars(self) -> None:
        self.m.solutions.load_from(self.results)


class Result:
    """A legacy Pyomo result read like a contrib one (the parts ``solve_pyomo`` uses)."""

    def __init__(self, m, results):
        from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
        from pyomo.opt import TerminationCondition as TC

        tc = results.solver.termination_condition
        self.termination_condition = {
            TC.optimal: TerminationCondition.convergenceCriteriaSatisfied,
            TC.maxTimeLimit: TerminationCondition.maxTimeLimit,
            TC.infeasible: TerminationCondition.provenInfeasible,
            TC.infeasibleOrUnbounded: TerminationCondition.infeasibleOrUnbounded,
            TC.unbounded: TerminationCondition.unbounded,
        }.get(tc, TerminationCondition.unknown)
        has = len(results.solution) > 0 and tc not in (TC.infeasible, TC.infeasibleOrUnbounded)
        self.solution_status = (SolutionStatus.optimal if has and tc == TC.optimal else
                                SolutionStatus.feasible if has else SolutionStatus.noSolution)
        self.solution_loader = _Loader(m, results)
        sense_min = next(iter(m.component_data_objects(_objective_type(), active=True))).is_minimizing()
        bound = results.problem.lower_bound if sense_min else results.problem.upper_bound
        self.objective_bound = float(bound) if bound is not None and math.isfinite(float(bound)) else None
        incumbent = results.problem.upper_bound if sense_min else results.problem.lower_bound
        self.incumbent_objective = float(incumbent) if incumbent is not None and math.isfinite(float(incumbent)) else None


def _objective_type():
    from pyomo.environ import Objective

    return Objective
