"""The cluster's front door.

- ``deploy.gateway.kind: hetinfra`` (default): hetinfra's own gateway as a Deployment + a
  LoadBalancer Service; the plan (routing weights and request classes) comes from a ConfigMap and
  its backends are the units' Services in this cluster. It enforces the plan's per-class routing.
- ``inference-extension``: per model an ``InferencePool`` (inference.networking.k8s.io/v1) over the
  model's pods and an ``HTTPRoute`` sending that model's requests (header ``X-Gateway-Model-Name``,
  set by the extension's body-based router) to it. The endpoint picker balances on load and KV
  cache; it knows nothing of the plan's request classes (docs/kubernetes.md).
"""

from __future__ import annotations

import json

from hetinfra.compile.unit import DeployedUnit
from hetinfra.facts import fit_label

__all__ = ["GATEWAY_IMAGE", "gateway_objects"]

#: the gateway's Python; hetinfra itself is pip-installed at start (deploy.gateway.package)
GATEWAY_IMAGE = "python:3.12-slim"
EPP_PORT = 9002  # the endpoint picker's gRPC port (the extension's chart default)
MODEL_HEADER = "X-Gateway-Model-Name"


def _hetinfra_gateway(service: str, g: dict, plan_text: str, namespace: str, units: list[DeployedUnit], secret: str
                      ) -> list[dict]:
    name = f"{service}-gateway"
    labels = {"app.kubernetes.io/managed-by": "hetinfra", "app.kubernetes.io/part-of": service,
              "hetinfra.dev/gateway": name}
    endpoints = " ".join(f"--endpoint {u.name}=http://{u.name}.{namespace}.svc:{u.port}/v1" for u in units)
    script = (f'pip install -q --no-cache-dir "$HETINFRA_PACKAGE"\n'
              f"exec hetinfra gateway /etc/hetinfra/plan.json --host 0.0.0.0 --port {g['port']} "
              f"--no-demand-log {endpoints}\n")
    keys = [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k, "optional": k != "VLLM_API_KEY"}}}
            for k in ("VLLM_API_KEY", "HETINFRA_API_KEY")]
    # /health answers 503 while no backend serves: it gates traffic (readiness) but must not restart
    # the gateway (liveness) or stop its start (vLLM backends take up to 20 minutes to come up)
    ready = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
    alive = {"tcpSocket": {"port": "http"}, "periodSeconds": 10}
    container = {"name": "gateway", "image": GATEWAY_IMAGE, "command": ["/bin/sh", "-c", script],
                 "env": [{"name": "HETINFRA_PACKAGE", "value": g["package"]}] + keys,
                 "ports": [{"name": "http", "containerPort": g["port"]}],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                 "startupProbe": dict(alive, failureThreshold=30), "readinessProbe": ready, "livenessProbe": alive,
                 "volumeMounts": [{"name": "plan", "mountPath": "/etc/hetinfra", "readOnly": True}]}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "data": {"plan.json": plan_text}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace,
                                                                     "labels": labels},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"hetinfra.dev/gateway": name}},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [container],
                                        "volumes": [{"name": "plan", "configMap": {"name": name}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"type": "LoadBalancer", "selector": {"hetinfra.dev/gateway": name},
                  "ports": [{"name": "http", "port": g["port"], "targetPort": "http", "protocol": "TCP"}]}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"hetinfra.dev/gateway": name}}}},
    ]


def _inference_pools(service: str, namespace: str, units: list[DeployedUnit], slugs: dict[str, str]) -> list[dict]:
    objs = []
    for model in sorted({u.service_model for u in units}):
        slug = slugs[model]
        pool = fit_label(f"{service}-{slug}")  # shortened names stay distinct (a hash suffix)
        labels = {"app.kubernetes.io/managed-by": "hetinfra", "app.kubernetes.io/part-of": service}
        port = next(u.port for u in units if u.service_model == model)
        objs.append({"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
                     "metadata": {"name": pool, "namespace": namespace, "labels": labels},
                     "spec": {"selector": {"matchLabels": {"hetinfra.dev/model": slug}},
                              "targetPorts": [{"number": port}],
                              "endpointPickerRef": {"name": f"{pool}-epp", "port": {"number": EPP_PORT}}}})
        objs.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                     "metadata": {"name": pool, "namespace": namespace, "labels": labels},
                     "spec": {"parentRefs": [{"name": f"{service}-inference-gateway"}],
                              "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                                                      "headers": [{"type": "Exact", "name": MODEL_HEADER,
                                                                   "value": model}]}],
                                         "backendRefs": [{"group": "inference.networking.k8s.io",
                                                          "kind": "InferencePool", "name": pool}]}]}})
    return objs


def gateway_objects(service: str, gateway: dict, plan: dict, namespace: str, units: list[DeployedUnit],
                    slugs: dict[str, str], secret: str) -> list[dict]:
    """``gateway``: deploy.gateway; ``plan``: the plan the hetinfra gateway routes by (its ConfigMap)."""
    if gateway.get("kind", "hetinfra") == "inference-extension":
        return _inference_pools(service, namespace, units, slugs)
    return _hetinfra_gateway(service, gateway, json.dumps(plan, indent=1, sort_keys=True) + "\n", namespace, units,
                             secret)
