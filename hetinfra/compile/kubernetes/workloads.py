"""The serving workloads: a ``Deployment`` per single-node unit, a ``LeaderWorkerSet`` per multi-node
pipeline unit (group size = nodes of one replica; the whole group is recreated when one of its pods
restarts, since a vLLM pipeline cannot lose a stage). A prefill/decode bundle's replica is one pod:
a container per engine and the hop in front of them (:func:`_bundle_pod`); across nodes, one
LeaderWorkerSet group (:mod:`hetinfra.compile.kubernetes.bundle_group`).

The container runs the same pinned image (:func:`hetinfra.compile.engine.vllm_image`) and the same
``vllm serve`` command line (:func:`hetinfra.compile.engine.vllm_serve_command`, the VM paths'
function) with the same environment (:func:`serve_envs`); the secrets come from a Kubernetes
Secret, never from the manifests. Probes hit vLLM's ``/health``: a startup probe gives the weight
download and CUDA graph capture the time the SkyPilot readiness probe gives them, then liveness
and readiness take over.
"""

from __future__ import annotations

import shlex

from hetinfra.compile.bundle import engines, hop_args
from hetinfra.compile.kubernetes.bundle_group import bundle_group
from hetinfra.compile.kubernetes.gateway import GATEWAY_IMAGE
from hetinfra.compile.kubernetes.nodes import placement
from hetinfra.compile.ray import RayNode, ray_pipeline_script
from hetinfra.compile.engine import (INITIAL_DELAY_MULTI_NODE_S, INITIAL_DELAY_SINGLE_NODE_S, serve_envs, vllm_image,
                                     vllm_serve_command)
from hetinfra.compile.unit import DeployedUnit

__all__ = ["LWS_API", "labels", "secret_name", "workload"]

LWS_API = "leaderworkerset.x-k8s.io/v1"
PROBE_PERIOD_S = 10
#: where a pipeline pod finds its address, its leader's and its rank (the LeaderWorkerSet's environment)
POD_NODE = RayNode(node_ip="$POD_IP", head_ip="$LWS_LEADER_ADDRESS", rank="${LWS_WORKER_INDEX:-0}")
#: the Secret holding VLLM_API_KEY, HF_TOKEN (optional) and HETINFRA_API_KEY; `hetinfra apply` writes it
#: from the environment, or the cluster owner creates it (docs/kubernetes.md)
SECRET_KEYS = (("VLLM_API_KEY", False), ("HF_TOKEN", True))


def secret_name(service: str) -> str:
    return f"{service}-secrets"


def labels(service: str, unit: DeployedUnit, model_slug: str) -> dict:
    return {"app.kubernetes.io/managed-by": "hetinfra", "app.kubernetes.io/part-of": service,
            "hetinfra.dev/unit": unit.name, "hetinfra.dev/model": model_slug}


def _env(service: str, unit: DeployedUnit) -> list[dict]:
    env = [{"name": k, "value": v} for k, v in serve_envs(unit).items()]
    env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret_name(service), "key": k, "optional": optional}}}
            for k, optional in SECRET_KEYS]
    return env


