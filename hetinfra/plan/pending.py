"""``hetinfra plan --detailed-exitcode``: would the new plan change what runs?

The reference is what :func:`hetinfra.plan.running.state_file` names: the out dir's state.json
(what runs) or, when nothing was applied from there, its previous plan.json (read before the new
one replaces it). A change is a deployment unit that would start or stop, or whose deployed shape
differs (:data:`DEPLOYED_KEYS`), or a changed value of the ``deploy`` section (engine version,
disks, CIDRs, ...; compared with the reference dir's plan.json). Allocations that no IaC deploys
(custom clouds) are left out on both sides.
"""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING

from hetinfra.fileio import present
from hetinfra.plan.planner import state_file
from hetinfra.price_feeds.offers import KNOWN_CLOUDS

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan

# Terraform's "changes pending" is 2, which is this project's "invalid input"; 10 is what replan
# already exits with when it proposes a change.
CHANGES_PENDING = 10

DEPLOYED_KEYS = ("cloud", "region", "instance_type", "gpu", "gpus_per_instance", "spot", "count", "instances",
                 "nodes_per_replica", "model", "tp", "pp", "engines_per_instance", "layer_partition", "stages")


def _deployable(allocs: list[Allocation]) -> dict[str, Allocation]:
    return {a.deployment_unit: a for a in allocs if not a.custom_cloud and a.cloud in KNOWN_CLOUDS}


def _deploy_section(ref: Path) -> dict:
    """The ``deploy`` section of the plan that goes with ``ref`` (state.json records no deploy section)."""
    path = ref.with_name("plan.json") if ref.name == "state.json" else ref
    from hetinfra.document import load_plan
    from hetinfra.document.plan import DUMP

    path = path / "plan.json" if path.is_dir() else path
    if not present(path):  # no plan.json beside the state: nothing to compare
        return {}
    return load_plan(path).deploy.model_dump(**DUMP)  # one there is read as every command reads it


def pending_changes(plan: Plan, reference: Path | None) -> dict:
    """What differs between ``plan`` and the deployment in ``reference`` (a directory or a
    plan.json): ``{reference, pending, added, removed, changed {unit: [keys]}, deploy [keys],
    instances {added, removed}}``. No reference file: everything in the plan is pending."""
    from hetinfra.document import running
    from hetinfra.document.plan import DUMP

    ref = state_file(reference) if reference is not None else None
    exists = ref is not None and present(ref)
    before = _deployable(running(ref) if exists else [])
    after = _deployable(plan.allocations)
    changed = {u: [k for k in DEPLOYED_KEYS if getattr(before[u], k) != getattr(after[u], k)]
               for u in sorted(set(before) & set(after))}
    changed = {u: keys for u, keys in changed.items() if keys}
    old_deploy, new_deploy = (_deploy_section(ref) if exists else {}), plan.deploy.model_dump(**DUMP)
    deploy = sorted(k for k in set(old_deploy) | set(new_deploy) if old_deploy.get(k) != new_deploy.get(k)) if exists else []
    units = sorted(set(before) | set(after))

    def instances(side: dict[str, Allocation], u: str) -> int:
        return side[u].instances if u in side else 0

    grow = sum(max(0, instances(after, u) - instances(before, u)) for u in units)
    shrink = sum(max(0, instances(before, u) - instances(after, u)) for u in units)
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    return {"reference": str(ref) if exists else None, "pending": bool(added or removed or changed or deploy),
            "added": added, "removed": removed, "changed": changed, "deploy": deploy,
            "instances": {"added": grow, "removed": shrink}}


def render_pending(doc: dict) -> str:
    """One line for stderr: what ``--detailed-exitcode`` found."""
    where = doc["reference"] or "nothing deployed (no state.json or plan.json)"
    if not doc["pending"]:
        return f"no change against {where}"
    parts = [f"+{doc['instances']['added']}/-{doc['instances']['removed']} instance(s)"]
    if doc["added"]:
        parts.append(f"{len(doc['added'])} unit(s) to start")
    if doc["removed"]:
        parts.append(f"{len(doc['removed'])} to stop")
    if doc["changed"]:
        keys = sorted({k for ks in doc["changed"].values() for k in ks})
        parts.append(f"{len(doc['changed'])} changed ({', '.join(keys)})")
    if doc["deploy"]:
        parts.append(f"deploy: {', '.join(doc['deploy'])}")
    return f"changes pending against {where}: {'; '.join(parts)}"
