"""The allocation problem as plain data: what ``build_model`` turns into a Pyomo model.

Kept free of Pyomo so it can be built, inspected and tested without a solver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class SolverUnit:
    """The solver's unit u: a template unit (plan.library.TemplateUnit: template x region x purchase
    option) as plain data for the ILP, one integer variable n[u]."""

    id: str
    model: str
    cost: float  # $/h per instance
    gpus: int  # GPUs per instance (all nodes of a pipeline replica)
    #: ((cloud, region, gpu), GPUs) per availability group one instance counts under; a mixed-GPU
    #: pipeline counts under several.
    gpu_use: tuple[tuple[tuple[str, str, str], int], ...]
    rates: dict[str, float]  # class name -> h[u, w], req/s one instance sustains
    region: str = ""  # for locality
    spot: bool = False
    #: a committed purchase (1- or 3-year term): paid every hour; one count for all periods (``solver.periods``)
    committed: bool = False
    #: LoRA adapter slots of one instance (vLLM --max-loras; ``solver.rows.add_adapter_slots``); 0: no adapters
    slots: int = 0
    #: rank of each slot (vLLM --max-lora-rank): it holds adapters of this rank or below (``AdapterHold.rank``)
    lora_rank: int = 0


@dataclass(frozen=True)
class Period:
    """One demand level of a multi-period problem (``solver.periods``): the share of the horizon's
    hours it stands for, each model's demand multiplier in it, and which of the profile's periods
    (0-based) have this level."""

    weight: float
    scale: tuple[tuple[str, float], ...]  # (model, multiplier), models without one at 1.0
    hours: tuple[int, ...] = ()

    def multiplier(self, model: str) -> float:
        return dict(self.scale).get(model, 1.0)


@dataclass(frozen=True)
class AdapterHold:
    """One LoRA adapter to place (``solver.rows.add_adapter_*``): its model, the demand keys that carry
    its requests (routed only to instances holding it), the regions whose units may hold it (residency;
    empty: any) and, per area (a tuple of regions; empty: anywhere), the fewest instances holding it there."""

    name: str
    model: str
    keys: tuple[tuple[str, str], ...]
    regions: tuple[str, ...] = ()
    cover: tuple[tuple[tuple[str, ...], int], ...] = (((), 1),)
    #: the slot rank it needs (vLLM --max-lora-rank at or above its own rank); 0: any slot
    rank: int = 0
    #: units holding it in the running plan (re-planning with --state): holding it elsewhere, on a unit
    #: that runs, restarts that unit's engines (``solver.adapter_check.adapter_move_costs``)
    held_now: tuple[str, ...] = ()

    def may_hold(self, unit: SolverUnit) -> bool:
        return (unit.model == self.model and unit.slots > 0 and (not self.regions or unit.region in self.regions)
                and unit.lora_rank >= self.rank)


@dataclass(frozen=True)
class AllocationProblem:
    """Sets, parameters and settings of the allocation ILP (see ``solver.model`` for the math)."""

    units: tuple[SolverUnit, ...]
    demand: dict[tuple[str, str], float]  # (model, class) -> lambda, req/s
    caps: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (cloud, region, gpu) -> max GPUs
    budget: float | None = None
    headroom: float = 0.0
    objective: Literal["min_cost", "max_throughput"] = "min_cost"
    routing: Literal["fractional", "sliced"] = "fractional"
    slice_factor: int = 8
    #: Diagnosis mode: caps may be exceeded by slack GPUs e[g]; the objective minimizes their sum.
    elastic_caps: bool = False
    #: model -> most fraction of its GPUs on spot units.
    max_spot_fraction: dict[str, float] = field(default_factory=dict)
    #: (model, region) -> req/s originating there; with locality > 0 that region's units serve >= locality x it.
    local_demand: dict[tuple[str, str], float] = field(default_factory=dict)
    locality: float = 0.0
    #: unit id -> instances running now; new ones pay churn_hours x cost in the hourly objective: the spec's
    #: churn_penalty_hours of one-off start-up cost / churn_payback_hours (hetinfra.plan.planner)
    running: dict[str, int] = field(default_factory=dict)
    churn_hours: float = 0.0
    #: None: all demand must be served; else $/h per req/s unserved.
    unmet_penalty: float | None = None
    #: Demand levels over time (SageServe's windows); empty: one period at the declared demand. With
    #: levels, ``solve`` plans a committed base for all of them and a top-up per level (``solver.periods``).
    periods: tuple[Period, ...] = ()
    #: Groups of units whose instance counts are equal: one committed base counted in every period.
    tied: tuple[tuple[str, ...], ...] = ()
    #: Pairs (u, v) with n[u] <= n[v]: a top-up only grows with its model's demand (``solver.periods``).
    nested: tuple[tuple[str, str], ...] = ()
    #: Routing by origin (``hetinfra.plan.origins``): demand key (model, flow) -> (class, origin) for
    #: the keys that carry one origin's share of a class; empty: every key is a whole class.
    flow_keys: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    #: Routing by origin: (unit id, demand key) -> the round trip (ms) from the key's origin to the
    #: unit's region, where it is not 0; each req/s of such a flow costs NETWORK_TIE $/h x ms in the
    #: objective (``solver.rows.add_objective``): of plans of equal cost, clients travel least
    network_ms: dict[tuple[str, tuple[str, str]], float] = field(default_factory=dict)
    #: ``planning.solver``: "highs" (the direct path, ``solver.direct``) or a Pyomo solver's name
    #: (``solver.backends``), which solves the Pyomo model of the same rows
    solver: str = "highs"
    #: LoRA adapters placed on units with slots (``AdapterHold``); empty: no adapter rows
    adapters: tuple[AdapterHold, ...] = ()
    #: Groups of (unit id, adapter) holds that are one decision: a unit's period copies hold the same
    #: adapters, as the deployed unit does in every period (``solver.periods``, ``add_adapter_tied``)
    tied_holds: tuple[tuple[tuple[str, str], ...], ...] = ()

    def pairs(self) -> list[tuple[str, tuple[str, str]]]:
        """(unit id, demand key) pairs where the unit serves that model's class."""
        return [(u.id, (u.model, w)) for u in self.units for w in u.rates if (u.model, w) in self.demand]

    def unserved(self) -> list[tuple[str, str]]:
        """Demand keys no unit can serve (the ILP would be trivially infeasible)."""
        served = {k for _, k in self.pairs()}
        return [k for k in sorted(self.demand) if k not in served]

    def replace(self, **changes) -> "AllocationProblem":
        """This problem with ``changes``; new ``units`` keep only their own ``network_ms`` entries (a
        block's or a model's subproblem carried the whole fleet's, which grew its memo keys and missed
        the memo whenever another model's units changed)."""
        if "units" in changes and "network_ms" not in changes and self.network_ms:
            ids = {u.id for u in changes["units"]}
            changes["network_ms"] = {k: ms for k, ms in self.network_ms.items() if k[0] in ids}
        return dataclasses.replace(self, **changes)


def tied_bounds(p: AllocationProblem, ub: dict[str, int]) -> dict[str, int]:
    """Instance upper bounds ``ub`` with every tied group raised to its largest member's: a committed
    base sized for the peak period is also the count of its copies in quieter periods."""
    out = dict(ub)
    for group in p.tied:
        top = max(out.get(u, 0) for u in group)
        out.update({u: top for u in group if u in out})
    return out

