"""The pulumi-kubernetes program of ``deploy.target: kubernetes``: per cloud-region cluster one
:class:`KubeCluster` component that creates, through a provider bound to the cluster's kubeconfig
context, exactly the objects of ``OUT/kubernetes/<cloud>-<region>/`` (rendered from the same plan by
hetinfra.compile.kubernetes, so the two never differ) and the ``<service>-secrets`` Secret from
Pulumi secrets (``hetinfra:apiKey``, ``hetinfra:hfToken``, ``hetinfra:gatewayApiKey``).

The generated project is ``OUT/pulumi/kubernetes/``, which ``hetinfra apply`` runs (or ``cd`` there
and ``pulumi up``); it exports ``units`` (unit -> its workload kind, namespace and cluster),
``endpoints`` (unit -> its in-cluster URL) and ``clusters`` (``<cloud>-<region>`` -> its kubeconfig
context, kubeconfig and namespace: where ``hetinfra status`` reads the live replicas). The namespace
is kept on ``pulumi destroy`` (``retain_on_delete``): it may hold what the cluster's owner put there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.kubernetes import kube_units
from hetinfra.compile.kubernetes.render import cluster_objects, cluster_settings
from hetinfra.document import Plan
from hetinfra.fileio import read_json
from hetinfra.stacks.common import FleetSecrets

__all__ = ["KubeCluster", "KubeClusterArgs", "build", "cluster_args", "main"]

#: built-in kinds -> their typed pulumi-kubernetes class; every other kind is a CustomResource
TYPED = {
    ("v1", "Namespace"): k8s.core.v1.Namespace, ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap, ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.autoscaling.v2.HorizontalPodAutoscaler,
}
WORKLOADS = ("Deployment", "LeaderWorkerSet")


@dataclass(frozen=True)
class KubeClusterArgs:
    """One cluster's part of the plan."""

    cluster: str  # <cloud>-<region>
    service: str
    namespace: str
    context: str | None  # kubeconfig context; None: the kubeconfig's current one
    kubeconfig: str | None  # path; None: $KUBECONFIG or ~/.kube/config
    objects: tuple[dict, ...]  # in apply order (namespace first)
    port: int


def _resource(obj: dict, name: str, opts: pulumi.ResourceOptions):
    typed = TYPED.get((obj["apiVersion"], obj["kind"]))
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if typed is not None:
        return typed(name, opts=opts, **body)
    return k8s.apiextensions.CustomResource(name, api_version=obj["apiVersion"], kind=obj["kind"], opts=opts,
                                            **body)


class KubeCluster(pulumi.ComponentResource):
    """What hetinfra creates in one cluster (see the module docstring)."""

    def __init__(self, name: str, args: KubeClusterArgs, secrets: FleetSecrets,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("hetinfra:kubernetes:Cluster", name, None, opts)
        provider = k8s.Provider(f"{name}-provider", context=args.context, kubeconfig=args.kubeconfig,
                                enable_server_side_apply=True, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        objs = list(args.objects)
        # the namespace outlives `pulumi destroy`: it may hold what the cluster's owner put there
        keep = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True))
        namespace = [_resource(o, f"{name}-ns", keep) for o in objs if o["kind"] == "Namespace"]
        after_ns = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespace))
        string_data = {"VLLM_API_KEY": secrets.api_key}
        if secrets.hf_token is not None:
            string_data["HF_TOKEN"] = secrets.hf_token
        if secrets.gateway_keys is not None:
            string_data["HETINFRA_API_KEY"] = secrets.gateway_keys
        self.secret = k8s.core.v1.Secret(
            f"{name}-secrets", metadata={"name": f"{args.service}-secrets", "namespace": args.namespace,
                                         "labels": {"app.kubernetes.io/managed-by": "hetinfra"}},
            string_data=string_data, type="Opaque", opts=after_ns)
        self.resources = [_resource(o, f"{name}-{o['kind'].lower()}-{o['metadata']['name']}", after_ns)
                          for o in objs if o["kind"] != "Namespace"]
        self.units = {o["metadata"]["name"]: {"kind": o["kind"], "namespace": args.namespace, "cluster": args.cluster}
                      for o in objs if o["kind"] in WORKLOADS and "hetinfra.dev/unit" in o["metadata"]["labels"]}
        self.endpoints = {u: [f"http://{u}.{args.namespace}.svc:{args.port}/v1"] for u in self.units}
        self.key = args.cluster
        self.cluster = {"context": args.context, "kubeconfig": args.kubeconfig, "namespace": args.namespace}
        self.register_outputs({"units": self.units, "endpoints": self.endpoints, "cluster": self.cluster})


def cluster_args(plan: dict) -> list[KubeClusterArgs]:
    """One KubeClusterArgs per cluster the plan's units need, in cluster order."""
    kp = kube_units(plan, sky_units(Plan.parse(plan), include_mixed=True))
    out = []
    for cloud, region in sorted({(u.cloud, u.region) for u in kp.units}):
        settings = cluster_settings(kp, cloud, region)
        objs = tuple(o for objs in cluster_objects(kp, cloud, region).values() for o in objs)
        ns = next(o["metadata"]["name"] for o in objs if o["kind"] == "Namespace")
        out.append(KubeClusterArgs(f"{cloud}-{region}", kp.service, ns, settings.get("context"),
                                   kp.kube.get("kubeconfig"), objs, kp.port))
    return out


def build(plan: dict, secrets: FleetSecrets) -> list[KubeCluster]:
    return [KubeCluster(f"{a.service}-{a.cluster}", a, secrets) for a in cluster_args(plan)]


def main() -> None:
    """Entry point of OUT/pulumi/kubernetes/__main__.py."""
    cfg = pulumi.Config("hetinfra")
    plan = read_json(Path(cfg.get("plan") or "plan.json"), "plan.json")
    secrets = FleetSecrets(api_key=cfg.require_secret("apiKey"), hf_token=cfg.get_secret("hfToken"),
                           gateway_keys=cfg.get_secret("gatewayApiKey"))
    clusters = build(plan, secrets)
    pulumi.export("units", {k: v for c in clusters for k, v in c.units.items()})
    pulumi.export("endpoints", {k: v for c in clusters for k, v in c.endpoints.items()})
    pulumi.export("clusters", {c.key: c.cluster for c in clusters})
