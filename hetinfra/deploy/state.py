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
read what runs from it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hetinfra.fileio import atomic_write_text, dumps_strict, read_text
from hetinfra.errors import InvalidInputError

STATE_VERSION = 1
STATE_FILE = "state.json"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan_sha(plan: dict) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


#: a plan.json allocation's keys and types (preflight.validate_plan checks them; state.json copies them)
ALLOC_FIELDS: dict[str, type | tuple] = {
    "model": str, "cloud": str, "region": str, "instance_type": str, "gpu": str, "gpus_per_instance": int,
    "tp": int, "pp": int, "engines_per_instance": int, "nodes_per_replica": int, "count": int, "instances": int,
    "spot": bool, "price_per_instance_usd_per_hour": (int, float), "cost_usd_per_hour": (int, float),
    "deployment_unit": str, "unit": str,
}
#: the shape every reader of state.json relies on (until state.json is a typed model): key -> type
_SHAPE = {"allocations": list, "endpoints": dict, "pulumi": dict, "skypilot": dict}
_ALLOCATION = {"deployment_unit": str, "unit": str, "cloud": str, "count": int, "path": str}


def _check_shape(doc: object, path: Path) -> None:
    """InvalidInputError (exit 2) naming the field of a tampered or truncated state.json."""
    def bad(field: str, want: str) -> InvalidInputError:
        return InvalidInputError(f"{path}: {field} must be {want}",
                                 hint="it is written atomically by hetinfra; restore it from a backup")
    if not isinstance(doc, dict):
        raise bad("(top level)", "a JSON object")
    if doc.get("state_version") != STATE_VERSION:
        raise InvalidInputError(f"{path}: state_version {doc.get('state_version')!r} is not {STATE_VERSION}")
    for key, kind in _SHAPE.items():
        if not isinstance(doc.setdefault(key, kind()), kind):
            raise bad(key, f"a JSON {'list' if kind is list else 'object'}")
    if doc.get("operation") is not None and not isinstance(doc["operation"], dict):
        raise bad("operation", "null or a JSON object")
    for i, a in enumerate(doc["allocations"]):
        if not isinstance(a, dict):
            raise bad(f"allocations[{i}]", "a JSON object")
        for key, kind in {**ALLOC_FIELDS, **_ALLOCATION}.items():
            if key not in a and key not in _ALLOCATION:
                continue  # an older state.json may lack a key it never used
            value = a.get(key)
            ok = isinstance(value, bool) if kind is bool else (
                isinstance(value, kind) and not isinstance(value, bool))
            if not ok or (isinstance(value, float) and not math.isfinite(value)):
                name = kind.__name__ if isinstance(kind, type) else "a number"
                raise bad(f"allocations[{i}].{key}", name)
    for unit, urls in doc["endpoints"].items():
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise bad(f"endpoints.{unit}", "a list of URLs")


@dataclass
class DeployState:
    path: Path
    doc: dict = field(default_factory=dict)

    @classmethod
    def load(cls, out: Path, service: str | None = None) -> "DeployState":
        path = out / STATE_FILE
        if not path.exists():
            return cls(path, {"state_version": STATE_VERSION, "service": service, "allocations": [], "endpoints": {},
                              "pulumi": {}, "skypilot": {}, "operation": None, "plan_sha256": None})
        try:
            doc = json.loads(read_text(path, "deploy state"))
        except ValueError as exc:
            raise InvalidInputError(f"{path} is not valid JSON ({exc})",
                                    hint="it is written atomically by hetinfra; restore it from a backup") from None
        _check_shape(doc, path)
        return cls(path, doc)

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

    def mark(self, step_id: str, status: str, error: str | None = None) -> None:
        s = self.step(step_id)
        s["status"], s["error"] = status, error
        if status == "failed":
            self.operation["status"], self.operation["error"] = "failed", f"{step_id}: {error}"
            self.operation["finished_at"] = now()
        self.save()

    def finish(self) -> None:
        self.operation["status"] = "done"
        self.operation["finished_at"] = now()
        self.save()

    def replace_running(self, keep, new: list[dict]) -> None:
        """Running allocations := those for which ``keep(a)`` holds, plus ``new``."""
        self.doc["allocations"] = [a for a in self.allocations if keep(a)] + list(new)
        units = {a["deployment_unit"] for a in self.allocations}
        self.doc["endpoints"] = {u: e for u, e in self.doc["endpoints"].items() if u in units}
