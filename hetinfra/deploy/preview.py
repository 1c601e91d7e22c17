"""What an ``apply`` will change, beyond instance counts: Pulumi's own preview of every stack and
SkyServe's changes per unit, as text to confirm and as the ``changes`` of ``apply --json``.

``pulumi preview --json`` prints one document (Pulumi's ``previewDigest``)::

    {"config": {...}, "steps": [{"op", "urn", "provider", "oldState", "newState", "diffReasons",
     "replaceReasons", "detailedDiff"}], "diagnostics": [{"urn", "message", "severity"}],
     "changeSummary": {"create": 3, "same": 9, ...}}

A replacement shows as up to three steps of one URN (``create-replacement``, ``replace``,
``delete-replaced``); they are folded into one ``replace`` per resource here. Replacing a GPU VM or
group costs money and time (new VMs, the model downloads and loads again): such replacements are
listed by name and flagged ``!!``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hetinfra.errors import ProviderError
from hetinfra.fileio import json_value

if TYPE_CHECKING:
    from hetinfra.document.state import RunningAllocation

OPS = ("create", "update", "replace", "delete", "same")
# Pulumi's step ops, each folded into the logical change it stands for; a resource with steps of
# several kinds counts once, as the first of OPS_ORDER it has.
FOLD = {"create": "create", "import": "create", "update": "update", "replace": "replace",
        "create-replacement": "replace", "delete-replaced": "replace", "import-replacement": "replace",
        "read-replacement": "replace", "delete": "delete", "same": "same", "read": "same", "refresh": "same",
        "discard": "same", "discard-replaced": "same", "remove-pending-replace": "same"}
OPS_ORDER = ("replace", "delete", "create", "update", "same")

# Resource types that are VMs, groups of VMs or their templates: replacing one restarts what runs on it.
COMPUTE_TYPES = frozenset({
    "aws:autoscaling/group:Group", "aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/spotInstanceRequest:SpotInstanceRequest", "gcp:compute/instance:Instance",
    "gcp:compute/instanceTemplate:InstanceTemplate", "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
    "gcp:compute/instanceGroupManager:InstanceGroupManager",
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager", "azure-native:compute:VirtualMachine",
    "azure-native:compute:VirtualMachineScaleSet", "azure:compute/linuxVirtualMachine:LinuxVirtualMachine",
    "azure:compute/linuxVirtualMachineScaleSet:LinuxVirtualMachineScaleSet"})


def split_urn(urn: str) -> tuple[str, str]:
    """``urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>`` -> (type, name)."""
    parts = urn.split("::")
    if len(parts) < 4:
        return "", urn
    return parts[2].rsplit("$", 1)[-1], "::".join(parts[3:])


def resource_kind(rtype: str, name: str) -> str:
    """``gpu`` (a fleet VM, group or template), ``gateway`` (the gateway VM) or ``other``."""
    if rtype not in COMPUTE_TYPES:
        return "other"
    return "gateway" if name.endswith("-gateway") else "gpu"


@dataclass(frozen=True)
class ResourceChange:
    """One resource a stack's preview changes (its logical op is not ``same``)."""

    op: str
    urn: str
    type: str
    name: str
    kind: str  # gpu, gateway or other (resource_kind)
    reasons: list[str]

    def to_json(self) -> dict:
        return {"op": self.op, "urn": self.urn, "type": self.type, "name": self.name, "kind": self.kind,
                "reasons": list(self.reasons)}


@dataclass
class StackPreview:
    """One stack's preview: counts per logical op and the resources that change."""

    cloud: str
    stack: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    changes: list[ResourceChange] = field(default_factory=list)

    @property
    def replacements(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.op == "replace"]

    def to_json(self) -> dict:
        return {"stack": self.stack, "counts": dict(self.counts), "changes": [c.to_json() for c in self.changes]}


