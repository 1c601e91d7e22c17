"""``deploy.target: kubernetes``: what apply, destroy, status and replan need besides the Pulumi
project ``OUT/pulumi/kubernetes/`` (program hetinfra.stacks.kubernetes), which hetinfra.deploy.apply
runs through hetinfra.deploy.pulumi_driver exactly as it runs the VM stacks (preview, confirmation,
``up --refresh``, secrets on stdin, ``pulumi destroy``).

- **before the preview**: every cluster the plan's units need has a kubeconfig context that the
  kubeconfig names (:func:`check_clusters`), so a wrong context stops before anything is asked;
- **after up / destroy**: state.json's bookkeeping (:func:`record_up`, :func:`forget`): the units
  running, the stack and its outputs under ``pulumi.kubernetes``, and per cluster the context,
  kubeconfig and namespace (the stack's ``clusters`` output) where the live state is read;
- **live** (``status``, ``replan``): per unit the workload's desired and ready replicas and its
  pods. A pod the controller has not recreated yet, or one pending, is being replaced; a pod
  pending because no node can take it (``PodScheduled=False``, reason ``Unschedulable``: the
  autoscaler found no capacity) for :data:`hetinfra.deploy.drift.PATIENCE_S` is **stalled**, as a
  VM group short of capacity is, so ``replan`` moves those replicas elsewhere.
"""

from __future__ import annotations

import datetime as dt

from hetinfra.clientkeys import parse_client_keys
from hetinfra.deploy.kube_api import Cluster, connect
from hetinfra.deploy.state import DeployState
from hetinfra.document import Allocation, Plan
from hetinfra.document.state import RunningAllocation, State

__all__ = ["PROJECT", "check_clusters", "cluster_units", "desired", "forget", "read_kube_units", "ready_replicas",
           "record_up", "secrets_from_env", "wants_kubernetes"]

#: the Pulumi project folder OUT/pulumi/<PROJECT> and its key in state.json's ``pulumi`` (never a cloud)
PROJECT = "kubernetes"


def cluster_units(plan: Plan) -> list[Allocation]:
    """The units a cluster runs: not custom clouds, not mixed pipelines whose stages after the first
    differ (hetinfra.compile.kubernetes.render skips those)."""
    return [a for a in plan.allocations
            if not a.custom_cloud and len({(s.instance_type, s.gpu) for s in (a.stages or [])[1:]}) <= 1]


def wants_kubernetes(plan: Plan | None, target: str) -> bool:
    return target == "kubernetes" or (target == "all" and plan is not None and plan.deploy.target == "kubernetes")


def _cloud_region(cluster: str) -> tuple[str, str]:
    cloud, region = cluster.split("-", 1)
    return cloud, region


def secrets_from_env(env: dict) -> dict[str, str]:
    """The project's Pulumi secrets (the program's Secret ``<service>-secrets``): ``hetinfra:apiKey``
    and ``hetinfra:hfToken`` as for the VMs, ``hetinfra:gatewayApiKey`` from HETINFRA_API_KEY."""
    from hetinfra.deploy.pulumi_driver import secrets_from_env as vm_secrets

    out = vm_secrets(env)
    if parse_client_keys(env.get("HETINFRA_API_KEY")):  # checked here, not at the gateway's start
        out["hetinfra:gatewayApiKey"] = env["HETINFRA_API_KEY"]
    return out


def _connect_all(clusters: list[str], plan: Plan | None, state: DeployState) -> dict[str, Cluster]:
    """Each cluster by the plan's settings, else by what the last apply recorded in state.json."""
    recorded = state.model.kubernetes
    kube = plan.deploy.kubernetes if plan else None
    out = {}
    for c in clusters:
        cloud, region = _cloud_region(c)
        planned = kube.clusters.get(f"{cloud}/{region}") if kube else None
        settings = planned or recorded.get(c)
        kubeconfig = (kube.kubeconfig if kube else None) or (recorded[c].kubeconfig if c in recorded else None)
        out[c] = connect(c, settings.context if settings else None, kubeconfig)
    return out


