"""Group a plan's units by cluster and write each cluster's manifests (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from hetinfra.compile.kubernetes.gateway import Backend, gateway_objects
from hetinfra.compile.kubernetes.nodes import node_objects
from hetinfra.compile.kubernetes.project import write_kube_project
from hetinfra.compile.kubernetes.scaling import scaling_objects
from hetinfra.compile.kubernetes.workloads import labels, secret_name, workload
from hetinfra.compile.skypilot import TaskDumper, generator_version
from hetinfra.compile.unit import DeployedUnit
from hetinfra.errors import InvalidInputError
from hetinfra.facts import VLLM_PORT
from hetinfra.outdir import replace_dir
from hetinfra.plan.naming import model_slugs

__all__ = ["KubePlan", "cluster_key", "kube_units", "render_clusters", "write_kubernetes"]

DEFAULT_NAMESPACE = "hetinfra"


@dataclass(frozen=True)
class KubePlan:
    """What the Kubernetes target reads from plan.json (one place, so the plan document can change)."""

    service: str
    units: list[DeployedUnit]
    skipped: list[tuple[str, str, str]]  # (cloud, region, why) of units no cluster can run (mixed-GPU pipelines)
    slugs: dict[str, str]  # served model name -> DNS-safe slug
    kube: dict  # deploy.kubernetes
    plan: dict  # the whole plan (the gateway's routing table)
    gateway: dict  # deploy.gateway
    port: int  # vLLM's port (deploy.port)


def kube_units(plan: dict, units: list[DeployedUnit]) -> KubePlan:
    """Read the plan for the Kubernetes target; the one reader of plan.json here. ``units`` are its
    deployment units (hetinfra.compile.artifacts.sky_units with include_mixed, which imports this
    package: passed in, not imported back)."""
    # a LeaderWorkerSet has one worker template: a mixed pipeline fits when its stages after the first
    # share an instance type (the leader takes stage 0)
    unfit = [u for u in units if u.mixed and len(set(u.stages[1:])) > 1]
    skipped = [(u.cloud, u.region, f"{u.name}: a mixed-GPU pipeline whose stages after the first differ (a "
                                    "LeaderWorkerSet's workers share one pod template); deploy it with the Pulumi "
                                    "stacks") for u in unfit]
    kube = (plan.get("deploy") or {}).get("kubernetes")
    if kube is None:
        raise InvalidInputError(f"the plan of {plan['service']!r} was not made for deploy.target kubernetes",
                                hint="set deploy.target: kubernetes in the spec and plan again")
    return KubePlan(plan["service"], [u for u in units if u not in unfit], skipped,
                    model_slugs([m["name"] for m in plan["models"]]), kube, plan, plan["deploy"]["gateway"],
                    int(plan["deploy"].get("port", VLLM_PORT)))


def cluster_key(cloud: str, region: str) -> str:
    return f"{cloud}-{region}"


def cluster_settings(kp: KubePlan, cloud: str, region: str) -> dict:
    return (kp.kube.get("clusters") or {}).get(f"{cloud}/{region}") or {}


def namespace_of(kp: KubePlan, cloud: str, region: str) -> str:
    """The namespace of cluster (cloud, region): its settings', else DEFAULT_NAMESPACE."""
    return cluster_settings(kp, cloud, region).get("namespace") or DEFAULT_NAMESPACE


class ManifestDumper(TaskDumper):
    """Multi-line strings as literal blocks, and no anchors: every object reads on its own."""

    def ignore_aliases(self, data) -> bool:
        return True


def _dump(objs: list[dict]) -> str:
    return "".join("---\n" + yaml.dump(o, Dumper=ManifestDumper, sort_keys=False, default_flow_style=False,
                                       width=10_000) for o in objs)


def cluster_objects(kp: KubePlan, cloud: str, region: str) -> dict[str, list[dict]]:
    """File name -> the objects of one cluster, in apply order (nodes, namespace-scoped, gateway)."""
    units = [u for u in kp.units if (u.cloud, u.region) == (cloud, region)]
    settings = cluster_settings(kp, cloud, region)
    ns = namespace_of(kp, cloud, region)
    files: dict[str, list[dict]] = {
        "namespace.yaml": [{"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns, "labels": {"app.kubernetes.io/managed-by": "hetinfra"}}}],
        "nodes.yaml": node_objects(kp.service, cloud, units, settings)}
    for u in units:
        lab = labels(kp.service, u, kp.slugs[u.service_model])
        files[f"units/{u.name}.yaml"] = [workload(kp.service, ns, u, kp.slugs[u.service_model])] + \
            scaling_objects(ns, u, lab, kp.kube)
    files["gateway.yaml"] = gateway_objects(kp.service, kp.gateway, kp.plan, ns, units, kp.slugs,
                                            secret_name(kp.service), region=region,
                                            backends=regional_backends(kp, cloud, region))
    return files


def regional_backends(kp: KubePlan, cloud: str, region: str) -> list[Backend]:
    """Every unit of the plan as the gateway of cluster (cloud, region) reaches it: its own cluster's
    by their Services, the others' by multi-cluster Services (one endpoint per region)."""
    out = []
    for u in kp.units:
        ns = namespace_of(kp, u.cloud, u.region)
        out.append(Backend(u, ns, (u.cloud, u.region) == (cloud, region)))
    return out


def _kustomization(kp: KubePlan, key: str, files: list[str], ns: str) -> str:
    head = [f"# Generated by hetinfra {generator_version()}; do not edit. Apply with: kubectl apply -k .",
            f"# Needs the Secret {secret_name(kp.service)} in namespace {ns} (keys VLLM_API_KEY, HF_TOKEN, "
            "HETINFRA_API_KEY): `hetinfra apply` creates it from the environment; see docs/kubernetes.md."]
    head += [f"# not deployed here: {why}" for c, r, why in kp.skipped if cluster_key(c, r) == key]
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}
    return "\n".join(head) + "\n" + yaml.safe_dump(body, sort_keys=False)


def render_clusters(plan: dict, units: list[DeployedUnit]) -> dict[str, dict[str, str]]:
    """``<cloud>-<region>`` -> file name -> YAML text, for every cluster the plan's ``units`` need."""
    kp = kube_units(plan, units)
    out: dict[str, dict[str, str]] = {}
    for cloud, region in sorted({(u.cloud, u.region) for u in kp.units} | {(c, r) for c, r, _ in kp.skipped}):
        files = cluster_objects(kp, cloud, region)
        ns = namespace_of(kp, cloud, region)
        texts = {name: _dump(objs) for name, objs in files.items() if objs}
        texts["kustomization.yaml"] = _kustomization(kp, cluster_key(cloud, region), list(texts), ns)
        out[cluster_key(cloud, region)] = texts
    return out


def write_kubernetes(out: Path, plan: dict, units: list[DeployedUnit]) -> list[Path]:
    """Write OUT/kubernetes/ (swapped in whole, like skypilot/) and the Pulumi project
    OUT/pulumi/kubernetes/; returns what was written."""
    clusters = render_clusters(plan, units)
    files = {f"{c}/{name}": text for c, texts in clusters.items() for name, text in texts.items()}
    replace_dir(out / "kubernetes", files)
    project = write_kube_project(out, plan)
    return [out / "kubernetes" / f for f in sorted(files)] + [project]
