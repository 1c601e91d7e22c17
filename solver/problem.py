"""The allocation problem as plain data: what ``build_model`` turns into a Pyomo model.

Kept free of Pyomo so it can be built, inspected and tested without a solver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class UnitData:
    """One deployable unit u (template x region x purchase option)."""

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


@dataclass(frozen=True)
class AllocationProblem:
    """Sets, parameters and settings of the allocation ILP (see ``solver.model`` for the math)."""

    units: tuple[UnitData, ...]
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
    #: unit id -> instances running now; new ones pay churn_hours x cost once (amortized per hour of the plan).
    running: dict[str, int] = field(default_factory=dict)
    churn_hours: float = 0.0
    #: None: all demand must be served; else $/h per req/s unserved.
    unmet_penalty: float | None = None

    def pairs(self) -> list[tuple[str, tuple[str, str]]]:
        """(unit id, demand key) pairs where the unit serves that model's class."""
        return [(u.id, (u.model, w)) for u in self.units for w in u.rates if (u.model, w) in self.demand]

    def unserved(self) -> list[tuple[str, str]]:
        """Demand keys no unit can serve (the ILP would be trivially infeasible)."""
        served = {k for _, k in self.pairs()}
        return [k for k in sorted(self.demand) if k not in served]

    def replace(self, **changes) -> "AllocationProblem":
        return dataclasses.replace(self, **changes)

