"""state.json as a typed document: :class:`State` is the one place for its keys, types and defaults
(the format is described in hetinfra.deploy.state, whose DeployState is its one writer: a method for
each thing apply, destroy, status and replan do to it). Reading it goes
through :func:`parse_state`: ``[]``, ``null`` or a wrong type is a 1-2 line InvalidInputError (exit 2)
naming the file and the field, in every command that reads it (status, apply, destroy, replan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator
from typing_extensions import Annotated

from hetinfra.document.allocation import Allocation
from hetinfra.document.base import MAX_GPUS, MAX_PRICE_USD_PER_HOUR, Doc
from hetinfra.spec.base import word_problem

STATE_VERSION = 1
HINT = "state.json is written by `hetinfra apply`; restore it from a backup, or move it away to start afresh"


class RunningAllocation(Allocation):
    """A plan allocation that runs now, and the path that deployed it."""

    path: Literal["pulumi", "skypilot", "kubernetes"] = Field(description="The deploy path that runs it.")

    @classmethod
    def of(cls, alloc: Allocation, path: str) -> "RunningAllocation":
        """``alloc`` (a plan allocation) as it runs through ``path``."""
        return alloc if isinstance(alloc, cls) and alloc.path == path else cls.model_validate(
            {**alloc.to_dict(), "path": path})


class PulumiStack(Doc):
    """The last ``pulumi up`` of one cloud's project."""

    model_config = ConfigDict(extra="allow")

    stack: StrictStr = Field(description="The Pulumi stack name (deploy.stack when applied).")
    outputs: dict[str, Any] = Field({}, description="The stack's exports (endpoints, units, gateways, images).")


class SkyService(Doc):
    """A SkyServe service that runs one deployment unit."""

    service: StrictStr = Field(description="The SkyServe service name (the deployment unit).")
    endpoint: Optional[StrictStr] = Field(description="Its endpoint, once SkyServe reported one.")


class KubeCluster(Doc):
    """One Kubernetes cluster of the ``kubernetes`` Pulumi stack (its ``clusters`` output; deploy.target
    kubernetes: hetinfra.deploy.kube), where status and replan read the live replicas."""

    model_config = ConfigDict(extra="allow")

    context: Optional[StrictStr] = Field(None, description="The kubeconfig context of the cluster.")
    kubeconfig: Optional[StrictStr] = Field(None, description="The kubeconfig file.")
    namespace: Optional[StrictStr] = Field(None, description="The service's namespace.")
    objects: list[Any] = Field([], description="Only in state.json files of hetinfra versions that applied the "
                                               "objects without Pulumi: (apiVersion, kind, namespace, name) each.")


class Step(Doc):
    id: StrictStr = Field(description="The step ('pulumi:<cloud>', 'skypilot:up:<unit>', ...).")
    status: Literal["pending", "running", "done", "failed"] = Field(description="How far it got.")
    error: Optional[StrictStr] = Field(description="Why it failed.")


class Operation(Doc):
    """The last apply or destroy: its steps, so a failed or interrupted one resumes where it stopped."""

    kind: Literal["apply", "destroy"] = Field(description="Which operation.")
    plan_sha256: Optional[StrictStr] = Field(description="Hash of the plan it applies.")
    status: Literal["running", "done", "failed"] = Field(description="Its status.")
    started_at: StrictStr = Field(description="UTC start time.")
    finished_at: Optional[StrictStr] = Field(description="UTC end time.")
    error: Optional[StrictStr] = Field(description="The failed step and why.")
    resumed: StrictBool = Field(False, description="Whether it resumed an interrupted run of the same plan.")
    steps: list[Step] = Field(description="Its steps in order.")


#: most replicas or instances one live read may count (far above any fleet: hetinfra.facts.MAX_GPUS is 10^6
#: GPUs in all); the same bound as hetinfra.deploy.kube_answers.MAX_REPLICAS on the API's answers
MAX_LIVE_COUNT = MAX_GPUS
_LiveCount = Annotated[int, Field(ge=0, le=MAX_LIVE_COUNT, strict=True)]


