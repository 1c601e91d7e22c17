"""What a Kubernetes API server answers, as typed models: the only shapes hetinfra reads from it.

A cluster is outside our control (a proxy, a webhook, a half-upgraded API server, an attacker on the
path may answer anything), so an answer is parsed once, here, before anything counts with it: JSON
through the one bounded reader (hetinfra.fileio.parse_json), then these models. A malformed answer
is a :class:`~hetinfra.errors.ProviderError` (exit 4) naming the cluster, the request and the field,
never a ``TypeError`` from ``int()`` or a ``ValueError`` from ``strptime`` deep in ``status``.

Fields hetinfra does not read are ignored (``extra="ignore"``): the API adds fields every release.
Counts are bounded (:data:`MAX_REPLICAS`): a workload reporting -5 or 10^30 ready replicas is a
broken answer, not a fleet.
"""

from __future__ import annotations

import re

import datetime as dt
from typing import Annotated, Any, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator

from hetinfra.errors import HetinfraError, ProviderError, dotted

__all__ = ["MAX_REPLICAS", "Answer", "Pod", "PodList", "Workload", "parse_answer", "parse_body"]

#: most replicas (or pods) one workload may report; far above any fleet hetinfra plans
#: (hetinfra.facts.MAX_GPUS is 10^6 GPUs in all), far below what breaks arithmetic
MAX_REPLICAS = 1_000_000

Count = Annotated[int, Field(ge=0, le=MAX_REPLICAS, strict=True)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, doc: Any) -> Any:
        # the API writes null for a field not set yet (a fresh workload's status): the default then
        return {k: v for k, v in doc.items() if v is not None} if isinstance(doc, dict) else doc


class WorkloadStatus(_Answer):
    readyReplicas: Optional[Count] = None  # noqa: N815 - the API's name
    replicas: Optional[Count] = None


class Workload(_Answer):
    """A Deployment or LeaderWorkerSet: only its status is read."""

    status: Optional[WorkloadStatus] = None

    @property
    def ready(self) -> int:
        return (self.status.readyReplicas if self.status else None) or 0


class PodCondition(_Answer):
    type: StrictStr
    status: StrictStr
    reason: Optional[StrictStr] = None
    lastTransitionTime: Optional[dt.datetime] = None  # noqa: N815 - RFC 3339, as the API writes it


class PodStatus(_Answer):
    phase: Optional[StrictStr] = None
    conditions: list[PodCondition] = Field(default_factory=list, max_length=64)


class Pod(_Answer):
    status: PodStatus = PodStatus()

    @property
    def pending(self) -> bool:
        return self.status.phase == "Pending"

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)

    def unschedulable_since(self) -> float | None:
        """When the scheduler found no node for this pending pod (None: not pending for capacity;
        0.0: pending for capacity since a time the API did not say)."""
        if not self.pending:
            return None
        for c in self.status.conditions:
            if (c.type, c.status, c.reason) == ("PodScheduled", "False", "Unschedulable"):
                stamp = c.lastTransitionTime
                if stamp is None:
                    return 0.0
                return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).timestamp()
        return None


class PodList(_Answer):
    items: list[Pod] = Field(default_factory=list, max_length=MAX_REPLICAS)


#: the base of every typed answer of an API hetinfra reads (also hetinfra.deploy.group_answers)
Answer = _Answer
M = TypeVar("M", bound=_Answer)


#: what a malformed answer of a cluster's API says to check (parse_answer's default)
CLUSTER_HINT = ("the cluster's API answered something that is not a Kubernetes object; check the context's server "
                "URL and any proxy in front of it")


def parse_answer(model: type[M], doc: Any, where: str, hint: str = CLUSTER_HINT) -> M:
    """``doc`` (a parsed answer; None or {} for an empty body) as ``model``, or a ProviderError naming
    ``where`` (the cluster and the request; a cloud's group: hetinfra.deploy.groups) and the first field
    that is wrong, with ``hint``. The one reader of every typed API answer."""
    try:
        return model.model_validate(doc if doc is not None else {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = dotted(err["loc"]) or "(the answer)"
        msg = re.sub(r" or instance of \w+", "", err["msg"])  # the model's class name says nothing to a user
        raise ProviderError(f"{where}: malformed answer: {loc}: {msg}", hint=hint) from None


def parse_body(text: str, where: str) -> Any:
    """An answer's JSON through the one bounded reader; anything it refuses is a provider failure."""
    from hetinfra.fileio import parse_json

    try:
        return parse_json(text, where) if text else {}
    except HetinfraError as exc:
        raise ProviderError(f"malformed answer: {exc.message}",
                            hint="the cluster's API answered something that is not JSON it could send") from None
