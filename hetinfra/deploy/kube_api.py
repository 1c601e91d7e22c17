"""A cluster's API, through the official ``kubernetes`` Python client (imported only here, inside
the deploy stage: ``hetinfra plan`` and ``--help`` never load it).

It only reads (``status``, ``replan``, the health wait of ``replan --apply``): the objects are
written and deleted by the Pulumi project OUT/pulumi/kubernetes/ (hetinfra.stacks.kubernetes), which
``hetinfra apply``/``destroy`` run. Paths are built from apiVersion and kind (no discovery round
trip): the kinds hetinfra writes are known.
"""

from __future__ import annotations

import os
from typing import Any

from hetinfra.deploy.kube_answers import Pod, PodList, Workload, parse_answer, parse_body
from hetinfra.errors import InvalidInputError, ProviderError

__all__ = ["Cluster", "connect", "object_path"]

TIMEOUT_S = 30
#: the largest answer read (a pod list of thousands of pods is a few MiB)
MAX_ANSWER_BYTES = 64 << 20
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
        text = _text(resp.data, f"cluster {self.name}: {method} {path}")
        if resp.status >= 400:
            try:
                doc = parse_body(text, f"cluster {self.name}: {method} {path}")
            except ProviderError:
                doc = None
            msg = doc.get("message") if isinstance(doc, dict) and isinstance(doc.get("message"), str) else text
            raise ProviderError(f"cluster {self.name}: {method} {path}: HTTP {resp.status}: {msg[:300]}",
                                hint="a missing CRD means a prerequisite is not installed (docs/kubernetes.md)")
        return parse_body(text, f"cluster {self.name}: {method} {path}")

    def workload(self, api_version: str, kind: str, namespace: str | None, name: str) -> Workload | None:
        """The workload's typed answer (None: not there); a malformed one is a ProviderError (exit 4)."""
        path = object_path(api_version, kind, namespace, name)
        doc = self._call("GET", path)
        return None if doc is None else parse_answer(Workload, doc, f"cluster {self.name}: GET {path}")

    def pods(self, namespace: str, selector: str) -> list[Pod]:
        path = object_path("v1", "Pod", namespace)
        doc = self._call("GET", path, query=[("labelSelector", selector)])
        return list(parse_answer(PodList, doc, f"cluster {self.name}: GET {path}").items)


def _text(data: bytes | None, where: str) -> str:
    if not data:
        return ""
    if len(data) > MAX_ANSWER_BYTES:
        raise ProviderError(f"{where}: answer of {len(data)} bytes, more than the {MAX_ANSWER_BYTES} read",
                            hint="check the context's server URL and any proxy in front of it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProviderError(f"{where}: the answer is not UTF-8 text",
                            hint="check the context's server URL and any proxy in front of it") from None


class _Response:
    """A finished call's status and body, however the client returned it."""

    def __init__(self, status: int, data: bytes | None):
        self.status, self.data = status, data


def connect(cluster_key: str, context: str | None, kubeconfig: str | None) -> Cluster:
    """The cluster of ``deploy.kubernetes.clusters[cloud/region]`` through its kubeconfig ``context``
    (the plan's, else the one state.json recorded; None: the cluster is not configured)."""
    from kubernetes import config

    if not context:
        raise InvalidInputError(f"no cluster for {cluster_key}: deploy.kubernetes.clusters has no entry for it",
                                hint=f"add deploy.kubernetes.clusters['{cluster_key.replace('-', '/', 1)}'].context "
                                     "to the spec and plan again")
    # $KUBECONFIG read now: the client reads it once, when first imported
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    files = [f for f in path.split(os.pathsep) if f]
    docs = [read_kubeconfig(f) for f in files]  # every file through the safe reader first: a FIFO is refused
    try:
        if len(files) == 1:
            api = _client_of(docs[0], context, os.path.dirname(os.path.abspath(files[0])))
        else:  # a $KUBECONFIG list: the client merges the files (each already read safely above)
            api = config.new_client_from_config(config_file=path, context=context)
    except Exception as exc:  # ConfigException, a missing key
        raise InvalidInputError(f"kubeconfig context {context!r} for {cluster_key}: {exc}",
                                hint="check deploy.kubernetes.kubeconfig / $KUBECONFIG and the context name") from None
    return Cluster(api, cluster_key)


def read_kubeconfig(path: str) -> dict:
    """A kubeconfig through the one YAML file reader (regular file, bounded size, UTF-8, aliases and
    nesting bounded, no duplicate key): InvalidInputError (exit 2) naming the file otherwise."""
    from hetinfra.yamltext import read_yaml_mapping

    hint = "check deploy.kubernetes.kubeconfig / $KUBECONFIG"
    doc = read_yaml_mapping(path, "kubeconfig", max_bytes=4 << 20, hint=hint)
    if not doc:
        raise InvalidInputError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping with contexts)", hint=hint)
    return doc


def _client_of(doc: dict, context: str, base: str):
    """An ApiClient for ``context`` of the kubeconfig ``doc`` (relative cert paths from ``base``)."""
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.config.kube_config import KubeConfigLoader

    cfg = type.__call__(Configuration)  # as the client does: not the process-wide default
    KubeConfigLoader(config_dict=doc, active_context=context, config_base_path=base).load_and_set(cfg)
    return ApiClient(configuration=cfg)
