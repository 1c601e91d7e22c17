"""The recording `pulumi` stand-in (fake_pulumi.py) for the project of deploy.target kubernetes,
``OUT/pulumi/kubernetes/``: what the pulumi-kubernetes provider would do with what the program
(hetinfra.stacks.kubernetes) declares.

What is declared comes from the program's own :func:`hetinfra.stacks.kubernetes.cluster_args` on the
project's plan.json: per cluster a ``hetinfra:kubernetes:Cluster`` component, a provider on the
cluster's kubeconfig context, the namespace (kept on destroy: the program sets ``retain_on_delete``),
the Secret ``<service>-secrets`` from the stack's secrets, then every manifest object, each typed as
pulumi-kubernetes types it (``kubernetes:apps/v1:Deployment``, ``kubernetes:core/v1:Service``, a
CustomResource ``kubernetes:<group>/<version>:<Kind>``).

``up`` server-side applies (PATCH, ``application/apply-patch+yaml``) every object that is new or
changed since the last ``up`` to the API server of the provider's kubeconfig context (in the tests,
the loopback stand-in of tests/deploy/kube_stand_in.py), through the official client, and deletes,
in reverse order, what the program no longer declares; ``--refresh`` first drops from the state the
objects the cluster no longer has (deleted outside Pulumi), so ``up`` recreates them. ``destroy``
deletes everything but the namespace, in reverse order. The preview's inputs of the Secret are
digests of its values, as the real preview shows secrets as ``[secret]``.
"""

from __future__ import annotations

import hashlib
import os

COMPONENT = "hetinfra:kubernetes:Cluster"
PROVIDER = "pulumi:providers:kubernetes"
FIELD_MANAGER = "pulumi-kubernetes"
WORKLOADS = ("Deployment", "LeaderWorkerSet")
#: the program's Pulumi secrets -> the Secret's keys
SECRET_KEYS = {"hetinfra:apiKey": "VLLM_API_KEY", "hetinfra:hfToken": "HF_TOKEN",
               "hetinfra:gatewayApiKey": "HETINFRA_API_KEY"}


def type_token(obj: dict) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{obj['kind']}"


def _secret(service: str, namespace: str, config: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"{service}-secrets", "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "hetinfra"}},
            "stringData": {env: config[k]["value"] for k, env in SECRET_KEYS.items() if k in config}}


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def declared(plan: dict, stack: str, project: str, config: dict) -> dict[str, dict]:
    """URN -> {type, inputs, and for an object: body, conn (context, kubeconfig), cluster}, in
    declaration order."""
    from hetinfra.stacks.kubernetes import cluster_args

    prefix = f"urn:pulumi:{stack}::{project}::"
    res: dict[str, dict] = {}
    for a in cluster_args(plan):
        name = f"{a.service}-{a.cluster}"
        conn = {"context": a.context, "kubeconfig": a.kubeconfig}
        res[f"{prefix}{COMPONENT}::{name}"] = {"type": COMPONENT, "inputs": {}}
        res[f"{prefix}{COMPONENT}${PROVIDER}::{name}-provider"] = {"type": PROVIDER, "inputs": dict(conn)}
        secret = _secret(a.service, a.namespace, config)
        objs = [o for o in a.objects if o["kind"] == "Namespace"] + [secret] + \
               [o for o in a.objects if o["kind"] != "Namespace"]
        for o in objs:
            rname = f"{name}-ns" if o["kind"] == "Namespace" else f"{name}-secrets" if o is secret else \
                f"{name}-{o['kind'].lower()}-{o['metadata']['name']}"
            inputs = dict(o, stringData={k: _digest(v) for k, v in o["stringData"].items()}) if o is secret else o
            res[f"{prefix}{COMPONENT}${type_token(o)}::{rname}"] = {
                "type": type_token(o), "inputs": inputs, "body": o, "conn": conn, "cluster": a.cluster}
    return res


def _client(conn: dict, cluster: str):
    from kubernetes import config as kubeconfig

    from hetinfra.deploy.kube_api import Cluster

    path = conn.get("kubeconfig") or os.environ.get("KUBECONFIG")
    return Cluster(kubeconfig.new_client_from_config(config_file=path, context=conn.get("context")), cluster)


def _path(obj: dict) -> str:
    from hetinfra.deploy.kube_api import object_path

    meta = obj["metadata"]
    return object_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


def _apply(r: dict) -> None:
    _client(r["conn"], r["cluster"])._call(
        "PATCH", _path(r["body"]), query=[("fieldManager", FIELD_MANAGER), ("force", "true")], body=r["body"],
        content_type="application/apply-patch+yaml")


def _delete(r: dict) -> None:
    if r["type"] != type_token({"apiVersion": "v1", "kind": "Namespace"}):  # retain_on_delete
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
        _client(r["conn"], r["cluster"])._call("DELETE", _path(r["body"]), body=body)


def refresh(stack: dict) -> None:
    """Objects the cluster no longer has leave the state."""
    stack["resources"] = [r for r in stack.get("resources", [])
                          if _client(r["conn"], r["cluster"])._call("GET", _path(r["body"])) is not None]


def _outputs(want: dict[str, dict], port: int) -> dict:
    """The program's exports: units, endpoints, clusters."""
    units, clusters = {}, {}
    for r in want.values():
        body = r.get("body") or {}
        meta = body.get("metadata") or {}
        if body.get("kind") == "Namespace":
            clusters[r["cluster"]] = dict(r["conn"], namespace=meta["name"])
        if body.get("kind") in WORKLOADS and "hetinfra.dev/unit" in (meta.get("labels") or {}):
            units[meta["name"]] = {"kind": body["kind"], "namespace": meta["namespace"], "cluster": r["cluster"]}
    endpoints = {u: [f"http://{u}.{v['namespace']}.svc:{port}/v1"] for u, v in units.items()}
    return {"units": units, "endpoints": endpoints, "clusters": clusters}


def up(stack: dict, plan: dict, stack_name: str, project: str, *, refreshed: bool) -> int:
    """``pulumi up`` of the project; returns how many objects were created."""
    if refreshed:
        refresh(stack)
    want = declared(plan, stack_name, project, stack["config"])
    have = {r["urn"]: r for r in stack.get("resources", [])}
    created = 0
    for urn, r in want.items():
        if "body" in r and (urn not in have or have[urn]["inputs"] != r["inputs"]):
            created += urn not in have
            _apply(r)
    for urn in reversed(list(have)):  # what the program no longer declares, after the new objects
        if urn not in want:
            _delete(have[urn])
    stack["resources"] = [{"urn": urn, "type": r["type"], "id": f"{r['body']['metadata'].get('namespace') or ''}/"
                                                                f"{r['body']['metadata']['name']}",
                           "outputs": {k: r["body"][k] for k in ("apiVersion", "kind", "metadata")},
                           "inputs": r["inputs"], "body": r["body"], "conn": r["conn"], "cluster": r["cluster"]}
                          for urn, r in want.items() if "body" in r]
    stack["outputs"] = _outputs(want, int((plan.get("deploy") or {}).get("port", 8000)))
    stack["declared"] = {urn: {"type": r["type"], "inputs": r["inputs"]} for urn, r in want.items()}
    return created


def destroy(stack: dict) -> None:
    for r in reversed(stack.get("resources", [])):
        _delete(r)


def model(plan: dict, stack_name: str, project: str, config: dict) -> dict[str, dict]:
    """What `preview` diffs: URN -> {type, inputs}."""
    return {urn: {"type": r["type"], "inputs": r["inputs"]}
            for urn, r in declared(plan, stack_name, project, config).items()}
