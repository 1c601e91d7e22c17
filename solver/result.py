"""What a solve returns (kept apart so ``solver.solve`` and ``solver.decompose`` both use it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hetinfra.solver.problem import AllocationProblem


class SafetyStopped(Exception):
    """The wall-clock safety stop left a step of the solve with no answer (a Lagrangian subproblem,
    a repair, a fixed-count LP): the caller takes another path and reports ``safety_stop``, so a
    plan that the clock changed always says so (``solver.linked``)."""


@dataclass
class SolveResult:
    status: str  # "optimal", "node_limit" (work limit, see gap), "time_limit" (safety stop), "infeasible", "no_solution"
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    build_s: float = 0.0
    solve_s: float = 0.0
    size: dict = field(default_factory=dict)  # variables, integer_variables, constraints
    n: dict[str, int] = field(default_factory=dict)  # unit id -> instances
    flow: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (unit, model, class) -> req/s
    scale: float | None = None  # max_throughput: demand scale s
    extra_gpus: dict[tuple[str, str, str], float] = field(default_factory=dict)  # elastic caps: GPUs over cap
    unmet: dict[tuple[str, str], float] = field(default_factory=dict)  # (model, class) -> req/s unserved
    lp_bound: float | None = None  # optimum of the LP relaxation (integers relaxed)
    warm_start: str | None = None  # where HiGHS's starting solution came from ("running", "rounded LP")
    warm_start_objective: float | None = None  # its objective value
    #: how it was solved: "decomposed" (independent blocks) or "joint" (one model)
    method: str = "joint"
    #: per block of models solved together: models, method, status, objective, bound, gap, nodes, warm_start
    blocks: list[dict] = field(default_factory=list)
    #: the wall-clock limit stopped a solve: the plan may differ on a faster machine
    safety_stop: bool = False
    max_nodes: int | None = None  # the deterministic work limit (branch-and-bound nodes per MIP)
    warnings: list[str] = field(default_factory=list)
    #: multi-period problems (``solver.periods``): per demand level, ``counts`` (unit -> instances
    #: running then) and ``load`` (unit -> instances' worth of capacity its routed req/s take)
    periods: list[dict] = field(default_factory=list)
    #: routing by origin (``hetinfra.plan.origins.fold``): (unit, model, class, origin) -> req/s
    origin_flow: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    #: LoRA adapters (``AllocationProblem.adapters``): (unit, adapter) -> instances of the unit holding it
    holds: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "node_limit", "time_limit")

    def cost(self, problem: AllocationProblem, units: set[str] | None = None) -> float:
        """$/h of the plan; with periods the horizon average (each level's counts by its weight).
        ``units``: only these units' share (a group of models', ``hetinfra.plan.blocks``)."""
        costs = {u.id: u.cost for u in problem.units}

        def total(counts: dict[str, int]) -> float:
            return sum(costs[u] * c for u, c in counts.items() if units is None or u in units)

        if self.periods and problem.periods:
            return sum(per.weight * total(lv["counts"]) for per, lv in zip(problem.periods, self.periods))
        return total(self.n)


#: below this a flow is the solver's feasibility noise, not a routing decision (``solver.solve.TOL``)
FLOW_TOL = 1e-6


def settle_flows(problem: AllocationProblem, n: dict[str, int], flow: dict, holds: dict | None = None) -> dict:
    """The routing a solve extracts, without the flows the solver's feasibility tolerance let through:
    a flow below ``FLOW_TOL`` req/s, or on a unit with no instance (its capacity row, 0 + tolerance,
    admits ~1e-7 x h req/s), is dropped and the key's other flows scaled up to carry it, so each key
    keeps its total and nothing is routed to a unit that does not run. A key left with no flow goes
    whole to the running unit that serves it fastest (for an adapter's key, one that holds it: ``holds``);
    with none, its flows stay as the solver gave them (re-checking then names them). Sliced routing
    (whole slices) is left as it is."""
    if problem.routing == "sliced":
        return flow
    adapter_of_key = {k: a.name for a in problem.adapters for k in a.keys}
    rates = {u.id: u.rates for u in problem.units}
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for (u, m, w), v in flow.items():
        by_key.setdefault((m, w), {})[u] = v
    out: dict = {}
    for key, per in by_key.items():
        total = sum(per.values())
        kept = {u: v for u, v in per.items() if v >= FLOW_TOL and n.get(u, 0) > 0}
        if not kept:
            name = adapter_of_key.get(key)
            takers = sorted((-rates[u].get(key[1], 0.0), u) for u in rates if n.get(u, 0) > 0
                            and rates[u].get(key[1], 0.0) > 0 and (name is None or (u, name) in (holds or {})))
            kept = {takers[0][1]: total} if takers else dict(per)
        scale = total / sum(kept.values())
        out.update({(u, key[0], key[1]): v * scale for u, v in kept.items()})
    return out
