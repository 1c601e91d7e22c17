"""plan.json, the typed document: :class:`Plan` is the one place for its keys, types, defaults and
invariants. ``hetinfra.plan.plan_json.build_plan_json`` writes it; every stage after the planner reads
it through :func:`load_plan` (or :meth:`Plan.parse` for a document in memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, StrictStr, ValidationInfo, field_validator, model_validator

from hetinfra.document.adapters import AdapterCandidates
from hetinfra.document.allocation import Allocation, OriginRouting, Origins, Routing, plan_route_problems
from hetinfra.document.base import IDENT, Doc, Number, PlanVersion, int_in, shell_safety_error
from hetinfra.document.sections import (Baseline, Breakdown, Churn, Fidelity, Inputs, ModelEntry, PlanDeploy,
                                             Purchase, Solver, Template, WorkBudget)
from hetinfra.facts import is_dns_label

#: how a reader dumps the model back to plan.json's dict (absent optional keys stay absent)
DUMP = {"mode": "json", "by_alias": True, "exclude_unset": True}


class Plan(Doc):
    """plan.json: a verified, minimal plan of one service (``plan_version`` 1; new keys may be added
    within a version, so a reader of an older hetinfra refuses a newer plan rather than misread it)."""

    plan_version: PlanVersion = Field(description="Version of this format: bumped only for incompatible changes.")
    hetinfra_version: StrictStr = Field(description="The hetinfra that made the plan.")
    service: StrictStr = Field(description="Service name (a DNS label): names stacks, services and the gateway.")
    service_id: Optional[StrictStr] = Field(None, description="``<service>-<10 hex>`` of the spec file's path: apply "
                                                              "refuses another service's plan over state.json's.")
    objective: Literal["min_cost", "max_throughput"] = Field(description="The planning objective.")
    status: StrictStr = Field(description="Solver status of the plan.")
    cost_usd_per_hour: Optional[Number] = Field(description="$/h of the plan (horizon average with a demand profile).")
    demand_scale: Optional[Number] = Field(description="Fraction of the declared demand served (max_throughput; 1.0 "
                                                       "under min_cost).")
    budget_usd_per_hour: Optional[Number] = Field(description="The spec's budget; null: none.")
    gpus: int_in(0, None) = Field(description="GPUs of the plan.")
    allocations: list[Allocation] = Field(description="The deployment units: what runs where (empty: a plan that "
                                                      "leaves all demand unmet, planning.allow_unmet).")
    routing: Routing = Field(description="model -> request class -> the solver units that serve it, with shares.")
    origins: Optional[Origins] = Field(None, description="Where each model's traffic comes from and where it may be "
                                                         "served; only where a model declares demand.origins "
                                                         "(docs/regions.md).")
    routing_by_origin: Optional[OriginRouting] = Field(None, description="routing per (origin, class); only where a "
                                                                         "model declares demand.origins.")
    unmet_rps: dict[str, Number] = Field(description="Requests/s left unserved per 'model/class' (where allowed).")
    purchase: Optional[Purchase] = Field(None, description="The committed base and top-ups; absent in plans that "
                                                           "plan no purchases.")
    breakdown: Breakdown = Field(description="Cost, GPUs and instances per model and per region.")
    churn: Optional[Churn] = Field(description="What re-planning against a running deployment changes; null: no "
                                               "running deployment.")
    models: list[ModelEntry] = Field(min_length=1, description="The models served.")
    templates: list[Template] = Field(description="The serving templates the allocations use (empty: no "
                                                  "allocations).")
    baselines: list[Baseline] = Field(description="Single-GPU-type baseline plans (empty with --no-baselines).")
    solver: Solver = Field(description="How the solve went.")
    inputs: Inputs = Field(description="What the plan was made from.")
    deploy: PlanDeploy = Field(default_factory=PlanDeploy, description="How to deploy the plan (the spec's deploy "
                                                                       "section).")
    warnings: list[str] = Field(description="What the user should know about the plan.")
    fidelity: Optional[Fidelity] = Field(None, description="How simulation checked the latency objectives.")
    work_budget: Optional[WorkBudget] = Field(None, description="What the work budget's wall-clock safety stop "
                                                                "(planning.time_limit_s) cut; absent: nothing.")
    adapter_candidates: Optional[AdapterCandidates] = Field(
        None, description="LoRA adapters: the placements verified or priced (placed, every adapter everywhere), "
                          "their costs, which was kept and why (hetinfra.plan.held_everywhere); absent without.")

    @model_validator(mode="before")
    @classmethod
    def _shell_safe(cls, data: Any) -> Any:
        """No string apply turns into a script, a command or a name may carry shell syntax."""
        if isinstance(data, dict) and (why := shell_safety_error(data)):
            raise ValueError(why)
        return data

    @field_validator("service")
    @classmethod
    def _service(cls, v: str) -> str:
        if not is_dns_label(v, letter_first=True):
            raise ValueError(f"{v!r} is not a service name (lowercase letters, digits, '-')")
        return v

    @field_validator("service_id")
    @classmethod
    def _service_id(cls, v: str | None) -> str | None:
        if v is not None and not IDENT.match(v):
            raise ValueError(f"{v!r} is not a service id")
        return v

    @model_validator(mode="after")
    def _references(self) -> "Plan":
        names = [m.name for m in self.models]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"models list {', '.join(twice)} more than once (a reader would take the first alone)")
        for i, a in enumerate(self.allocations):
            if a.model not in names:
                raise ValueError(f"allocations[{i}].model {a.model!r} is not among the plan's models "
                                 f"({', '.join(names)})")
        units = [a.deployment_unit for a in self.allocations]
        dup = sorted({u for u in units if units.count(u) > 1})
        if dup:
            raise ValueError(f"allocations repeat deployment unit(s) {', '.join(dup)}")
        if wrong := plan_route_problems(self.allocations, self.routing, self.routing_by_origin):
            raise ValueError(wrong[0])  # another model's units: the gateway would send requests there
        self._variants_listed()
        return self

    @model_validator(mode="after")
    def _whole(self, info: ValidationInfo) -> "Plan":
        """The checks across sections every reader relies on (hetinfra.document.consistency)."""
        from hetinfra.document.consistency import plan_problems
        from hetinfra.document.load import HintedValueError

        if wrong := plan_problems(self, cloud_copy=bool((info.context or {}).get("cloud_copy"))):
            raise HintedValueError(wrong[0], getattr(wrong[0], "hint", None))
        return self

    @classmethod
    def parse(cls, doc: Any, path: Path | str = "plan.json", *, cloud_copy: bool = False) -> "Plan":
        """The model of ``doc`` (plan.json's dict); InvalidInputError (exit 2) naming ``path`` and the
        first wrong field otherwise. ``cloud_copy``: ``doc`` is a cloud's Pulumi project copy, whose
        allocations are that cloud's and whose routes every cloud's (hetinfra.document.consistency)."""
        from hetinfra.document.load import parse_document

        return parse_document(cls, doc, path, hint="plan.json is written by `hetinfra plan`; re-plan instead of "
                                                   "editing it", context={"cloud_copy": cloud_copy})

    def to_dict(self) -> dict:
        """plan.json's dict again: ``Plan.parse(doc).to_dict() == doc`` for every plan hetinfra writes."""
        return self.model_dump(**DUMP)

    def model(self, name: str) -> ModelEntry:
        """The model entry named ``name`` (allocations[].model)."""
        return next(m for m in self.models if m.name == name)

    def scale(self) -> float:
        """The demand the plan serves, as a multiple of the declared (sections.demand_multiple)."""
        from hetinfra.document.sections import demand_multiple

        return demand_multiple(self.objective, self.demand_scale)

    def unmet_by_model(self) -> dict[str, tuple[float, float]]:
        """Per model with demand left unserved (``unmet_rps``, keys "model/class"; planning.allow_unmet):
        (req/s left unserved, req/s it declares at the plan's scale)."""
        out = {}
        for m in self.models:
            unmet = sum(rps for key, rps in self.unmet_rps.items() if key.startswith(m.name + "/"))
            if unmet > 1e-9 and m.rate_rps > 0:  # a class name may hold "/": keys are matched by model prefix
                out[m.name] = (float(unmet), float(m.rate_rps) * self.scale())
        return out

    def unserved_models(self) -> set[str]:
        """The models whose whole demand the plan leaves unserved (:meth:`unmet_by_model`)."""
        return {m for m, (unmet, declared) in self.unmet_by_model().items() if unmet >= declared * (1 - 1e-6)}

    def _variants_listed(self) -> None:
        """Each allocation's variant is one its model lists (the checkpoint its engines load)."""
        for i, a in enumerate(self.allocations):
            listed = [v.name for v in self.model(a.model).variants or ()]
            if a.variant and a.variant not in listed:
                raise ValueError(f"allocations[{i}].variant {a.variant!r} is not among model {a.model}'s variants "
                                 f"({', '.join(listed) or 'none'})")

    def max_model_len(self, alloc: Allocation) -> int:
        """vLLM --max-model-len of ``alloc``'s engines: the unit's own, else (plans written before
        per-unit lengths) its model's."""
        return alloc.max_model_len or self.model(alloc.model).max_model_len

    @model_validator(mode="after")
    def _engines_start(self) -> "Plan":
        """Every unit's engine starts and takes the classes routed to it (hetinfra.document.engines)."""
        from hetinfra.document.engines import length_problems

        if problems := length_problems(self.models, self.allocations, self.routing):
            raise ValueError(f"allocations: {problems[0]}")
        return self


#: the hint of a running plan (or state) that cannot be read: --state names the deployment's out dir
RUNNING_HINT = "pass the --out directory of the plan that is running"


def load_plan(path: Path | str, *, cloud_copy: bool = False, hint: str = "run `hetinfra plan SPEC --out DIR` first") -> Plan:
    """Read and parse plan.json (a file, or an out dir holding one): the one way a stage reads a plan,
    with every check of :class:`Plan` (``cloud_copy``: see :meth:`Plan.parse`). Missing, unreadable,
    not JSON or not a plan: InvalidInputError (exit 2) naming the file and field, with ``hint``
    (:data:`RUNNING_HINT` where the plan is the running one a re-plan starts from)."""
    from hetinfra.document.load import read_json

    p = Path(path)
    if p.is_dir() or (not p.exists() and p.suffix != ".json"):  # an out dir (perhaps a missing one)
        p = p / "plan.json"
    return Plan.parse(read_json(p, what="plan", hint=hint), p, cloud_copy=cloud_copy)
