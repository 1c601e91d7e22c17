"""The deployed state, ``OUT/state.json``: what runs, how it got there, and the last operation.

It is rewritten atomically after every step of ``apply``/``destroy``, so a run that dies
half-way leaves a file that says exactly which steps finished. Format (``state_version`` 1)::

    {"state_version": 1, "service": "chat", "updated_at": "...",
     "plan_sha256": "<hash of the plan.json last applied, in full or in part>",
     "allocations": [<plan allocations running now, each with "path": "pulumi"|"skypilot">],
     "endpoints": {"<deployment unit>": ["http://203.0.113.7:8000/v1", ...]},
     "pulumi": {"aws": {"stack": "prod", "outputs": {...}, "updated_at": "..."}},
     "skypilot": {"<deployment unit>": {"service": "<name>", "endpoint": "..."}},
     "images": {"aws": {"us-east-1": {"gpu": "ami-...", "gateway": "ami-..."}}},  # pinned (deploy/images.py)
     "live": {"read_at": "...", "units": {...}, ...},  # the last read from the clouds (deploy/drift.py)
     "operation": {"kind": "apply"|"destroy", "plan_sha256": "...", "status": "running"|"done"|"failed",
                   "started_at": "...", "finished_at": "...", "error": null,
                   "steps": [{"id": "pulumi:aws", "status": "pending"|"running"|"done"|"failed", "error": null}]}}

``allocations`` has the shape of plan.json's, so ``hetinfra plan --state OUT`` and ``replan``
read what runs from it. The keys, types and defaults are the model's
(hetinfra.document.state.State, docs/state.schema.json); every load checks the file against it.

:class:`DeployState` is the one writer: what apply, destroy, status and replan do to state.json is
one method each (begin/mark/finish an operation, record or forget a stack, a SkyServe service, the
Kubernetes project, images, the live read), and readers take its typed view (:attr:`DeployState.model`).
The dict it writes keeps its keys in the order they were first written, so the file reads as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.document.state import MAX_LIVE_COUNT, STATE_VERSION, RunningAllocation, State, check_live, load_state
from hetinfra.errors import ProviderError
from hetinfra.fileio import atomic_write_text, dumps_strict

STATE_FILE = "state.json"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan_sha(plan: dict) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    err = errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


@dataclass
class DeployState:
    """OUT/state.json: its path and the dict written to it (``doc``; change it through the methods)."""

    path: Path
    doc: dict = field(default_factory=dict)

    @property
    def model(self) -> State:
        """The state as its typed model (hetinfra.document.state.State): what readers read."""
        return State.of(self.doc, self.path)

    @classmethod
    def load(cls, out: Path, service: str | None = None) -> "DeployState":
        path = out / STATE_FILE
        if not path.exists():
            return cls(path, {"state_version": STATE_VERSION, "service": service, "allocations": [], "endpoints": {},
                              "pulumi": {}, "skypilot": {}, "operation": None, "plan_sha256": None})
        return cls(path, load_state(path))

    def save(self) -> None:
        self.doc["updated_at"] = now()
        atomic_write_text(self.path, dumps_strict(self.doc, indent=2) + "\n")

    @property
    def allocations(self) -> list[dict]:
        return self.doc["allocations"]

    @property
    def operation(self) -> dict | None:
        return self.doc.get("operation")

    def begin(self, kind: str, sha: str, step_ids: list[str]) -> None:
        """Start an operation; a failed or interrupted one of the same kind and plan is resumed
        (its finished steps stay done)."""
        old = self.operation
        done = set()
        if old and old["kind"] == kind and old["plan_sha256"] == sha and old["status"] != "done":
            done = {s["id"] for s in old["steps"] if s["status"] == "done"}
        self.doc["operation"] = {
            "kind": kind, "plan_sha256": sha, "status": "running", "started_at": now(), "finished_at": None,
            "error": None, "resumed": bool(done),
            "steps": [{"id": i, "status": "done" if i in done else "pending", "error": None} for i in step_ids],
        }
        self.save()

    def step(self, step_id: str) -> dict:
        return next(s for s in self.operation["steps"] if s["id"] == step_id)

    def is_done(self, step_id: str) -> bool:
        """Whether the operation's step ``step_id`` finished (in this run or the one it resumes)."""
        return self.step(step_id)["status"] == "done"

    def progress(self) -> tuple[str, int, list[dict]]:
        """(the operation's kind, how many of its steps are done, a copy of its steps' records)."""
        steps = [dict(s) for s in self.operation["steps"]]
        return self.operation["kind"], sum(1 for s in steps if s["status"] == "done"), steps

    def mark(self, step_id: str, status: str, error: str | None = None) -> None:
        s = self.step(step_id)
        s["status"], s["error"] = status, error
        if status == "failed":
            self.operation["status"], self.operation["error"] = "failed", f"{step_id}: {error}"
            self.operation["finished_at"] = now()
        self.save()

    def finish(self, plan_sha256: str | None = None) -> None:
        """The operation is done; after an apply, ``plan_sha256`` is the plan that now runs."""
        if plan_sha256 is not None:
            self.doc["plan_sha256"] = plan_sha256
        self.operation["status"] = "done"
        self.operation["finished_at"] = now()
        self.save()

    def set_service(self, service: str, service_id: str | None = None) -> None:
        """The service that runs here (plan.json's ``service`` and, when it has one, ``service_id``)."""
        self.doc["service"] = service
        if service_id:
            self.doc["service_id"] = service_id

    @property
    def running(self) -> list[RunningAllocation]:
        """The running allocations as their models (read these; ``allocations`` is the written dict)."""
        return [RunningAllocation.model_validate(a) for a in self.allocations]

    def replace_running(self, keep: Callable[[RunningAllocation], bool], new: list[RunningAllocation]) -> None:
        """Running allocations := those for which ``keep(a)`` holds, plus ``new``."""
        kept = [raw for raw, a in zip(self.allocations, self.running) if keep(a)]
        self.doc["allocations"] = kept + [a.to_dict() for a in new]
        units = {a["deployment_unit"] for a in self.allocations}
        self.doc["endpoints"] = {u: e for u, e in self.doc["endpoints"].items() if u in units}

    def drop_gateways(self, service: str | None, cloud: str) -> None:
        """Forget the gateways of ``service``'s fleets on ``cloud`` (its stack was replaced or destroyed)."""
        gateways = self.doc.get("gateways") or {}
        for fleet in [k for k in gateways if k.startswith(f"{service}-{cloud}-")]:
            del gateways[fleet]

    def record_stack(self, service: str, cloud: str, stack: str, outputs: dict) -> None:
        """After ``pulumi up`` of ``cloud``'s project: its stack and outputs, its units' endpoints, and
        its fleets' gateways in place of the ones it had."""
        self.doc["pulumi"][cloud] = {"stack": stack, "outputs": outputs}
        for unit, urls in (outputs.get("endpoints") or {}).items():
            self.doc["endpoints"][unit] = list(urls)
        self.drop_gateways(service, cloud)
        self.doc.setdefault("gateways", {}).update(outputs.get("gateways") or {})

    def forget_stack(self, project: str) -> None:
        """After ``pulumi destroy`` of ``project`` (a cloud): no stack, and no gateway of its fleets."""
        self.doc["pulumi"].pop(project, None)
        self.drop_gateways(self.model.service, project)

    def record_kubernetes(self, project: str, stack: str, outputs: dict) -> None:
        """After ``pulumi up`` of the Kubernetes project: its stack and outputs, the clusters (its
        ``clusters`` output) and the in-cluster endpoints of the units that run."""
        self.doc["pulumi"][project] = {"stack": stack, "outputs": outputs}
        self.doc["kubernetes"] = {c: dict(rec) for c, rec in sorted((outputs.get("clusters") or {}).items())}
        self._drop_endpoints()
        for unit, urls in (outputs.get("endpoints") or {}).items():
            self.doc["endpoints"][unit] = list(urls)

    def forget_kubernetes(self, project: str) -> None:
        """After ``pulumi destroy`` of the Kubernetes project: no stack, cluster or endpoint of it."""
        self.doc["pulumi"].pop(project, None)
        self.doc["kubernetes"] = {}
        self._drop_endpoints()

    def _drop_endpoints(self) -> None:
        running = {a["deployment_unit"] for a in self.allocations}
        for unit in [u for u in self.doc["endpoints"] if u not in running]:
            del self.doc["endpoints"][unit]

    def forget_service(self, unit: str) -> None:
        """After ``sky serve down`` of ``unit``."""
        self.doc["skypilot"].pop(unit, None)

    def record_images(self, cloud: str, used: dict[str, dict[str, str]]) -> None:
        """The images ``cloud``'s stack used (region -> role -> id): what the next up pins."""
        self.doc.setdefault("images", {})[cloud] = used

    def record_live(self, live: dict) -> None:
        """The last read from the clouds (hetinfra.deploy.drift), once its counts are in bounds: a read
        that counted -5 or 10^30 replicas is a broken answer, not the fleet (ProviderError, exit 4)."""
        try:
            check_live(live)
        except ValueError as exc:
            raise ProviderError(f"the live read of {self.path.parent} is out of bounds, not recorded: "
                                f"{_first_error(exc)}", hint="the clouds or a cluster answered a count that "
                                f"cannot be (0 to {MAX_LIVE_COUNT:,}); read again with `hetinfra status`") from None
        self.doc["live"] = live

    def record_service(self, unit: str, endpoint: str | None) -> None:
        """After ``sky serve up`` of ``unit``: its SkyServe service and, once known, its endpoint."""
        self.doc["skypilot"][unit] = {"service": unit, "endpoint": endpoint}
        if endpoint:
            self.doc["endpoints"][unit] = [endpoint]
