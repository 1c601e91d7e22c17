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

:class:`DeployState` holds the state as that model, and is its one writer: what apply, destroy,
status and replan do to state.json is one method each (begin/mark/finish an operation, record or
forget a stack, a SkyServe service, the Kubernetes project, images, the live read). Each method
replaces the model whole, checked (what comes from outside, such as a stack's outputs, must make a
state.json that loads again); :meth:`DeployState.save` writes its dump atomically (whole or not at
all). Keys are written in the model's order; files an earlier hetinfra wrote, in the order it wrote
them, load alike (tests/deploy/data holds one).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.document.plan import DUMP
from hetinfra.document.state import (MAX_LIVE_COUNT, STATE_VERSION, Operation, RunningAllocation, State, Step,
                                     check_live, load_state)
from hetinfra.errors import ProviderError, dotted
from hetinfra.fileio import atomic_write_text, dumps_strict, present, written_through

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
    return f"{dotted(err['loc'])}: {err['msg']}"


@dataclass
class DeployState:
    """OUT/state.json: its path and the state as its model (``model``; change it through the methods), and
    the fields its methods changed (``changed``: what :meth:`save` writes over state.json as it is then)."""

    path: Path
    model: State
    changed: set[str] = field(default_factory=set, repr=False)

    @property
    def doc(self) -> dict:
        """state.json's dict of the state (a copy: what ``status --json`` prints and dict readers take)."""
        return self.model.model_dump(**DUMP)

    @classmethod
    def load(cls, out: Path, service: str | None = None) -> "DeployState":
        """OUT/state.json, or a new state of ``service`` when nothing was deployed from ``out``."""
        path = out / STATE_FILE
        if not present(path):
            return cls.of(path, {"state_version": STATE_VERSION, "service": service, "allocations": [], "endpoints": {},
                                 "pulumi": {}, "skypilot": {}, "operation": None, "plan_sha256": None})
        return cls.of(path, load_state(path))

    @classmethod
    def of(cls, path: Path, doc: dict) -> "DeployState":
        """The state of state.json's dict ``doc`` at ``path`` (checked: InvalidInputError, exit 2)."""
        return cls(path, State.of(doc, path))

    def _replace(self, **fields) -> None:
        """The state with ``fields`` (models or state.json's dicts) in place, checked whole: a value
        from outside (a stack's outputs, a live read) that would make a state.json that does not load
        is refused here, before anything is written."""
        self.model = State.of({**self.doc, **{k: _dumped(v) for k, v in fields.items()}}, self.path)
        self.changed.update(fields)

    def save(self) -> None:
        """Write the state, in the folder's turn (hetinfra.outdir.folder_turn), over state.json as it is then:
        the fields this state changed are this state's, the others the file's. `status` records its live read
        while `apply` runs: apply's next save wrote back the state it had loaded (the live read lost), and a
        save of apply's between status's load and save was lost to status's. A state.json that is a symbolic
        link (to a share the deploying machines run from) is written through, the link kept: it was replaced
        by a file at the first save, and the shared file kept the old state."""
        from hetinfra.outdir import folder_turn

        with folder_turn(written_through(self.path).parent):
            self._take_others()
            self.model = self.model.model_copy(update={"updated_at": now()})
            atomic_write_text(self.path, dumps_strict(self.doc, indent=2) + "\n", through_links=True)

    def _take_others(self) -> None:
        """The fields this state did not change, as state.json holds them now (another run's saves since this
        one loaded it); a file that does not load is replaced whole, as before."""
        from hetinfra.errors import HetinfraError

        if not present(self.path):
            return
        try:
            disk = load_state(self.path)
        except (HetinfraError, OSError):
            return
        # as state.json is written (set fields only): a default dumped here became a set field after
        # (a recorded cluster gained "objects": [], which only old versions' state.json has)
        mine = self.doc
        self.model = State.of({**disk, **{k: mine[k] for k in self.changed if k in mine}}, self.path)

    @property
    def running(self) -> list[RunningAllocation]:
        """The running allocations."""
        return list(self.model.allocations)

    @property
    def operation(self) -> Operation | None:
        return self.model.operation

    def begin(self, kind: str, sha: str, step_ids: list[str]) -> None:
        """Start an operation; a failed or interrupted one of the same kind and plan is resumed
        (its finished steps stay done)."""
        old = self.operation
        done = set()
        if old and old.kind == kind and old.plan_sha256 == sha and old.status != "done":
            done = {s.id for s in old.steps if s.status == "done"}
        self._replace(operation={
            "kind": kind, "plan_sha256": sha, "status": "running", "started_at": now(), "finished_at": None,
            "error": None, "resumed": bool(done),
            "steps": [{"id": i, "status": "done" if i in done else "pending", "error": None} for i in step_ids]})
        self.save()

    def step(self, step_id: str) -> Step:
        return next(s for s in self.operation.steps if s.id == step_id)

    def is_done(self, step_id: str) -> bool:
        """Whether the operation's step ``step_id`` finished (in this run or the one it resumes)."""
        return self.step(step_id).status == "done"

    def progress(self) -> tuple[str, int, list[dict]]:
        """(the operation's kind, how many of its steps are done, its steps' records as state.json's)."""
        steps = [s.model_dump(**DUMP) for s in self.operation.steps]
        return self.operation.kind, sum(1 for s in self.operation.steps if s.status == "done"), steps

    def mark(self, step_id: str, status: str, error: str | None = None) -> None:
        op = self.operation
        update: dict = {"steps": [s.model_copy(update={"status": status, "error": error}) if s.id == step_id else s
                                  for s in op.steps]}
        if status == "failed":
            update.update(status="failed", error=f"{step_id}: {error}", finished_at=now())
        self._replace(operation=op.model_copy(update=update))
        self.save()

    def finish(self, plan_sha256: str | None = None) -> None:
        """The operation is done; after an apply, ``plan_sha256`` is the plan that now runs."""
        fields: dict = {"operation": self.operation.model_copy(update={"status": "done", "finished_at": now()})}
        if plan_sha256 is not None:
            fields["plan_sha256"] = plan_sha256
        self._replace(**fields)
        self.save()

    def set_service(self, service: str, service_id: str | None = None) -> None:
        """The service that runs here (plan.json's ``service`` and, when it has one, ``service_id``)."""
        self._replace(service=service, **({"service_id": service_id} if service_id else {}))

    def replace_running(self, keep: Callable[[RunningAllocation], bool], new: list[RunningAllocation]) -> None:
        """Running allocations := those for which ``keep(a)`` holds, plus ``new``; endpoints of units
        no longer running are forgotten."""
        allocations = [a for a in self.model.allocations if keep(a)] + list(new)
        units = {a.deployment_unit for a in allocations}
        self._replace(allocations=allocations,
                      endpoints={u: e for u, e in self.model.endpoints.items() if u in units})

    def _without_gateways(self, service: str | None, cloud: str) -> dict[str, str]:
        """The gateways less those of ``service``'s fleets on ``cloud``."""
        return {k: v for k, v in self.model.gateways.items() if not k.startswith(f"{service}-{cloud}-")}

    def drop_gateways(self, service: str | None, cloud: str) -> None:
        """Forget the gateways of ``service``'s fleets on ``cloud`` (its stack was replaced or destroyed)."""
        if "gateways" in self.model.model_fields_set:
            self._replace(gateways=self._without_gateways(service, cloud))

    def record_stack(self, service: str, cloud: str, stack: str, outputs: dict) -> None:
        """After ``pulumi up`` of ``cloud``'s project: its stack and outputs, its units' endpoints, and
        its fleets' gateways in place of the ones it had."""
        endpoints = {**self.model.endpoints, **{u: list(urls) for u, urls in (outputs.get("endpoints") or {}).items()}}
        gateways = {**self._without_gateways(service, cloud), **(outputs.get("gateways") or {})}
        self._replace(pulumi={**self.model.pulumi, cloud: {"stack": stack, "outputs": outputs}}, endpoints=endpoints,
                      gateways=gateways)

    def forget_stack(self, project: str) -> None:
        """After ``pulumi destroy`` of ``project`` (a cloud): no stack, and no gateway of its fleets."""
        self._replace(pulumi={c: rec for c, rec in self.model.pulumi.items() if c != project})
        self.drop_gateways(self.model.service, project)

    def record_kubernetes(self, project: str, stack: str, outputs: dict) -> None:
        """After ``pulumi up`` of the Kubernetes project: its stack and outputs, the clusters (its
        ``clusters`` output) and the in-cluster endpoints of the units that run."""
        endpoints = {**self._running_endpoints(), **{u: list(urls) for u, urls in (outputs.get("endpoints") or {}).items()}}
        self._replace(pulumi={**self.model.pulumi, project: {"stack": stack, "outputs": outputs}},
                      kubernetes={c: dict(rec) for c, rec in sorted((outputs.get("clusters") or {}).items())},
                      endpoints=endpoints)

    def forget_kubernetes(self, project: str) -> None:
        """After ``pulumi destroy`` of the Kubernetes project: no stack, cluster or endpoint of it."""
        self._replace(pulumi={c: rec for c, rec in self.model.pulumi.items() if c != project}, kubernetes={},
                      endpoints=self._running_endpoints())

    def _running_endpoints(self) -> dict[str, list[str]]:
        running = {a.deployment_unit for a in self.model.allocations}
        return {u: e for u, e in self.model.endpoints.items() if u in running}

    def forget_service(self, unit: str) -> None:
        """After ``sky serve down`` of ``unit``."""
        self._replace(skypilot={u: rec for u, rec in self.model.skypilot.items() if u != unit})

    def record_images(self, cloud: str, used: dict[str, dict[str, str]]) -> None:
        """The images ``cloud``'s stack used (region -> role -> id): what the next up pins."""
        self._replace(images={**self.model.images, cloud: used})

    def record_live(self, live: dict) -> None:
        """The last read from the clouds (hetinfra.deploy.drift), once its counts are in bounds: a read
        that counted -5 or 10^30 replicas is a broken answer, not the fleet (ProviderError, exit 4)."""
        try:
            check_live(live)
        except ValueError as exc:
            raise ProviderError(f"the live read of {self.path.parent} is out of bounds, not recorded: "
                                f"{_first_error(exc)}", hint="the clouds or a cluster answered a count that "
                                f"cannot be (0 to {MAX_LIVE_COUNT:,}); read again with `hetinfra status`") from None
        self._replace(live=live)

    def record_service(self, unit: str, endpoint: str | None) -> None:
        """After ``sky serve up`` of ``unit``: its SkyServe service and, once known, its endpoint."""
        fields: dict = {"skypilot": {**self.model.skypilot, unit: {"service": unit, "endpoint": endpoint}}}
        if endpoint:
            fields["endpoints"] = {**self.model.endpoints, unit: [endpoint]}
        self._replace(**fields)


def _dumped(value):
    """``value`` as state.json's JSON: models dumped (as written), containers walked, the rest as is."""
    if hasattr(value, "model_dump"):
        return value.model_dump(**DUMP)
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    return value
