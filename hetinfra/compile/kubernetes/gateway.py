"""The cluster's front door.

- ``deploy.gateway.kind: hetinfra`` (default): **one endpoint per region**: hetinfra's own gateway
  as a Deployment + a LoadBalancer Service in each cluster, run with ``--region`` (the cluster's
  region: it serves that region's row of the plan, and the header's row for any origin the plan
  declares). Its plan (routing weights and request classes) comes from a ConfigMap and its backends
  are **every** unit of the plan: this cluster's through their Services, another cluster's through
  the multi-cluster Services DNS name ``<unit>.<namespace>.svc.clusterset.local`` (each unit a
  gateway elsewhere routes to gets a ``ServiceExport``), so an origin the plan routes across
  clusters is served from one endpoint. It records the demand log ``replan`` reads (one pod per
  region, so the log is the region's whole traffic: ``GET /admin/demand.csv``).
- ``inference-extension``: per model an ``InferencePool`` (inference.networking.k8s.io/v1) over the
  model's pods and an ``HTTPRoute`` sending that model's requests (header ``X-Gateway-Model-Name``,
  set by the extension's body-based router) to it. The endpoint picker balances on load and KV
  cache; it knows nothing of the plan's request classes (docs/kubernetes.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hetinfra.compile.unit import DeployedUnit
from hetinfra.facts import fit_label

__all__ = ["GATEWAY_IMAGE", "Backend", "gateway_args", "gateway_objects"]

#: the gateway's Python; hetinfra itself is pip-installed at start (deploy.gateway.package)
GATEWAY_IMAGE = "python:3.12-slim"
EPP_PORT = 9002  # the endpoint picker's gRPC port (the extension's chart default)
MODEL_HEADER = "X-Gateway-Model-Name"


#: where the regional gateway keeps its demand log (an emptyDir: the pod's life)
DEMAND_LOG = "/var/lib/hetinfra/demand.csv"


@dataclass(frozen=True)
class Backend:
    """A unit the regional gateway routes to: its own cluster's (``local``) or another's."""

    unit: DeployedUnit
    namespace: str
    local: bool

    @property
    def url(self) -> str:
        host = f"{self.unit.name}.{self.namespace}.svc" + ("" if self.local else ".clusterset.local")
        return f"http://{host}:{self.unit.port}/v1"


def gateway_args(g: dict, region: str, backends: list[Backend]) -> list[str]:
    """The regional gateway's command line after ``hetinfra gateway /etc/hetinfra/plan.json``."""
    args = ["--host", "0.0.0.0", "--port", str(g["port"]), "--region", region, "--demand-log", DEMAND_LOG]
    for b in sorted(backends, key=lambda b: b.unit.name):
        args += ["--endpoint", f"{b.unit.name}={b.url}"]
    return args


def _hetinfra_gateway(service: str, g: dict, plan_text: str, namespace: str, region: str, backends: list[Backend],
                      secret: str) -> list[dict]:
    name = fit_label(f"{service}-gateway")  # a Service's name and a label value: at most 63 characters
    labels = {"app.kubernetes.io/managed-by": "hetinfra", "app.kubernetes.io/part-of": service,
              "hetinfra.dev/gateway": name}
    script = (f'pip install -q --no-cache-dir "$HETINFRA_PACKAGE"\n'
              f"exec hetinfra gateway /etc/hetinfra/plan.json {' '.join(gateway_args(g, region, backends))}\n")
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
                 "volumeMounts": [{"name": "plan", "mountPath": "/etc/hetinfra", "readOnly": True},
                                  {"name": "demand", "mountPath": DEMAND_LOG.rsplit("/", 1)[0]}]}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "data": {"plan.json": plan_text}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace,
                                                                     "labels": labels},
         # one pod: its demand log is the region's whole traffic (two would each hold a part)
         "spec": {"replicas": 1, "selector": {"matchLabels": {"hetinfra.dev/gateway": name}},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [container],
                                        "volumes": [{"name": "plan", "configMap": {"name": name}},
                                                    {"name": "demand", "emptyDir": {}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"type": "LoadBalancer", "selector": {"hetinfra.dev/gateway": name},
                  "ports": [{"name": "http", "port": g["port"], "targetPort": "http", "protocol": "TCP"}]}},
    ]


def service_exports(namespace: str, units: list[DeployedUnit]) -> list[dict]:
    """A ServiceExport per unit of this cluster that another cluster's gateway routes to."""
    return [{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport",
             "metadata": {"name": u.name, "namespace": namespace,
                          "labels": {"app.kubernetes.io/managed-by": "hetinfra"}}} for u in units]


def epp_name(pool: str) -> str:
    """The endpoint picker's Service of ``pool``: ``<pool>-epp``, at most 63 characters (a Service's name)."""
    return fit_label(f"{pool}-epp")


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
                              "endpointPickerRef": {"name": epp_name(pool), "port": {"number": EPP_PORT}}}})
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
                    slugs: dict[str, str], secret: str, *, region: str = "", backends: list[Backend] | None = None
                    ) -> list[dict]:
    """``gateway``: deploy.gateway; ``plan``: the plan the hetinfra gateway routes by (its ConfigMap);
    ``units``: this cluster's; ``backends``: every unit the regional gateway routes to (default: ``units``)."""
    if gateway.get("kind", "hetinfra") == "inference-extension":
        return _inference_pools(service, namespace, units, slugs)
    backends = [Backend(u, namespace, True) for u in units] if backends is None else backends
    objs = _hetinfra_gateway(service, gateway, json.dumps(plan, indent=1, sort_keys=True) + "\n", namespace, region,
                             backends, secret)
    return objs + (service_exports(namespace, units) if any(not b.local for b in backends) else [])
