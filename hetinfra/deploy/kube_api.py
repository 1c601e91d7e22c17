"""A cluster's API, through the official ``kubernetes`` Python client (imported only here, inside
the deploy stage: ``hetinfra plan`` and ``--help`` never load it).

It only reads (``status``, ``replan``, the health wait of ``replan --apply``): the objects are
written and deleted by the Pulumi project OUT/pulumi/kubernetes/ (hetinfra.stacks.kubernetes), which
``hetinfra apply``/``destroy`` run. Paths are built from apiVersion and kind (no discovery round
trip): the kinds hetinfra writes are known.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hetinfra.errors import InvalidInputError, ProviderError

__all__ = ["Cluster", "connect", "object_path"]

TIMEOUT_S = 30
#: kinds hetinfra writes that are not namespaced
CLUSTER_SCOPED = {"Namespace", "NodePool", "EC2NodeClass", "ComputeClass"}


def _plural(kind: str) -> str:
    k = kind.lower()
    return k + "es" if k.endswith("s") else k + "s"


def object_path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    """The REST path of an object (or, without ``name``, of its collection)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if kind not in CLUSTER_SCOPED:
        base += f"/namespaces/{namespace}"
    return f"{base}/{_plural(kind)}" + (f"/{name}" if name else "")


class Cluster:
    """One cluster's API (a ``kubernetes.client.ApiClient``), with the calls hetinfra needs."""

    def __init__(self, api_client, name: str):
        self.api = api_client
        self.name = name

    def _call(self, method: str, path: str, *, query: list | None = None, body: Any = None,
              content_type: str | None = None) -> dict | None:
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        query = list(query or [])
        self.api.update_params_for_auth(headers, query, ["BearerToken"])
        try:  # ApiClient.request: the raw call of the pinned client (kubernetes 36), no model (de)serialisation
            resp = self.api.request(method, self.api.configuration.host + path, query_params=query, headers=headers,
                                    body=body, _preload_content=False, _request_timeout=TIMEOUT_S)
            status, data = resp.status, resp.data
        except ApiException as exc:  # the client raises on any status outside 2xx
            status, data = exc.status, (exc.body.encode() if isinstance(exc.body, str) else exc.body)
            if not status:  # status 0: the request could not be sent
                raise ProviderError(f"cluster {self.name}: {method} {path} failed: {exc.reason}",
                                    hint="check the kubeconfig context and that the cluster is reachable") from None
        except Exception as exc:  # urllib3 connection errors, timeouts
            raise ProviderError(f"cluster {self.name}: {method} {path} failed: {exc}",
                                hint="check the kubeconfig context and that the cluster is reachable") from None
        resp = _Response(status, data)
        if resp.status == 404:
            return None
        text = resp.data.decode() if resp.data else ""
        if resp.status >= 400:
            try:
                msg = json.loads(text).get("message") or text
            except ValueError:
                msg = text
            raise ProviderError(f"cluster {self.name}: {method} {path}: HTTP {resp.status}: {msg[:300]}",
                                hint="a missing CRD means a prerequisite is not installed (docs/kubernetes.md)")
        return json.loads(text) if text else {}

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        return self._call("GET", object_path(api_version, kind, namespace, name))

    def pods(self, namespace: str, selector: str) -> list[dict]:
        doc = self._call("GET", object_path("v1", "Pod", namespace), query=[("labelSelector", selector)])
        return list((doc or {}).get("items") or [])


class _Response:
    """A finished call's status and body, however the client returned it."""

    def __init__(self, status: int, data: bytes | None):
        self.status, self.data = status, data


def connect(cluster_key: str, settings: dict, kubeconfig: str | None) -> Cluster:
    """The cluster of ``deploy.kubernetes.clusters[cloud/region]`` through its kubeconfig context."""
    from kubernetes import config

    if not settings.get("context"):
        raise InvalidInputError(f"no cluster for {cluster_key}: deploy.kubernetes.clusters has no entry for it",
                                hint=f"add deploy.kubernetes.clusters['{cluster_key.replace('-', '/', 1)}'].context "
                                     "to the spec and plan again")
    # $KUBECONFIG read now: the client reads it once, when first imported
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        api = config.new_client_from_config(config_file=path, context=settings["context"])
    except Exception as exc:  # ConfigException, a missing file
        raise InvalidInputError(f"kubeconfig context {settings['context']!r} for {cluster_key}: {exc}",
                                hint="check deploy.kubernetes.kubeconfig / $KUBECONFIG and the context name") from None
    return Cluster(api, cluster_key)