def _probes(unit: DeployedUnit) -> dict:
    delay = INITIAL_DELAY_SINGLE_NODE_S if unit.num_nodes == 1 else INITIAL_DELAY_MULTI_NODE_S
    get = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": PROBE_PERIOD_S}
    return {"startupProbe": dict(get, failureThreshold=delay // PROBE_PERIOD_S),
            "livenessProbe": dict(get, failureThreshold=3, timeoutSeconds=5),
            "readinessProbe": dict(get, failureThreshold=3, timeoutSeconds=5)}


def _pipeline_script(unit: DeployedUnit, role: str) -> str:
    """A Ray pipeline's pod: the VM paths' script (hetinfra.compile.ray), head or worker by template."""
    return ray_pipeline_script(unit, POD_NODE, f"exec {vllm_serve_command(unit)}\n", role=role)


def _mixed_script(unit: DeployedUnit, *, leader: bool) -> str:
    """A mixed-GPU pipeline (vLLM's mp backend, stage r on rank r), as on the Pulumi VMs: rank 0
    serves the API, the others run headless."""
    return (f"set -eu\nexport VLLM_HOST_IP=\"{POD_NODE.node_ip}\" HEAD_IP=\"{POD_NODE.head_ip}\" "
            f"NODE_RANK=\"{POD_NODE.rank}\"\n"
            f"exec {vllm_serve_command(unit)}{'' if leader else ' --headless'}\n")


def _pod(service: str, unit: DeployedUnit, pod_labels: dict, script: str, *, serving: bool, rank: int = 0) -> dict:
    where = placement(service, unit, rank)
    gpus = unit.tp if unit.mixed else unit.gpus_per_instance  # a mixed pipeline's node runs one TP stage
    container = {
        "name": "vllm", "image": vllm_image(unit.vllm_version),
        "command": ["/bin/bash", "-c", script],
        "env": _env(service, unit) + [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": unit.port}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        # vLLM's workers share tensors through /dev/shm (the VM path runs the container with --ipc host)
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    if serving:
        container.update(_probes(unit))
    return {"metadata": {"labels": pod_labels},
            "spec": {"nodeSelector": where.node_selector, "tolerations": where.tolerations,
                     "terminationGracePeriodSeconds": 60, "containers": [container],
                     "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]}}


def _bundle_pod(service: str, unit: DeployedUnit, pod_labels: dict) -> dict:
    """A prefill/decode bundle's replica: one pod on one node (so its KV moves over the node's NVLink,
    as planned), a container per engine (its GPUs from the device plugin) and the hop in front of
    them on the unit's port (hetinfra.compile.bundle), which the Service and the probes address."""
    pod = _pod(service, unit, pod_labels, "", serving=False)
    base = pod["spec"]["containers"][0]
    containers = []
    for i, e in enumerate(engines(unit)):
        envs = [{"name": k, "value": v} for k, v in e.envs.items() if k != "CUDA_VISIBLE_DEVICES"]
        get = {"httpGet": {"path": "/health", "port": e.port}, "periodSeconds": PROBE_PERIOD_S}
        containers.append(dict(base, name=f"{e.role}-{i}", command=["/bin/bash", "-c", f"exec {e.command}\n"],
                               env=base["env"] + envs, ports=[{"containerPort": e.port}],
                               resources={"limits": {"nvidia.com/gpu": len(e.gpus)},
                                          "requests": {"nvidia.com/gpu": len(e.gpus)}},
                               startupProbe=dict(get, failureThreshold=INITIAL_DELAY_SINGLE_NODE_S // PROBE_PERIOD_S),
                               livenessProbe=dict(get, failureThreshold=3, timeoutSeconds=5)))
    hop = " ".join(shlex.quote(x) for x in hop_args(unit))
    script = (f"cat > /tmp/hop-plan.json <<'HOPPLAN'\n{unit.hop_plan}\nHOPPLAN\n"
              'pip install -q --no-cache-dir "$HETINFRA_PACKAGE"\n'
              f'HETINFRA_API_KEY="$VLLM_API_KEY" exec hetinfra gateway /tmp/hop-plan.json {hop}\n')
    containers.append({"name": "hop", "image": GATEWAY_IMAGE, "command": ["/bin/sh", "-c", script],
                       "env": [{"name": "HETINFRA_PACKAGE", "value": unit.hetinfra_package}]
                       + [v for v in _env(service, unit) if "valueFrom" in v],  # the engines' key, asked of clients too
                       "ports": [{"name": "http", "containerPort": unit.port}],
                       "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                       # as the regional gateway's: /health is 503 while the engines start, which gates traffic
                       # but must not restart the hop
                       "startupProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10, "failureThreshold": 30},
                       "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
                       "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10}})
    pod["spec"]["containers"] = containers
    return pod


def _replicas(unit: DeployedUnit) -> dict:
    # an autoscaled unit's count belongs to its scaler (minReplicas = the plan's count): applying a
    # replicas field would reset it on every apply
    return {} if unit.autoscaling else {"replicas": unit.replicas}


def workload(service: str, namespace: str, unit: DeployedUnit, model_slug: str) -> dict:
    """The unit's Deployment (one node per replica) or LeaderWorkerSet (a multi-node pipeline)."""
    pod_labels = labels(service, unit, model_slug)
    meta = {"name": unit.name, "namespace": namespace, "labels": pod_labels}
    if unit.role_nodes:  # a prefill/decode bundle across nodes: a group per replica (kubernetes.bundle_group)
        return bundle_group(unit, namespace, meta, _replicas(unit),
                            lambda rank: _pod(service, unit, pod_labels, "", serving=False, rank=rank))
    if unit.num_nodes == 1:
        template = _bundle_pod(service, unit, pod_labels) if unit.bundle else \
            _pod(service, unit, pod_labels, f"exec {vllm_serve_command(unit)}\n", serving=True)
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {**_replicas(unit), "selector": {"matchLabels": {"hetinfra.dev/unit": unit.name}},
                         "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                         "template": template}}
    if unit.mixed:
        if len(set(unit.stages[1:])) > 1:
            raise ValueError(f"{unit.name}: a LeaderWorkerSet runs one worker pod template; the stages after the "
                             f"first must share an instance type ({unit.stages})")
        leader, worker = _mixed_script(unit, leader=True), _mixed_script(unit, leader=False)
    else:
        leader, worker = _pipeline_script(unit, "head"), _pipeline_script(unit, "worker")
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {**_replicas(unit), "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {
                         "size": unit.num_nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                         "leaderTemplate": _pod(service, unit, pod_labels, leader, serving=True),
                         "workerTemplate": _pod(service, unit, pod_labels, worker, serving=False, rank=1)}}}