def check_clusters(plan: Plan, state: DeployState) -> None:
    """Every cluster the plan's units need has a context the kubeconfig names (InvalidInputError,
    exit 2, otherwise); nothing is sent to the clusters."""
    _connect_all(sorted({f"{a.cloud}-{a.region}" for a in cluster_units(plan)}), plan, state)


def desired(plan: Plan, state: DeployState) -> list[RunningAllocation]:
    """What runs after the apply: the units of other paths as they are, and every unit a cluster runs."""
    return [a for a in state.running if a.path != PROJECT] + [
        RunningAllocation.of(a, PROJECT) for a in cluster_units(plan)]


def record_up(state: DeployState, plan: Plan, after: list[RunningAllocation], stack: str, outputs: dict) -> None:
    """state.json after ``pulumi up`` of the project: the units, the stack and its outputs, the
    clusters (from the ``clusters`` output) and the units' in-cluster endpoints."""
    state.replace_running(lambda a: a.path != PROJECT, [a for a in after if a.path == PROJECT])
    state.record_kubernetes(PROJECT, stack, outputs)
    state.set_service(plan.service)


def forget(state: DeployState) -> None:
    """state.json after ``pulumi destroy`` of the project: no kubernetes unit, stack or cluster."""
    state.replace_running(lambda a: a.path != PROJECT, [])
    state.forget_kubernetes(PROJECT)


def ready_replicas(state: State, alloc: RunningAllocation) -> int:
    """Ready replicas of a kubernetes unit now (its workload's status; 0 when it is not there)."""
    c = f"{alloc.cloud}-{alloc.region}"
    rec = state.kubernetes.get(c)
    if not rec:
        return 0
    cluster = connect(c, rec.context, rec.kubeconfig)
    kind, api_version = _workload_kind(alloc.nodes_per_replica)
    obj = cluster.workload(api_version, kind, rec.namespace, alloc.deployment_unit)
    return obj.ready if obj else 0


def _workload_kind(nodes: int) -> tuple[str, str]:
    return ("Deployment", "apps/v1") if nodes == 1 else ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1")


def read_kube_units(state: DeployState, units: list, *, read_at: str, patience_s: float) -> None:
    """Fill each kubernetes :class:`hetinfra.deploy.drift.UnitLive` from its cluster."""
    recorded = state.model.kubernetes
    by_cluster: dict[str, list] = {}
    for u in units:
        by_cluster.setdefault(f"{u.cloud}-{u.region}", []).append(u)
    api = _connect_all(sorted(c for c in by_cluster if c in recorded), None, state)
    now_s = dt.datetime.strptime(read_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
    for c, us in sorted(by_cluster.items()):
        for u in us:
            u.source = "kubernetes API"
            if c not in api:
                u.notes.append(f"no cluster recorded for {c} in state.json")
                continue
            _read_unit(api[c], recorded[c].namespace, u, now_s, patience_s)


def _read_unit(cluster: Cluster, ns: str, u, now_s: float, patience_s: float) -> None:
    kind, api_version = _workload_kind(u.nodes)
    obj = cluster.workload(api_version, kind, ns, u.unit)
    if obj is None:  # deleted outside hetinfra: only an apply brings it back
        u.live, u.lost = 0, u.desired * u.nodes
        return
    u.live = obj.ready
    pods = cluster.pods(ns, f"hetinfra.dev/unit={u.unit}")
    pending = [p for p in pods if p.pending]
    since = [s for p in pending if (s := p.unschedulable_since()) is not None]
    u.running = len(pods) - len(pending)
    u.unhealthy = sum(1 for p in pods if not p.pending and not p.ready)
    missing = max(0, u.desired * u.nodes - len(pods))  # lost pods the controller has not recreated yet
    u.replacing = len(pending) + missing
    u.stalled = sum(1 for s in since if now_s - s >= patience_s)
    if since:
        first = min(since)
        u.short_since = dt.datetime.fromtimestamp(first, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        u.notes.append(f"{len(since)} pod(s) pending: no node for them (autoscaler out of capacity?)")
