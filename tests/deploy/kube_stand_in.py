"""A loopback stand-in for a Kubernetes API server: real HTTP on 127.0.0.1, objects kept in a dict by
REST path. It answers what the pulumi-kubernetes provider (played by tests/deploy/fake_pulumi_kube.py)
and hetinfra.deploy.kube_api send: server-side apply (PATCH with application/apply-patch+yaml and a
field manager), GET of an object or a pod list by label selector, DELETE. The tests
play the controllers: they set workload status and add pods in ``objects``."""

from __future__ import annotations

import json
import threading
from urllib.parse import parse_qs, urlparse

from tests.conftest import QuietHandler


class KubeStore:
    def __init__(self):
        self.objects: dict[str, dict] = {}
        self.requests: list[tuple[str, str, str]] = []  # (method, path, content type)
        self.lock = threading.Lock()
        self.ready_on_apply = False  # play a controller that brings every applied Deployment up at once

    def add_pod(self, ns: str, name: str, labels: dict, *, phase: str, ready: bool = False,
                unschedulable_since: str | None = None) -> None:
        conds = [{"type": "Ready", "status": "True" if ready else "False"}]
        if unschedulable_since:
            conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                          "lastTransitionTime": unschedulable_since})
        self.objects[f"/api/v1/namespaces/{ns}/pods/{name}"] = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "status": {"phase": phase, "conditions": conds}}


def handler_for(store: KubeStore):
    class Handler(QuietHandler):
        def _send(self, code: int, doc: dict) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> dict:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n)) if n else {}

        def _not_found(self, path: str) -> None:
            self._send(404, {"kind": "Status", "code": 404, "message": f"{path} not found"})

        def do_PATCH(self):  # noqa: N802
            url = urlparse(self.path)
            ctype = self.headers.get("Content-Type", "")
            body = self._body()
            with store.lock:
                store.requests.append(("PATCH", url.path, ctype))
                if ctype != "application/apply-patch+yaml":
                    return self._send(415, {"message": "server-side apply expected"})
                if not parse_qs(url.query).get("fieldManager"):
                    return self._send(422, {"message": "fieldManager is required for apply requests"})
                if body.get("metadata", {}).get("name") != url.path.rsplit("/", 1)[1]:
                    return self._send(400, {"message": "name in body and path differ"})
                old = store.objects.get(url.path, {})
                status = old.get("status", {})
                if store.ready_on_apply and body.get("kind") == "Deployment":
                    n = body["spec"].get("replicas", 1)
                    status = {"replicas": n, "readyReplicas": n}
                store.objects[url.path] = dict(body, status=status)
                self._send(200, store.objects[url.path])

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            with store.lock:
                store.requests.append(("GET", url.path, ""))
                if url.path in store.objects:
                    return self._send(200, store.objects[url.path])
                if url.path.endswith("/pods"):
                    key, _, value = parse_qs(url.query)["labelSelector"][0].partition("=")
                    items = [o for p, o in sorted(store.objects.items()) if p.startswith(url.path + "/")
                             and o["metadata"].get("labels", {}).get(key) == value]
                    return self._send(200, {"kind": "PodList", "items": items})
                self._not_found(url.path)

        def do_DELETE(self):  # noqa: N802
            url = urlparse(self.path)
            self._body()
            with store.lock:
                store.requests.append(("DELETE", url.path, ""))
                if store.objects.pop(url.path, None) is None:
                    return self._not_found(url.path)
                self._send(200, {"kind": "Status", "status": "Success"})

    return Handler
