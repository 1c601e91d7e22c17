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
    #: "optimal", "node_limit" (work limit, see gap), "time_limit" (safety stop), "infeasible", "no_solution",
    #: "cut_off" (its LP bound exceeds the objective the caller must beat: solver.cutoff)
    status: str
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
    def leaves_unmet(self) -> bool:
        """Whether the plan leaves any demand unserved (``unmet``, planning.allow_unmet): the one test of the
        baselines' savings, the over-provisioning's wording and the serves-nothing warning."""
        return any(rps > 1e-9 for rps in self.unmet.values())

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


#: below this a flow is the solver's feasibility noise, not a routing decision (``solver.recheck.TOL``)
FLOW_TOL = 1e-6


def settle_flows(problem: AllocationProblem, n: dict[str, int], flow: dict, holds: dict | None = None) -> dict:
    """The routing a solve extracts, without the flows the solver's feasibility tolerance let through:
    a flow below ``FLOW_TOL`` req/s, or on a unit with no instance (its capacity row, 0 + tolerance,
    admits ~1e-7 x h req/s), is dropped and its req/s given to the key's other units, those with the
    most spare capacity first (a unit at its capacity takes none while another has room), so each key
    keeps its total and nothing is routed to a unit that does not run. A key left with no flow goes to
    the running units that serve it (for an adapter's key, those holding it: ``holds``); with none, its
    flows stay as the solver gave them (re-checking then names them). Sliced routing (whole slices) is
    left as it is."""
    if problem.routing == "sliced":
        return flow
    adapter_of_key = {k: a.name for a in problem.adapters for k in a.keys}
    rates = {u.id: u.rates for u in problem.units}
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for (u, m, w), v in flow.items():
        by_key.setdefault((m, w), {})[u] = v
    kept = {key: {u: v for u, v in per.items() if v >= FLOW_TOL and n.get(u, 0) > 0} for key, per in by_key.items()}
    spare = {u: (1.0 - problem.headroom) * c for u, c in n.items()}  # instances' worth of capacity left
    for key, per in kept.items():
        for u, v in per.items():
            spare[u] -= v / rates[u][key[1]]
    out: dict = {}
    for key, per in sorted(by_key.items()):
        mine, left = dict(kept[key]), sum(per.values()) - sum(kept[key].values())
        takers = list(mine) or [u for u in rates if n.get(u, 0) > 0 and rates[u].get(key[1], 0.0) > 0 and
                                (key not in adapter_of_key or (u, adapter_of_key[key]) in (holds or {}))]
        if not takers:
            out.update({(u, key[0], key[1]): v for u, v in per.items()})
            continue
        for u in sorted(takers, key=lambda x: (-spare.get(x, 0.0) * rates[x][key[1]], x)):
            give = min(left, max(0.0, spare.get(u, 0.0)) * rates[u][key[1]])
            mine[u], spare[u], left = mine.get(u, 0.0) + give, spare.get(u, 0.0) - give / rates[u][key[1]], left - give
        if left > 0:  # no room anywhere: the fastest taker carries the rest (tolerance-sized)
            u = min(takers, key=lambda x: (-rates[x][key[1]], x))
            mine[u] = mine.get(u, 0.0) + left
        out.update({(u, key[0], key[1]): v for u, v in mine.items() if v > 0})
    return out
