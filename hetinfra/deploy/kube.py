"""``deploy.target: kubernetes``: apply, destroy and read the live state of the manifests under
``OUT/kubernetes/<cloud>-<region>/`` in the cluster of each cloud region (kubeconfig context from
``deploy.kubernetes.clusters``), through hetinfra.deploy.kube_api.

- **apply**: the Secret ``<service>-secrets`` from the environment (VLLM_API_KEY, HF_TOKEN,
  HETINFRA_API_KEY; never written to disk), then every object in the kustomization's order by
  server-side apply; objects of units that left the plan are deleted after the new ones are
  applied. The preview names each object created, updated or deleted, and asks first.
- **destroy**: every object the state lists, in reverse order (the namespace is kept: it may hold
  what the cluster's owner put there).
- **live** (``status``, ``replan``): per unit the workload's desired and ready replicas and its
  pods. A pod the controller has not recreated yet, or one pending, is being replaced; a pod
  pending because no node can take it (``PodScheduled=False``, reason ``Unschedulable``: the
  autoscaler found no capacity) for :data:`hetinfra.deploy.drift.PATIENCE_S` is **stalled**, as a
  VM group short of capacity is, so ``replan`` moves those replicas elsewhere.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from hetinfra.deploy.kube_api import Cluster, connect
from hetinfra.deploy.state import DeployState, plan_sha
from hetinfra.errors import InvalidInputError

__all__ = ["KubeApply", "PlanView", "destroy_kubernetes", "prepare_apply", "read_kube_units", "read_plan",
           "ready_replicas", "render_object_changes", "wants_kubernetes"]

SECRET_KEYS = ("VLLM_API_KEY", "HF_TOKEN", "HETINFRA_API_KEY")


@dataclass(frozen=True)
class PlanView:
    """What this module reads from plan.json."""

    service: str
    sha: str  # the plan's digest (state.json plan_sha256)
    target: str  # deploy.target
    allocations: list[dict]  # those a cluster runs (not custom clouds, not mixed pipelines of 3+ GPU kinds)
    clusters: dict[str, dict]  # deploy.kubernetes.clusters, keyed cloud/region
    kubeconfig: str | None
    port: int  # vLLM's port (deploy.port)


def read_plan(plan: dict) -> PlanView:
    """The one reader of plan.json here (swap it when the plan becomes a typed document)."""
    deploy = plan.get("deploy") or {}
    kube = deploy.get("kubernetes") or {}
    return PlanView(plan["service"], plan_sha(plan), deploy.get("target", "vms"),
                    [a for a in plan["allocations"] if not a.get("custom_cloud") and _fits_lws(a)],
                    dict(kube.get("clusters") or {}), kube.get("kubeconfig"), int(deploy.get("port", 8000)))


def _fits_lws(alloc: dict) -> bool:
    """A unit a cluster runs: any but a mixed pipeline whose stages after the first differ
    (hetinfra.compile.kubernetes.render skips those)."""
    later = {(s["instance_type"], s["gpu"]) for s in (alloc.get("stages") or [])[1:]}
    return len(later) <= 1


def wants_kubernetes(plan: dict | None, target: str) -> bool:
    return target == "kubernetes" or (target == "all" and plan is not None and read_plan(plan).target == "kubernetes")


def _cloud_region(cluster: str) -> tuple[str, str]:
    cloud, region = cluster.split("-", 1)
    return cloud, region


def _manifests(out: Path) -> dict[str, list[dict]]:
    """cluster -> objects in the kustomization's order, read from OUT/kubernetes/."""
    root = out / "kubernetes"
    if not root.is_dir():
        raise InvalidInputError(f"no kubernetes/ folder in {out}",
                                hint="set deploy.target: kubernetes in the spec and run `hetinfra plan` again")
    clusters = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        files = yaml.safe_load((d / "kustomization.yaml").read_text())["resources"]
        clusters[d.name] = [o for f in files for o in yaml.safe_load_all((d / f).read_text()) if o]
    return clusters


def _in_cluster(alloc: dict, cloud: str, region: str) -> bool:
    return alloc["path"] == "kubernetes" and (alloc["cloud"], alloc["region"]) == (cloud, region)


def _ref(obj: dict) -> list:
    return [obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]]


def _secret(service: str, namespace: str, env: dict) -> dict:
    if not env.get("VLLM_API_KEY"):
        raise InvalidInputError("VLLM_API_KEY is not set: the units' Secret needs it",
                                hint="export VLLM_API_KEY=... (and HF_TOKEN for gated models, HETINFRA_API_KEY for "
                                     "the gateway's clients)")
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"{service}-secrets", "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "hetinfra"}},
            "stringData": {k: env[k] for k in SECRET_KEYS if env.get(k)}}


