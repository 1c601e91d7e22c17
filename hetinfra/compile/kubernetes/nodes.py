"""GPU capacity per cluster: where each unit's pods may run, and the objects that bring those nodes.

- **EKS**: a Karpenter ``NodePool`` (karpenter.sh/v1) per planned instance type and purchase option,
  pinned by ``node.kubernetes.io/instance-type`` and ``karpenter.sh/capacity-type``, with one
  ``EC2NodeClass`` (karpenter.k8s.aws/v1) per cluster sized for the largest unit's disk.
- **AKS**: the same ``NodePool`` under node auto-provisioning (Karpenter on AKS), pointing at the
  ``default`` AKSNodeClass that NAP creates.
- **GKE**: a ``ComputeClass`` (cloud.google.com/v1) per instance type and purchase option: machine
  type, accelerator and spot; GKE creates the node pools (nodePoolAutoCreation).

GPU nodes carry the ``nvidia.com/gpu`` taint and only pods that tolerate it land there. A pool's
GPU limit is what its units may use at their autoscaling bound (the plan's count, or 2x with
``deploy.autoscale``), so Karpenter cannot buy more than the plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hetinfra.compile.unit import DeployedUnit
from hetinfra.facts import GCP, fit_label

__all__ = ["GPU_TAINT", "NodePlacement", "node_objects", "placement"]

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
#: catalog GPU -> GKE's cloud.google.com/gke-accelerator value: GCE's accelerator types (hetinfra.facts)
GKE_ACCELERATORS = GCP.gpu_labels
CAPACITY_LABEL = "karpenter.sh/capacity-type"
AKS_SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                  "effect": "NoSchedule"}
GKE_SPOT_TAINT = {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class NodePlacement:
    """Where a unit's pods go: the pool (or compute class) and the pod's selector and tolerations."""

    pool: str
    node_selector: dict
    tolerations: list


def pool_name(service: str, instance_type: str, spot: bool) -> str:
    """One pool per instance type and purchase option of the service: DNS-safe, at most 63 characters."""
    kind = re.sub(r"[^a-z0-9]+", "-", instance_type.lower()).strip("-")
    return fit_label(f"{service}-{kind}-{'spot' if spot else 'od'}")  # shortened names stay distinct


def placement(service: str, unit: DeployedUnit, rank: int = 0) -> NodePlacement:
    """The node selector and tolerations that keep node ``rank`` of ``unit`` on its planned instance
    type and purchase option (a mixed pipeline's ranks differ)."""
    instance_type = unit.node_instance_type(rank)
    pool = pool_name(service, instance_type, unit.spot)
    tolerations = [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    selector = {"node.kubernetes.io/instance-type": instance_type}
    if unit.cloud == "gcp":
        selector["cloud.google.com/compute-class"] = pool
        if unit.spot:
            selector["cloud.google.com/gke-spot"] = "true"
            tolerations.append(GKE_SPOT_TAINT)
    else:
        selector.update({"karpenter.sh/nodepool": pool, CAPACITY_LABEL: "spot" if unit.spot else "on-demand"})
        if unit.spot and unit.cloud == "azure":
            tolerations.append(AKS_SPOT_TAINT)
    return NodePlacement(pool, selector, tolerations)


@dataclass(frozen=True)
class _Nodes:
    """Nodes of one instance type a unit needs at its autoscaling bound."""

    instance_type: str
    gpu: str
    spot: bool
    gpus: int  # GPUs per node the unit uses
    count: int  # nodes at the autoscaling bound


def _node_needs(units: list[DeployedUnit]) -> list[_Nodes]:
    out = []
    for u in units:
        for rank in range(u.num_nodes):
            out.append(_Nodes(u.node_instance_type(rank), u.node_gpu(rank), u.spot,
                              u.tp if u.mixed else u.node_gpus(rank), u.max_replicas))
    return out


def _karpenter_pool(name: str, needs: list[_Nodes], node_class: dict) -> dict:
    u = needs[0]
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"hetinfra.dev/pool": name}},
                "spec": {
                    "nodeClassRef": node_class,
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [u.instance_type]},
                        {"key": CAPACITY_LABEL, "operator": "In", "values": ["spot" if u.spot else "on-demand"]},
                    ],
                    "taints": [GPU_TAINT],
                },
            },
            # GPU nodes are expensive and slow to start: give back only empty ones.
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"},
            "limits": {"nvidia.com/gpu": str(sum(n.gpus * n.count for n in needs))},
        },
    }


def _ec2_node_class(name: str, cluster: dict, disk_gb: int) -> dict:
    cluster_name = cluster.get("cluster_name") or cluster.get("context") or "CLUSTER_NAME"
    discovery = [{"tags": {"karpenter.sh/discovery": cluster_name}}]
    return {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {
            # al2023 picks the NVIDIA variant of the EKS AMI on GPU instance types
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": cluster.get("node_role") or f"KarpenterNodeRole-{cluster_name}",
            "subnetSelectorTerms": discovery, "securityGroupSelectorTerms": discovery,
            "blockDeviceMappings": [{"deviceName": "/dev/xvda",
                                     "ebs": {"volumeSize": f"{disk_gb}Gi", "volumeType": "gp3", "encrypted": True}}],
        },
    }


def _compute_class(name: str, u: _Nodes) -> dict:
    rule: dict = {"machineType": u.instance_type, "spot": u.spot}
    if u.gpu in GKE_ACCELERATORS:
        rule["gpu"] = {"type": GKE_ACCELERATORS[u.gpu], "count": u.gpus}
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": name},
            "spec": {"priorities": [rule], "nodePoolAutoCreation": {"enabled": True},
                     "whenUnsatisfiable": "DoNotScaleUp"}}


def node_objects(service: str, cloud: str, units: list[DeployedUnit], cluster: dict) -> list[dict]:
    """The cluster-scoped objects that bring the units' GPU nodes (see the module docstring)."""
    if not units:
        return []
    pools: dict[str, list[_Nodes]] = {}
    for n in _node_needs(units):
        pools.setdefault(pool_name(service, n.instance_type, n.spot), []).append(n)
    if cloud == "gcp":
        return [_compute_class(name, us[0]) for name, us in sorted(pools.items())]
    if cloud == "azure":
        ref = {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"}
        return [_karpenter_pool(name, us, ref) for name, us in sorted(pools.items())]
    node_class = fit_label(f"{service}-gpu")  # Karpenter labels its nodes with it: at most 63 characters
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class}
    disk = max((u.disk_size or 100) for u in units)
    return [_ec2_node_class(node_class, cluster, disk)] + [_karpenter_pool(n, us, ref)
                                                            for n, us in sorted(pools.items())]