@dataclass(frozen=True)
class SkyChange:
    """SkyServe's change of one unit: a new service, a rolling update, or down."""

    unit: str
    action: str  # new, update or down
    replicas_before: int
    replicas_after: int
    cloud: str
    region: str
    instance_type: str
    gpu: str
    spot: bool

    def to_json(self) -> dict:
        return dict(self.__dict__)


def parse_preview(cloud: str, stack: str, doc: dict) -> StackPreview:
    """Fold ``pulumi preview --json``'s steps into one change per resource (in the steps' order)."""
    ops: dict[str, set[str]] = {}
    reasons: dict[str, list[str]] = {}
    for step in doc.get("steps") or []:
        urn, op = step.get("urn", ""), FOLD.get(step.get("op", ""), "same")
        ops.setdefault(urn, set()).add(op)
        why = step.get("replaceReasons") if op == "replace" else step.get("diffReasons")
        for key in why or []:
            if key not in reasons.setdefault(urn, []):
                reasons[urn].append(key)
    out = StackPreview(cloud, stack)
    for urn, seen in ops.items():
        op = next(o for o in OPS_ORDER if o in seen)
        out.counts[op] += 1
        if op != "same":
            rtype, name = split_urn(urn)
            out.changes.append(ResourceChange(op, urn, rtype, name, resource_kind(rtype, name), reasons.get(urn, [])))
    return out


def preview_failure(cloud: str, code: int, stdout: str, stderr: str) -> ProviderError:
    """A failed ``pulumi preview``: its error diagnostics (from the JSON document when there is
    one), else the last lines of stderr."""
    messages = []
    try:
        doc = json_value(stdout)
        messages = [d.get("message", "").strip() for d in doc.get("diagnostics") or []
                    if d.get("severity") == "error" and d.get("message", "").strip()]
    except (ValueError, AttributeError):
        pass
    if not messages:
        messages = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()][-3:] or [f"exit status {code}"]
    return ProviderError(f"pulumi preview of the {cloud} stack failed: {' | '.join(messages)}; nothing was changed",
                         hint=f"fix the cause and run the apply again (to see it alone: cd <OUT>/pulumi/{cloud} && "
                              "pulumi preview)")


def sky_changes(running: list["RunningAllocation"], launched: list["RunningAllocation"], gone: list[str]
                ) -> list[SkyChange]:
    """SkyServe's change per unit: ``new`` service, ``update`` (rolling) or ``down``, with replicas
    before and after. ``launched`` are the allocations ``apply`` will ``serve up``/``update``;
    ``running``, state.json's (apply's live state)."""
    before = {a.deployment_unit: a for a in running if a.path == "skypilot"}
    rows = []
    for a in sorted(launched, key=lambda a: a.deployment_unit):
        old = before.get(a.deployment_unit)
        rows.append(_sky_row(a, "update" if old else "new", old.count if old else 0, a.count))
    for unit in sorted(gone):
        rows.append(_sky_row(before[unit], "down", before[unit].count, 0))
    return rows


def _sky_row(a: "RunningAllocation", action: str, before: int, after: int) -> SkyChange:
    return SkyChange(a.deployment_unit, action, before, after, a.cloud, a.region, a.instance_type, a.gpu, a.spot)