def _connect_all(clusters: list[str], view: PlanView | None, state: DeployState) -> dict[str, Cluster]:
    """Each cluster by the plan's settings, else by what the last apply recorded in state.json."""
    recorded = state.doc.get("kubernetes") or {}
    out = {}
    for c in clusters:
        cloud, region = _cloud_region(c)
        settings = (view.clusters.get(f"{cloud}/{region}") if view else None) or recorded.get(c) or {}
        out[c] = connect(c, settings, (view.kubeconfig if view else None) or recorded.get(c, {}).get("kubeconfig"))
    return out


def _object_changes(api: dict[str, Cluster], wanted: dict[str, list[dict]], gone: dict[str, list[list]]) -> list[dict]:
    """Per object: ``create`` (not in the cluster), ``apply`` (there: server-side apply updates it) or ``delete``."""
    rows = [{"cluster": c, "action": "apply" if api[c].get(*_ref(o)) else "create", "api_version": o["apiVersion"],
             "kind": o["kind"], "namespace": o["metadata"].get("namespace"), "name": o["metadata"]["name"]}
            for c, objs in wanted.items() for o in objs]
    rows += [{"cluster": c, "action": "delete", "api_version": r[0], "kind": r[1], "namespace": r[2], "name": r[3]}
             for c, refs in gone.items() for r in refs]
    return rows


def render_object_changes(rows: list[dict]) -> str:
    mark = {"create": "+", "apply": "~", "delete": "-"}
    return "\n".join(f"  {mark[r['action']]} {r['cluster']:<24} {r['kind']:<24} {r['name']}" for r in rows)


