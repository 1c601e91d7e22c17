"""What the simulator reads of a plan (``hetinfra.sim``): :class:`SimPlan`, parsed from a whole
plan.json or from verification's lighter view of a round's solution
(``hetinfra.plan.plan_json.simulation_view``). Its sections are plan.json's own models; the keys
the simulator does not read are ignored, so both parse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, PrivateAttr, StrictInt, StrictStr, model_validator

from hetinfra.document.adapters import UnitAdapters
from hetinfra.document.allocation import Disaggregation, OriginRouting, Origins, Routing, Stage, routes_to_missing
from hetinfra.document.base import Doc, Number, PlanVersion
from hetinfra.document.sections import ModelEntry, PlanDeploy, Template, demand_multiple

#: fields of an allocation a unit's simulation depends on (its name, price or failover do not change
#: its requests: hetinfra.sim.plan_sim's memo keys are made of exactly these)
SIMULATED = ("unit", "template", "model", "gpu", "tp", "pp", "engines_per_instance", "nodes_per_replica",
             "layer_partition", "stages", "count", "variant", "gpu_memory_gb", "disaggregation", "adapters")


class SimUnit(Doc):
    """An allocation as the simulator and the trim read it (plan.json ``allocations[]``)."""

    model_config = ConfigDict(extra="ignore")

    unit: StrictStr
    template: StrictStr
    model: StrictStr
    region: StrictStr
    gpu: StrictStr
    tp: StrictInt
    pp: StrictInt
    engines_per_instance: StrictInt = 1
    nodes_per_replica: Optional[StrictInt] = None
    layer_partition: Optional[list[StrictInt]] = None
    stages: Optional[list[Stage]] = None
    count: StrictInt
    variant: Optional[StrictStr] = None
    gpu_memory_gb: Optional[Number] = None
    custom_gpu: bool = False  # a GPU outside the catalog the simulator may read (hetinfra.catalog.custom)
    disaggregation: Optional[Disaggregation] = None  # a prefill/decode bundle: two pools (hetinfra.sim.split)
    adapters: Optional[UnitAdapters] = None  # LoRA: engines with slots, requests naming adapters (hetinfra.sim.lora)

    def key(self) -> dict:
        """The fields in :data:`SIMULATED`, as plan.json writes them."""
        return self.model_dump(mode="json", include=set(SIMULATED))


class SimPlan(Doc):
    """The sections of a plan the simulator reads (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    plan_version: PlanVersion
    service: Optional[StrictStr] = None
    objective: Literal["min_cost", "max_throughput"] = "min_cost"
    demand_scale: Optional[Number] = None
    allocations: list[SimUnit]
    routing: Routing
    models: list[ModelEntry]
    templates: list[Template] = Field(default_factory=list)
    deploy: PlanDeploy = Field(default_factory=PlanDeploy)
    origins: Optional[Origins] = None
    routing_by_origin: Optional[OriginRouting] = None
    spec_path: Optional[StrictStr] = None  # plan.json inputs.spec_path (SimPlan.of fills it)
    #: the simulator's memo keys of this plan but their seed, by model and workload (hetinfra.sim.
    #: plan_sim._memo_keys): not a field, and not copied by model_copy (a copy may differ)
    _memo_keys: dict = PrivateAttr(default_factory=dict)

    @property
    def memo_keys(self) -> dict:
        return self._memo_keys

    def model_copy(self, *, update: dict | None = None, deep: bool = False) -> "SimPlan":
        """A copy with its own (empty) memo keys: pydantic shares the private dict with a shallow copy."""
        copied = super().model_copy(update=update, deep=deep)
        copied._memo_keys = {}
        return copied

    @classmethod
    def of(cls, plan: Any, where: str = "plan") -> "SimPlan":
        """``plan`` (plan.json's dict, a simulation view, a Plan or a SimPlan) as a SimPlan;
        InvalidInputError (exit 2) naming ``where`` and the first wrong field otherwise."""
        from hetinfra.document.load import parse_document
        from hetinfra.document.plan import Plan

        if isinstance(plan, cls):
            return plan
        if isinstance(plan, Plan):
            plan = plan.to_dict()
        if isinstance(plan, dict) and isinstance(plan.get("inputs"), dict):
            plan = {**plan, "spec_path": plan["inputs"].get("spec_path")}
        return parse_document(cls, plan, where, hint="plan.json is written by `hetinfra plan`; re-plan instead")

    @model_validator(mode="after")
    def _routes_to_allocations(self) -> "SimPlan":
        if missing := routes_to_missing({a.unit for a in self.allocations}, self.routing, self.routing_by_origin):
            raise ValueError(missing[0])
        return self

    def model_entry(self, name: str) -> ModelEntry:
        return next(m for m in self.models if m.name == name)

    def scale(self) -> float:
        """The demand the plan serves, as a multiple of the declared (sections.demand_multiple)."""
        return demand_multiple(self.objective, self.demand_scale)


class TrimUnit(Doc):
    """An allocation as the trim judges it (``hetinfra.sim.minimal``): which unit, how many replicas
    at what price, and whether it is a committed replica of a demand profile."""

    model_config = ConfigDict(extra="ignore")

    unit: StrictStr
    count: StrictInt
    cost_usd_per_hour: Optional[Number] = None
    purchase: Optional[StrictStr] = None
    counts_by_period: Optional[list[StrictInt]] = None

    def replica_price(self) -> float:
        return float(self.cost_usd_per_hour or 0.0) / max(self.count, 1)


class TrimPlan(Doc):
    """The allocations of a plan.json, or of one of the trim's copies of it, as the trim reads them."""

    model_config = ConfigDict(extra="ignore")

    allocations: list[TrimUnit]

    def peak_judges(self, unit: TrimUnit) -> bool:
        """Whether a simulation at the peak demand can judge removing a replica of ``unit``: always,
        but for a committed unit of a plan with a demand profile (a top-up's replicas per period)."""
        profiled = any(a.counts_by_period for a in self.allocations)
        return not (profiled and str(unit.purchase or "").startswith("committed"))


@dataclass(frozen=True, slots=True)
class RunObjective:
    """A model's objective as a simulation result states it (simulation.json ``models[].slo``)."""

    ttft_ms: float
    tpot_ms: float
    percentile: str
    attainment: float | None

    @classmethod
    def of(cls, slo: dict) -> "RunObjective":
        return cls(slo["ttft_ms"], slo["tpot_ms"], slo["percentile"], slo.get("attainment"))

    def limit(self, stat: str) -> float:
        """The objective of ``stat`` (``ttft_ms`` or ``tpot_ms``)."""
        return self.ttft_ms if stat == "ttft_ms" else self.tpot_ms


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One replication's entry of a model or a unit in a simulation result (simulation.json
    ``models[]`` or ``units[]``: hetinfra.sim.plan_sim), typed as the judgement over replications
    (hetinfra.sim.replications.judge) reads it. A plain slotted dataclass, not a pydantic model:
    a 32-model fleet's verification reads hundreds of thousands of these, and the simulator made
    and checked each. ``raw`` is the entry itself (the judgement's entries start from it)."""

    raw: dict
    model: str
    unit: str | None
    count: int | None
    ttft_ms: dict
    tpot_ms: dict
    met: bool
    ratio: float | None
    attainment: float | None
    stable: bool
    stability: dict | None
    slo: RunObjective | None
    offered_rps: float | None = None  # a model's
    requests: int | None = None  # a model's: requests drawn, warm-up and unrouted included
    unrouted: int = 0  # a model's: requests of demand the plan leaves unserved (unmet_rps), not simulated

    @classmethod
    def of(cls, entry: dict, slo: RunObjective | None = None) -> "RunEntry":
        """``entry`` typed; ``slo``: its model's objective where the entry states none (a unit's)."""
        objective, record = entry["objective"], entry.get("stability")
        stable = entry.get("stable", True) if record is None else record.get("stable", True)
        own = entry.get("slo")
        return cls(entry, entry["model"], entry.get("unit"), entry.get("count"), entry["ttft_ms"], entry["tpot_ms"],
                   entry.get("met", objective["met"]), objective.get("ratio"), objective.get("attainment"), stable,
                   record, RunObjective.of(own) if own is not None else slo, entry.get("offered_rps"),
                   entry.get("requests"), entry.get("unrouted") or 0)

    def statistic(self, stat: str) -> float | None:
        """``stat`` (``ttft_ms``, ``tpot_ms``) at its objective's percentile (p99 without one)."""
        block = self.ttft_ms if stat == "ttft_ms" else self.tpot_ms
        return block[self.slo.percentile if self.slo is not None else "p99"]

    def median(self, stat: str) -> float | None:
        return (self.ttft_ms if stat == "ttft_ms" else self.tpot_ms).get("p50")


@dataclass(frozen=True, slots=True)
class SimRun:
    """One simulation result (one replication), typed for the judgement: its seed, its models'
    entries and its units' (each unit with its model's objective), and the result itself."""

    raw: dict
    seed: int | None
    warmup_fraction: float
    models: list[RunEntry]
    units: list[RunEntry]

    @classmethod
    def of(cls, sim: dict) -> "SimRun":
        models = [RunEntry.of(m) for m in sim["models"]]
        slo = {m.model: m.slo for m in models}
        return cls(sim, sim.get("seed"), sim.get("warmup_fraction", 0.1), models,
                   [RunEntry.of(u, slo.get(u["model"])) for u in sim["units"]])


@dataclass(frozen=True, slots=True)
class JudgedModel:
    """A model's entry of a judgement over replications (hetinfra.sim.replications.judge), as the
    simulate table shows it: the pessimistic bound (at ``confidence``) of its objective's percentile
    of TTFT and TPOT and of its attainment, the ``ratio`` and ``decision`` they give, and the
    worst replication, whose figures the entry shows: its seed and its own verdict (``worst_met``,
    ``worst_ratio``, ``worst_attainment``)."""

    percentile: str
    confidence: float
    bound_ttft_ms: float | None
    bound_tpot_ms: float | None
    bound_attainment: float | None
    ratio: float | None
    decision: str
    replications: int
    worst_seed: int | None
    worst_met: bool
    worst_ratio: float | None
    worst_attainment: float | None

    @classmethod
    def of(cls, entry: dict) -> "JudgedModel | None":
        """None for an entry of one simulation (no bound, or no replication recorded)."""
        bound, runs = entry.get("bound"), entry.get("per_replication") or []
        if bound is None or not runs:
            return None
        worst = max(runs, key=lambda r: r.get("ratio") or 0.0)
        objective = entry["objective"]
        return cls(entry["slo"]["percentile"], objective.get("confidence", 0.95), bound.get("ttft_ms"),
                   bound.get("tpot_ms"), bound.get("attainment"), objective["ratio"], entry["decision"],
                   entry["replications"], worst.get("seed"), bool(worst.get("met")), worst.get("ratio"), worst.get("attainment"))