def render_changes(stacks: list[StackPreview], sky: list[SkyChange]) -> str:
    """The per-stack preview and SkyServe's changes, for the confirmation."""
    lines = []
    if stacks:
        lines.append("Pulumi preview, per stack:")
    for p in stacks:
        c = p.counts
        lines.append(f"  {p.cloud} (stack {p.stack}): {c['create']} to create, {c['update']} to update, "
                     f"{c['replace']} to replace, {c['delete']} to delete, {c['same']} unchanged")
        for ch in sorted(p.replacements, key=lambda ch: (ch.kind != "gpu", ch.name)):
            flag = "!!" if ch.kind == "gpu" else " ~"
            what = {"gpu": f"REPLACE GPU {_noun(ch.type)}", "gateway": "replace gateway VM"}.get(ch.kind, "replace")
            why = f" (because {', '.join(ch.reasons)} changed)" if ch.reasons else ""
            lines.append(f"    {flag} {what} {ch.name} [{ch.type}]{why}")
        for ch in p.changes:
            if ch.op == "delete":
                lines.append(f"     - delete {ch.name} [{ch.type}]")
    gpu = sum(1 for p in stacks for ch in p.replacements if ch.kind == "gpu")
    if gpu:
        lines.append(f"!! {gpu} GPU VM(s)/group(s) will be REPLACED: new VMs boot and load the model again "
                     "(the replaced replicas stop serving; new and old may both be billed meanwhile)")
    if sky:
        n = {k: sum(1 for r in sky if r.action == k) for k in ("new", "update", "down")}
        lines.append(f"SkyServe: {n['new']} new service(s), {n['update']} update(s), {n['down']} down")
        mark = {"new": "+ new   ", "update": "~ update", "down": "- down  "}
        for r in sky:
            what = f"{r.instance_type} ({r.gpu})" + (" spot" if r.spot else "")
            lines.append(f"  {mark[r.action]} {r.unit:<52} {r.replicas_before:>3} -> {r.replicas_after:<3} "
                         f"replica(s)  {what}" + ("  (rolling)" if r.action == "update" else ""))
    return "\n".join(lines)


def _noun(rtype: str) -> str:
    last = rtype.rsplit(":", 1)[-1]
    return "group" if last.endswith(("Group", "GroupManager", "ScaleSet")) else \
        "template" if last.endswith("Template") else "VM"


def changes_json(rows, stacks: list[StackPreview], sky: list[SkyChange]) -> dict:
    """``changes`` of ``apply --json``/``destroy --json``: instances per cloud/region/type (``rows``,
    from :func:`hetinfra.deploy.apply.changes`), the stacks' previews and SkyServe's changes."""
    return {
        "instances": [{"path": c.path, "cloud": c.cloud, "region": c.region, "instance_type": c.instance_type,
                       "gpu": c.gpu, "spot": c.spot, "before": c.before, "after": c.after,
                       "before_usd_per_hour": round(c.before_cost, 4), "after_usd_per_hour": round(c.after_cost, 4)}
                      for c in rows],
        "instances_added": sum(max(0, c.after - c.before) for c in rows),
        "instances_removed": sum(max(0, c.before - c.after) for c in rows),
        "cost_usd_per_hour": {"before": round(sum(c.before_cost for c in rows), 4),
                              "after": round(sum(c.after_cost for c in rows), 4)},
        "pulumi": {p.cloud: p.to_json() for p in stacks},
        "skypilot": [r.to_json() for r in sky],
    }


def result_json(state, out) -> dict:
    """What ``apply --json``/``destroy --json`` report once the steps ran: each step, each stack's and
    SkyServe unit's outcome and outputs, the endpoints and gateways, the units still running."""
    from hetinfra.document.plan import DUMP

    doc = state.model
    steps = [s.model_dump(**DUMP) for s in (doc.operation.steps if doc.operation else ())]
    status = {s.id: s.status for s in (doc.operation.steps if doc.operation else ())}
    return {
        "steps": steps,
        "stacks": {cloud: {"stack": rec.stack, "status": status.get(f"pulumi:{cloud}", "unchanged"),
                           "outputs": rec.outputs} for cloud, rec in sorted(doc.pulumi.items())},
        "services": {unit: rec.model_dump(**DUMP) for unit, rec in sorted(doc.skypilot.items())},
        "endpoints": dict(sorted(doc.endpoints.items())),
        "gateways": dict(sorted(doc.gateways.items())),
        "running": sorted(a.deployment_unit for a in doc.allocations),
        "state": str(out / "state.json"),
    }
