"""A prefill/decode bundle across nodes on Kubernetes: one ``LeaderWorkerSet`` group per replica
(hetinfra.compile.bundle_nodes on the VMs; the same engines, ports, transport and hop).

- **Leader** (rank 0, the first prefill node): a container per prefill engine and the hop on the
  unit's port, which the unit's Service addresses (leaders only) and which reaches the workers'
  engines by their pods' DNS names (``<leader pod>-<k>.<unit>.<namespace>``: the LeaderWorkerSet's
  headless Service).
- **Workers** (ranks 1..): a container per engine of their role (one worker template: the workers
  share one role and instance type, so a bundle with several prefill nodes is refused here).
- Each role's pods sit on its own instance type's pool (``nodeSelector`` per role: heterogeneous P/D),
  every engine container holds its share of the node's RDMA devices (EKS: ``vpc.amazonaws.com/efa``,
  which Karpenter answers with an EFA interface on every network card and the EFA device plugin
  exposes) and ``IPC_LOCK`` for RDMA memory registration, and NIXL's side channel is the pod's IP.
- The group is placed together: ``leaderworkerset.sigs.k8s.io/exclusive-topology`` on the EC2
  network-topology label closest to the instances, so one replica's pods share the same network
  node, and ``RecreateGroupOnPodRestart``: a lost decode pod recreates the whole replica, as a dead
  peer node stops the replica on the VMs.

GKE and AKS are refused (exit 2): A3 Ultra's RoCE needs GKE's RDMA multi-networking objects, and
InfiniBand joins only the VMs of one scale set, which AKS's node auto-provisioning does not give.
"""

from __future__ import annotations

import shlex
from typing import Callable

from hetinfra.compile.bundle import hop_args
from hetinfra.compile.bundle_nodes import EFA_INTERFACES, across_nodes_refusal, endpoint_key, node_engines
from hetinfra.compile.kubernetes.gateway import GATEWAY_IMAGE
from hetinfra.compile.engine import INITIAL_DELAY_MULTI_NODE_S, BundleEngine
from hetinfra.compile.unit import DeployedUnit
from hetinfra.errors import InvalidInputError

__all__ = ["EXCLUSIVE_TOPOLOGY", "bundle_group"]

#: the LeaderWorkerSet annotation that keeps a group's pods in one topology domain, one group per domain
EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
#: EC2 instance topology: the network node nearest the instance (EKS labels nodes of the types that have it)
AWS_NEAREST_NETWORK_NODE = "topology.k8s.aws/network-node-layer-3"
PROBE_PERIOD_S = 10


def _rdma_resources(unit: DeployedUnit, rank: int, engines: int) -> dict:
    """One engine container's share of its node's EFA devices."""
    return {"vpc.amazonaws.com/efa": max(1, EFA_INTERFACES.get(unit.node_instance_type(rank), 1) // engines)}


def _engine_containers(base: dict, unit: DeployedUnit, rank: int) -> list[dict]:
    """The containers of node ``rank``'s engines: its GPUs and EFA share, NIXL at the pod's IP."""
    es: list[BundleEngine] = node_engines(unit, rank)
    out = []
    for i, e in enumerate(es):
        envs = [{"name": k, "value": v} for k, v in e.envs.items()
                if k not in ("CUDA_VISIBLE_DEVICES", "VLLM_NIXL_SIDE_CHANNEL_HOST")]
        envs.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        res = {"nvidia.com/gpu": len(e.gpus), **_rdma_resources(unit, rank, len(es))}
        get = {"httpGet": {"path": "/health", "port": e.port}, "periodSeconds": PROBE_PERIOD_S}
        out.append(dict(base, name=f"{e.role}-{i}", command=["/bin/bash", "-c", f"exec {e.command}\n"],
                        env=base["env"] + envs, ports=[{"containerPort": e.port}],
                        resources={"limits": dict(res), "requests": dict(res)},
                        securityContext={"capabilities": {"add": ["IPC_LOCK"]}},
                        startupProbe=dict(get, failureThreshold=INITIAL_DELAY_MULTI_NODE_S // PROBE_PERIOD_S),
                        livenessProbe=dict(get, failureThreshold=3, timeoutSeconds=5)))
    return out


def _hop_script(unit: DeployedUnit, namespace: str) -> str:
    """The leader's hop: its own engines at 127.0.0.1, each worker's by its pod's DNS name."""
    worker = node_engines(unit, 1)  # every worker runs rank 1's engines (one worker template)
    extra = " ".join(f'--endpoint "{endpoint_key(unit, e.role)}=http://$POD_NAME-{k}.{unit.name}.{namespace}:{e.port}/v1"'
                     for k in range(1, unit.num_nodes) for e in worker)
    hop = " ".join(shlex.quote(x) for x in hop_args(unit))
    return (f"cat > /tmp/hop-plan.json <<'HOPPLAN'\n{unit.hop_plan}\nHOPPLAN\n"
            'pip install -q --no-cache-dir "$HETINFRA_PACKAGE"\n'
            f'HETINFRA_API_KEY="$VLLM_API_KEY" exec hetinfra gateway /tmp/hop-plan.json {hop} {extra}\n')


def _check(unit: DeployedUnit) -> None:
    refusal = across_nodes_refusal(unit.name, unit.num_nodes, unit.link, unit.cloud, "kubernetes")
    if refusal is not None:
        raise refusal
    workers = {unit.node_role(r) for r in range(1, unit.num_nodes)}
    if len(workers) > 1:
        raise InvalidInputError(
            f"{unit.name}: a LeaderWorkerSet has one worker template, and this bundle's nodes after the first "
            f"run {len(workers)} roles or instance types",
            hint="deploy it with the Pulumi stacks (hetinfra apply OUT --target pulumi)")


def bundle_group(unit: DeployedUnit, namespace: str, meta: dict, replicas: dict, pod: Callable[[int], dict]) -> dict:
    """The unit's LeaderWorkerSet. ``pod(rank)``: the generic pod of node ``rank`` (its placement,
    environment and volumes: workloads._pod), whose container this replaces with the node's own."""
    _check(unit)
    leader, worker = pod(0), pod(1)
    base = leader["spec"]["containers"][0]
    hop = {"name": "hop", "image": GATEWAY_IMAGE, "command": ["/bin/sh", "-c", _hop_script(unit, namespace)],
           "env": [{"name": "HETINFRA_PACKAGE", "value": unit.hetinfra_package},
                   {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
           + [v for v in base["env"] if "secretKeyRef" in v.get("valueFrom", {})],  # the engines' key, asked of clients
           "ports": [{"name": "http", "containerPort": unit.port}],
           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
           # /health is 503 while the engines start, which gates traffic but must not restart the hop
           "startupProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10, "failureThreshold": 30},
           "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
           "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10}}
    for rank, p in ((0, leader), (1, worker)):
        p["spec"]["containers"] = _engine_containers(p["spec"]["containers"][0], unit, rank) + ([hop] if rank == 0 else [])
    annotations = {EXCLUSIVE_TOPOLOGY: AWS_NEAREST_NETWORK_NODE}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": dict(meta, annotations=annotations),
            "spec": {**replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"size": unit.num_nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "leaderTemplate": leader, "workerTemplate": worker}}}