class RoleCounts(BaseModel):
    """One role's counts of a bundle's unit in a live read (hetinfra.deploy.drift.UnitLive.role_counts)."""

    model_config = ConfigDict(extra="allow")

    engines_per_replica: _LiveCount
    planned: _LiveCount
    live: Optional[_LiveCount] = None
    nodes_per_replica: _LiveCount = 0
    nodes_planned: _LiveCount = 0
    nodes_live: Optional[_LiveCount] = None


#: a live read's $/h: finite, >= 0, at most every GPU hetinfra plans at an instance's highest price
_LiveCost = Annotated[float, Field(ge=0, le=MAX_LIVE_COUNT * MAX_PRICE_USD_PER_HOUR, allow_inf_nan=False)]


class LiveCounts(BaseModel):
    """One unit of a live read (hetinfra.deploy.drift.UnitLive.doc): its counts whole, 0..MAX_LIVE_COUNT,
    its costs finite and >= 0. Keys a state.json written by an older version lacks read as their
    default (None: not known), so ``hetinfra status`` prints '?' rather than failing on them."""

    model_config = ConfigDict(extra="allow")

    path: Optional[Literal["pulumi", "skypilot", "kubernetes"]] = None
    nodes: _LiveCount = 1
    desired: _LiveCount = 0
    live: Optional[_LiveCount] = None
    unhealthy: _LiveCount = 0
    lost: _LiveCount = 0
    replacing: _LiveCount = 0
    stalled: _LiveCount = 0
    running_instances: _LiveCount = 0
    cost_usd_per_hour: Optional[_LiveCost] = None
    roles: dict[str, RoleCounts] = {}


class LiveRead(BaseModel):
    """A live read (state.json's ``live``): the totals and each unit's; what ``hetinfra status`` prints
    (hetinfra.deploy.live_read.live_lines reads it through this model: a hand-edited or older read missing
    a key was a KeyError traceback there)."""

    model_config = ConfigDict(extra="allow")

    read_at: Optional[StrictStr] = None
    refreshed: Optional[StrictBool] = None
    desired_replicas: _LiveCount = 0
    live_replicas: _LiveCount = 0
    cost_usd_per_hour: Optional[_LiveCost] = None
    planned_cost_usd_per_hour: Optional[_LiveCost] = None
    drift: list[StrictStr] = []
    units: dict[str, LiveCounts] = {}