@dataclass
class KubeApply:
    """A prepared apply: its preview, then (once confirmed) its steps, one per cluster, which the
    caller runs with hetinfra.deploy.apply's run_steps (the same resume rule as the VM path)."""

    out: Path
    view: PlanView
    state: DeployState
    after: list[dict]  # what runs once applied (state.json allocations)
    object_changes: list[dict]
    steps: list[str]
    wanted: dict[str, list[dict]]
    gone: dict[str, list[list]]
    api: dict[str, Cluster]
    env: dict

    def begin(self) -> None:
        self.state.doc["service"] = self.view.service
        self.state.begin("apply", self.view.sha, self.steps)

    def do_step(self, step: str) -> None:
        c = step.split(":", 1)[1]
        service = self.view.service
        objs = self.wanted.get(c, [])
        ns = next((o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"), None)
        for o in objs:
            self.api[c].apply(o)
            if o["kind"] == "Namespace":  # the Secret right after its namespace, before the pods need it
                self.api[c].apply(_secret(service, ns, self.env))
        for r in reversed(self.gone.get(c, [])):
            self.api[c].delete(*r)
        cloud, region = _cloud_region(c)
        mine = [a for a in self.after if _in_cluster(a, cloud, region)]
        self.state.replace_running(lambda a: not _in_cluster(a, cloud, region), mine)
        self.state.doc.setdefault("kubernetes", {})[c] = {
            "context": (self.view.clusters.get(f"{cloud}/{region}") or {}).get("context"),
            "kubeconfig": self.view.kubeconfig, "namespace": ns,
            "objects": [_ref(o) for o in objs] + ([_ref(_secret(service, ns, self.env))] if ns else [])}
        for a in mine:
            self.state.doc["endpoints"][a["deployment_unit"]] = [
                f"http://{a['deployment_unit']}.{ns}.svc:{self.view.port}/v1"]

    def finish(self, echo: Callable[[str], None]) -> DeployState:
        self.state.doc["plan_sha256"] = self.view.sha
        self.state.finish()
        echo(f"Applied: {len(self.state.allocations)} unit(s) running; state in {self.state.path}")
        return self.state


def prepare_apply(out: Path, plan: dict, *, env: dict | None = None) -> KubeApply:
    """Read OUT/kubernetes/, reach every cluster and diff against it (nothing changes yet)."""
    env = dict(os.environ) if env is None else env
    view = read_plan(plan)
    state = DeployState.load(out, view.service)
    _secret(view.service, "check", env)  # a missing key stops here, before anything is asked or changed
    wanted = _manifests(out)
    api = _connect_all(sorted(set(wanted) | set(state.doc.get("kubernetes") or {})), view, state)
    new_refs = {tuple(_ref(o)) for objs in wanted.values() for o in objs}
    gone = {c: [r for r in rec.get("objects", []) if tuple(r) not in new_refs and r[1] != "Namespace"]
            for c, rec in (state.doc.get("kubernetes") or {}).items()}
    gone = {c: refs for c, refs in gone.items() if refs}
    after = [a for a in state.allocations if a["path"] != "kubernetes"] + [
        dict(a, path="kubernetes") for a in view.allocations]
    return KubeApply(out, view, state, after, _object_changes(api, wanted, gone),
                     [f"kubernetes:{c}" for c in sorted(set(wanted) | set(gone))], wanted, gone, api, env)


def destroy_kubernetes(out: Path, state: DeployState, *, echo: Callable[[str], None]) -> list[dict]:
    """Delete what the state lists in every cluster (confirmation is the caller's); returns what was
    deleted (``apply --json``'s object rows)."""
    recorded = state.doc.get("kubernetes") or {}
    api = _connect_all(sorted(recorded), None, state)
    rows = []
    for c in sorted(recorded):
        for ref in reversed(recorded[c].get("objects", [])):
            if ref[1] != "Namespace" and api[c].delete(*ref):
                rows.append({"cluster": c, "action": "delete", "api_version": ref[0], "kind": ref[1],
                             "namespace": ref[2], "name": ref[3]})
        cloud, region = _cloud_region(c)
        state.replace_running(lambda a: not _in_cluster(a, cloud, region), [])
        for unit in [u for u in state.doc["endpoints"] if u not in {a["deployment_unit"] for a in state.allocations}]:
            state.doc["endpoints"].pop(unit, None)
        del recorded[c]
        state.save()
    if rows:
        echo(render_object_changes(rows))
    return rows


def ready_replicas(state_doc: dict, alloc: dict) -> int:
    """Ready replicas of a kubernetes unit now (its workload's status; 0 when it is not there)."""
    c = f"{alloc['cloud']}-{alloc['region']}"
    rec = (state_doc.get("kubernetes") or {}).get(c)
    if not rec:
        return 0
    cluster = connect(c, rec, rec.get("kubeconfig"))
    nodes = int(alloc.get("nodes_per_replica") or 1)
    kind, api_version = _workload_kind(nodes)
    obj = cluster.get(api_version, kind, rec["namespace"], alloc["deployment_unit"])
    return int(((obj or {}).get("status") or {}).get("readyReplicas") or 0)


def _workload_kind(nodes: int) -> tuple[str, str]:
    return ("Deployment", "apps/v1") if nodes == 1 else ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1")


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


def _unschedulable_since(pod: dict) -> float | None:
    """When the scheduler found no node for a pending pod (None: not pending for capacity)."""
    if (pod.get("status") or {}).get("phase") != "Pending":
        return None
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
            return _seconds(cond.get("lastTransitionTime")) or 0.0
    return None


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def read_kube_units(state: DeployState, units: list, *, read_at: str, patience_s: float) -> None:
    """Fill each kubernetes :class:`hetinfra.deploy.drift.UnitLive` from its cluster."""
    recorded = state.doc.get("kubernetes") or {}
    by_cluster: dict[str, list] = {}
    for u in units:
        by_cluster.setdefault(f"{u.cloud}-{u.region}", []).append(u)
    api = _connect_all(sorted(c for c in by_cluster if c in recorded), None, state)
    now_s = _seconds(read_at)
    for c, us in sorted(by_cluster.items()):
        for u in us:
            u.source = "kubernetes API"
            if c not in api:
                u.notes.append(f"no cluster recorded for {c} in state.json")
                continue
            _read_unit(api[c], recorded[c]["namespace"], u, now_s, patience_s)


def _read_unit(cluster: Cluster, ns: str, u, now_s: float, patience_s: float) -> None:
    kind, api_version = _workload_kind(u.nodes)
    obj = cluster.get(api_version, kind, ns, u.unit)
    if obj is None:  # deleted outside hetinfra: only an apply brings it back
        u.live, u.lost = 0, u.desired * u.nodes
        return
    status = obj.get("status") or {}
    u.live = int(status.get("readyReplicas") or 0)
    pods = cluster.pods(ns, f"hetinfra.dev/unit={u.unit}")
    pending = [p for p in pods if (p.get("status") or {}).get("phase") == "Pending"]
    since = [s for p in pending if (s := _unschedulable_since(p)) is not None]
    u.running = len(pods) - len(pending)
    u.unhealthy = sum(1 for p in pods if p not in pending and not _ready(p))
    missing = max(0, u.desired * u.nodes - len(pods))  # lost pods the controller has not recreated yet
    u.replacing = len(pending) + missing
    u.stalled = sum(1 for s in since if now_s - s >= patience_s)
    if since:
        first = min(since)
        u.short_since = dt.datetime.fromtimestamp(first, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        u.notes.append(f"{len(since)} pod(s) pending: no node for them (autoscaler out of capacity?)")
