"""Around each workload: its ``Service`` (the pipeline's leader pods only), a ``PodDisruptionBudget``
(a node drain takes at most one replica at a time), and for ``deploy.autoscale`` units scaling
between the plan's count and its autoscaling bound on vLLM's own signals: queued requests
(``vllm:num_requests_waiting``) and KV-cache use (``vllm:kv_cache_usage_perc``), through an HPA on
custom metrics (a Prometheus adapter serving them as ``vllm_num_requests_waiting`` and
``vllm_kv_cache_usage_perc``) or a KEDA ``ScaledObject`` querying Prometheus directly.
"""

from __future__ import annotations

from hetinfra.compile.kubernetes.workloads import LWS_API
from hetinfra.compile.unit import DeployedUnit

__all__ = ["scaling_objects", "service", "target_ref"]

#: scale out when a replica has more than this many requests waiting on average (vLLM queues only
#: what its batch cannot hold, so a queue means the replica is saturated)
WAITING_TARGET = 2
#: ... or its KV cache is this full on average (preemptions start near 1.0)
KV_CACHE_TARGET = 0.8
LEADER_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def target_ref(unit: DeployedUnit) -> dict:
    if unit.num_nodes == 1:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "name": unit.name}
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": unit.name}


def _selector(unit: DeployedUnit) -> dict:
    sel = {"hetinfra.dev/unit": unit.name}
    if unit.num_nodes > 1:
        sel[LEADER_LABEL] = "0"  # vllm serve runs on the leader; workers only hold pipeline stages
    return sel


def service(namespace: str, unit: DeployedUnit, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": unit.name, "namespace": namespace, "labels": labels},
            "spec": {"type": "ClusterIP", "selector": _selector(unit),
                     "ports": [{"name": "http", "port": unit.port, "targetPort": "http", "protocol": "TCP"}]}}


def _pdb(namespace: str, unit: DeployedUnit, labels: dict) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": unit.name, "namespace": namespace, "labels": labels},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"hetinfra.dev/unit": unit.name}}}}


def _hpa(namespace: str, unit: DeployedUnit, labels: dict) -> dict:
    def pods_metric(name: str, value: str) -> dict:
        return {"type": "Pods", "pods": {"metric": {"name": name},
                                         "target": {"type": "AverageValue", "averageValue": value}}}

    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": unit.name, "namespace": namespace, "labels": labels},
            "spec": {"scaleTargetRef": target_ref(unit), "minReplicas": unit.replicas,
                     "maxReplicas": unit.max_replicas,
                     "metrics": [pods_metric("vllm_num_requests_waiting", str(WAITING_TARGET)),
                                 pods_metric("vllm_kv_cache_usage_perc", f"{int(KV_CACHE_TARGET * 1000)}m")],
                     # a new GPU replica takes minutes to serve: do not scale in on a short lull
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}}}


def _scaled_object(namespace: str, unit: DeployedUnit, labels: dict, prometheus: str) -> dict:
    where = f'namespace="{namespace}",pod=~"{unit.name}-.*"'

    def trigger(query: str, threshold: float) -> dict:
        return {"type": "prometheus", "metadata": {"serverAddress": prometheus, "query": query,
                                                  "threshold": f"{threshold:g}"}}

    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": unit.name, "namespace": namespace, "labels": labels},
            "spec": {"scaleTargetRef": target_ref(unit),
                     "minReplicaCount": unit.replicas, "maxReplicaCount": unit.max_replicas, "cooldownPeriod": 600,
                     "triggers": [trigger(f"avg(vllm:num_requests_waiting{{{where}}})", WAITING_TARGET),
                                  trigger(f"avg(vllm:kv_cache_usage_perc{{{where}}})", KV_CACHE_TARGET)]}}


def scaling_objects(namespace: str, unit: DeployedUnit, labels: dict, kube: dict) -> list[dict]:
    """Service, PodDisruptionBudget and, for an autoscaling unit, its HPA or ScaledObject."""
    objs = [service(namespace, unit, labels), _pdb(namespace, unit, labels)]
    if unit.autoscaling:
        if kube["scaler"] == "keda":
            objs.append(_scaled_object(namespace, unit, labels, kube["prometheus_url"]))
        else:
            objs.append(_hpa(namespace, unit, labels))
    return objs