def check_live(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as it is, once its counts are whole and within 0..MAX_LIVE_COUNT (ValueError otherwise):
    a state.json recording -5 or 10^30 live replicas is refused where it is read and where it is written."""
    LiveRead.model_validate(doc)
    return doc


def _address(value: str) -> str:
    """An endpoint or gateway URL as `status` prints it and the launch lines users copy carry it: no
    whitespace, control character (an escape sequence reached the terminal as is), quoting or
    expansion; IPv6 brackets and ports allowed."""
    why = word_problem(value, loose=True) or ("contains whitespace" if any(c.isspace() for c in value) else None) or (
        "contains a character that does not print" if not value.isprintable() else None)
    if why or not value or len(value) > 2048:
        raise ValueError(f"{value[:60]!r} {why or 'is not 1-2048 characters'}")
    return value


Address = Annotated[StrictStr, AfterValidator(_address)]


class State(Doc):
    """state.json: what runs, how it got there, and the last operation (``state_version`` 1)."""

    state_version: Literal[1] = Field(description="Version of this format.")
    service: Optional[StrictStr] = Field(None, description="The service that runs here (plan.json's service).")
    service_id: Optional[StrictStr] = Field(None, description="plan.json's service_id of the last apply.")
    updated_at: Optional[StrictStr] = Field(None, description="UTC time of the last write.")
    plan_sha256: Optional[StrictStr] = Field(None, description="Hash of the plan.json last applied, in full or in part.")
    allocations: list[RunningAllocation] = Field([], description="The plan allocations running now.")
    endpoints: dict[str, list[Address]] = Field({}, description="Deployment unit -> its replicas' OpenAI base URLs.")
    pulumi: dict[str, PulumiStack] = Field({}, description="Cloud -> its Pulumi project's last up.")
    skypilot: dict[str, SkyService] = Field({}, description="Deployment unit -> its SkyServe service.")
    kubernetes: dict[str, KubeCluster] = Field({}, description="Cluster ('<cloud>/<region>' or its context) -> "
                                                                "what apply put there (deploy.target kubernetes).")
    gateways: dict[str, Address] = Field({}, description="'<service>-<cloud>-<region>' -> the gateway's URL.")
    images: dict[str, dict[str, dict[str, str]]] = Field({}, description="Pinned images: cloud -> region -> role "
                                                                         "('gpu', 'gateway') -> image id.")
    live: Optional[Annotated[dict[str, Any], AfterValidator(check_live)]] = Field(
        None, description="The last read from the clouds (hetinfra.deploy.drift); its replica and instance counts "
                          f"are whole numbers from 0 to {MAX_LIVE_COUNT:,}.")
    operation: Optional[Operation] = Field(None, description="The last apply or destroy.")

    @model_validator(mode="after")
    def _figures(self) -> "State":
        """Each running unit's $/h is its price x instances, as in plan.json (hetinfra.document.consistency):
        `status`, `destroy` and `replan` print and compare them."""
        from hetinfra.document.consistency import unit_figure_problems
        from hetinfra.document.load import HintedValueError

        if wrong := unit_figure_problems(self.allocations, HINT):
            raise HintedValueError(wrong[0], wrong[0].hint)
        return self

    @classmethod
    def of(cls, doc: "State | dict", path: Path | str = "state.json") -> "State":
        """``doc`` itself when already parsed, else the model of state.json's dict (as
        :func:`parse_state` checks it): how a reader takes the live dict a deployment updates."""
        from hetinfra.document.load import parse_document

        return doc if isinstance(doc, cls) else parse_document(cls, doc, path, hint=HINT)


def allocation_of(doc: Allocation | dict) -> Allocation:
    """One running allocation as its model (a model as it is): state.json's dict (with its deploy
    ``path``) or plan.json's (what replan reads runs from, hetinfra.plan.planner.running_allocations)."""
    if isinstance(doc, Allocation):
        return doc
    return (RunningAllocation if isinstance(doc, dict) and "path" in doc else Allocation).model_validate(doc)


#: keys every reader may index: filled with the model's defaults when a state.json lacks them
INDEXED = ("allocations", "endpoints", "pulumi", "skypilot")


def load_state(path: Path) -> dict:
    """state.json at ``path``, checked against :class:`State` (see :func:`parse_state`): the one way a
    stage reads it."""
    from hetinfra.document.load import read_json

    return parse_state(read_json(path, what="state", hint=HINT), path)


def parse_state(doc: Any, path: Path) -> dict:
    """``doc`` checked against :class:`State`, with the indexed keys it lacks filled in from the
    model's defaults (the dict stays the writer's: hetinfra.deploy.state updates it step by step)."""
    from hetinfra.document.load import parse_document

    if isinstance(doc, dict) and doc.get("state_version", STATE_VERSION) != STATE_VERSION:
        from hetinfra.errors import InvalidInputError

        raise InvalidInputError(f"{path}: state_version {doc.get('state_version')!r} is not {STATE_VERSION}", hint=HINT)
    parse_document(State, doc, path, hint=HINT)
    filled = dict(doc)
    for key in INDEXED:
        if key not in filled:
            filled[key] = State.model_fields[key].get_default(call_default_factory=True)
    return filled
