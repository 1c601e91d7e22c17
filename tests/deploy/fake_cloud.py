"""The cloud behind the recording `pulumi` stand-in (tests/deploy/fake_pulumi.py): what its
self-healing groups are in the cloud, kept in $FAKE_PULUMI_HOME/db.json under "cloud" (physical id
-> {"kind": asg|mig|vmss, "unit", "name", "desired", "head", "instances": [...]}), changed here
behind Pulumi's back, and served on loopback the way each cloud's API answers:

- AWS (boto3, at ``AWS_ENDPOINT_URL_AUTO_SCALING`` / ``AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2``):
  the Query APIs' ``DescribeAutoScalingGroups`` and ``DescribeTargetHealth``;
- GCP (``HETINFRA_GCP_COMPUTE_URL``): ``POST /compute/v1/projects/P/zones/Z/instanceGroupManagers/
  NAME/listManagedInstances`` (bearer token required);
- Azure (``HETINFRA_AZURE_ARM_URL``): ``GET <scale set id>/virtualMachines?$expand=instanceView``
  (bearer token required).

An instance is ``{"id", "state": "InService"|"creating", "health": "Healthy"|"Unhealthy",
"target": <target health>, "errors": [...]}``; each API renders it in its own words.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

TOKENS = {"gcp": "gcp-token", "azure": "arm-token"}


class FakeCloud:
    def __init__(self, home: Path):
        self.path = home / "db.json"
        self.calls: list[dict] = []  # API calls: {"action", "params"} (AWS) or {"action", "path"} (GCP, Azure)

    def _load(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _save(self, db: dict) -> None:
        self.path.write_text(json.dumps(db))

    def records(self, unit: str) -> dict:
        return {k: v for k, v in self._load().get("cloud", {}).items() if v["unit"] == unit}

    def add_group(self, kind: str, unit: str, name: str, size: int, *, head: bool = True, **where) -> dict:
        """A group the cloud has (as `pulumi up` creates them: tests/deploy/fake_pulumi.py), its
        instances launched; ``where``: GCP ``project`` and ``zone``, Azure ``id``."""
        db = self._load()
        rec = {"kind": kind, "unit": unit, "name": name, "desired": size, "head": head, "instances": [],
               "id": where.get("id", name), "zone": where.get("zone"), "project": where.get("project")}
        launch(rec)
        db.setdefault("cloud", {})[rec["id"]] = rec
        self._save(db)
        return rec

    def _groups(self, unit: str, change) -> None:
        db = self._load()
        for pid in sorted(db["cloud"]):
            if db["cloud"][pid]["unit"] == unit:
                change(db["cloud"][pid])
        self._save(db)

    def preempt(self, unit: str, n: int = 1, *, capacity: bool = True) -> None:
        """The cloud reclaims ``n`` of the unit's spot instances. An Auto Scaling group and a scale
        set lose them (the scale set keeps its capacity: Try & Restore brings them back when it
        can); a managed instance group recreates them at once (``capacity=False``: it cannot, its
        last attempt failed with ZONE_RESOURCE_POOL_EXHAUSTED)."""
        left = [n]

        def change(rec):
            k = min(left[0], sum(1 for i in rec["instances"] if i["state"] != "creating"))
            left[0] -= k
            if rec["kind"] != "mig":
                rec["instances"] = [i for i in rec["instances"] if i["state"] == "creating"] + \
                    [i for i in rec["instances"] if i["state"] != "creating"][k:]
                return
            for i in [i for i in rec["instances"] if i["state"] != "creating"][:k]:
                i["state"], i["errors"] = "creating", [] if capacity else ["ZONE_RESOURCE_POOL_EXHAUSTED"]

        self._groups(unit, change)
        assert left[0] == 0, f"{unit} has fewer instances than that"

    def restore(self, unit: str) -> None:
        """The groups get capacity back: every instance they lack or are creating runs and serves."""
        def change(rec):
            rec["instances"] = [i for i in rec["instances"] if i["state"] != "creating"]
            launch(rec)

        self._groups(unit, change)

    def set_health(self, unit: str, *, health: str = "Healthy", target: str = "healthy") -> None:
        """Every instance of the unit's groups gets this health (ASG health status, autohealer,
        health extension) and target health."""
        def change(rec):
            for inst in rec["instances"]:
                inst["health"], inst["target"] = health, target

        self._groups(unit, change)

    def resize(self, unit: str, desired: int) -> None:
        """Someone (or the cloud) sets the size of the unit's groups outside Pulumi."""
        def change(rec):
            rec["desired"] = desired
            del rec["instances"][desired:]

        self._groups(unit, change)

    # --- the loopback APIs ------------------------------------------------------------------

    def answer(self, params: dict[str, str]) -> tuple[int, str]:
        from xml.sax.saxutils import escape  # here: it imports urllib.request, the rest of the stand-in's start

        action = params.get("Action")
        self.calls.append({"action": action, "params": params})
        groups = {v["name"]: v for v in self._load().get("cloud", {}).values() if v["kind"] == "asg"}
        if action == "DescribeAutoScalingGroups":
            names = [v for k, v in sorted(params.items()) if k.startswith("AutoScalingGroupNames.member.")]
            body = "".join(
                f"<member><AutoScalingGroupName>{escape(n)}</AutoScalingGroupName>"
                f"<DesiredCapacity>{groups[n]['desired']}</DesiredCapacity><MinSize>{groups[n]['desired']}</MinSize>"
                f"<MaxSize>{groups[n]['desired']}</MaxSize><Instances>"
                + "".join(f"<member><InstanceId>{i['id']}</InstanceId><LifecycleState>{i['state']}</LifecycleState>"
                          f"<HealthStatus>{i['health']}</HealthStatus></member>" for i in groups[n]["instances"])
                + "</Instances></member>" for n in names if n in groups)
            return 200, (f'<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">'
                         f"<DescribeAutoScalingGroupsResult><AutoScalingGroups>{body}</AutoScalingGroups>"
                         f"</DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>r1</RequestId>"
                         f"</ResponseMetadata></DescribeAutoScalingGroupsResponse>")
        if action == "DescribeTargetHealth":
            arn = params.get("TargetGroupArn")
            members = [i for g in groups.values() if g.get("target_group") == arn for i in g["instances"]]
            body = "".join(f"<member><Target><Id>{i['id']}</Id><Port>8000</Port></Target><TargetHealth>"
                           f"<State>{i['target']}</State></TargetHealth></member>" for i in members)
            return 200, (f'<DescribeTargetHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">'
                         f"<DescribeTargetHealthResult><TargetHealthDescriptions>{body}</TargetHealthDescriptions>"
                         f"</DescribeTargetHealthResult><ResponseMetadata><RequestId>r2</RequestId>"
                         f"</ResponseMetadata></DescribeTargetHealthResponse>")
        return 400, f"<ErrorResponse><Error><Code>InvalidAction</Code><Message>{escape(str(action))}</Message></Error></ErrorResponse>"

    def answer_rest(self, method: str, path: str, token: str | None) -> tuple[int, dict]:
        """GCP's listManagedInstances and Azure's scale set VMs, as JSON."""
        url = urllib.parse.urlsplit(path)
        parts = url.path.strip("/").split("/")
        db = self._load().get("cloud", {})
        if method == "POST" and parts[:2] == ["compute", "v1"] and parts[-1] == "listManagedInstances":
            self.calls.append({"action": "listManagedInstances", "path": url.path})
            if token != TOKENS["gcp"]:
                return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials."}}
            mig = next((r for r in db.values() if r["kind"] == "mig" and r["name"] == parts[-2]
                        and r["zone"] == parts[5] and r["project"] == parts[3]), None)
            if mig is None:
                return 404, {"error": {"code": 404, "message": f"The resource '{parts[-2]}' was not found"}}
            return 200, {"managedInstances": [_gce(mig, i) for i in mig["instances"]]}
        if method == "GET" and url.path.endswith("/virtualMachines"):
            self.calls.append({"action": "virtualMachines", "path": url.path, "query": url.query})
            if token != TOKENS["azure"]:
                return 401, {"error": {"code": "InvalidAuthenticationToken", "message": "The access token is invalid."}}
            vmss = next((r for r in db.values() if r["kind"] == "vmss" and r["id"] == url.path[:-len("/virtualMachines")]),
                        None)
            if vmss is None or "$expand=instanceView" not in urllib.parse.unquote(url.query):
                return 404, {"error": {"code": "ResourceNotFound", "message": url.path}}
            return 200, {"value": [_vm(vmss, i) for i in vmss["instances"]]}
        return 404, {"error": {"message": f"no such API: {method} {url.path}"}}

    def serve(self) -> tuple[http.server.ThreadingHTTPServer, str]:
        # imported here, not at the top: the `pulumi` stand-in, a new process per call, imports this
        # module for launch() only, and http.server and xml.sax.saxutils (urllib.request) were half its
        # start (~30 ms of 70; 40 calls in tests/deploy/test_preview.py's spawned stand-in alone)
        import http.server
        import threading

        cloud = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # headers and body go out in two sends: with Nagle's algorithm the body waited for the
            # client's delayed ACK (tests/conftest.py QuietHandler; not imported here, for the stand-in)
            disable_nagle_algorithm = True

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _rest(self, method: str) -> None:
                auth = self.headers.get("Authorization") or ""
                status, doc = cloud.answer_rest(method, self.path, auth.removeprefix("Bearer ") or None)
                self._send(status, json.dumps(doc).encode(), "application/json")

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                if self.path.startswith("/compute/"):
                    return self._rest("POST")
                status, body = cloud.answer(dict(urllib.parse.parse_qsl(raw)))
                self._send(status, body.encode(), "text/xml")

            def do_GET(self):  # noqa: N802
                self._rest("GET")

            def log_message(self, *args):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll: shutdown() waits up to one poll interval (0.5 s by default) at every teardown
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def launch(rec: dict) -> None:
    """The group launches instances up to its size (each new one serves) and drops any above it."""
    while len(rec["instances"]) < rec["desired"]:
        rec["instances"].append({"id": f"{rec['name']}-{len(rec['instances'])}", "state": "InService",
                                 "health": "Healthy", "target": rec.get("new_target", "healthy"), "errors": []})
    del rec["instances"][rec["desired"]:]


def _gce(mig: dict, i: dict) -> dict:
    base = {"instance": f"https://www.googleapis.com/compute/v1/projects/{mig['project']}/zones/{mig['zone']}/"
                        f"instances/{i['id']}", "id": "1", "version": {"name": "primary"}}
    if i["state"] == "creating":
        errors = [{"code": e, "message": "The zone does not have enough resources available."} for e in i["errors"]]
        return dict(base, currentAction="CREATING", **({"lastAttempt": {"errors": {"errors": errors}}} if errors else {}))
    health = [{"healthCheck": "global/healthChecks/hc", "detailedHealthState":
               "HEALTHY" if i["health"] == "Healthy" else "UNHEALTHY"}] if mig["head"] else []
    return dict(base, instanceStatus="RUNNING", currentAction="NONE", instanceHealth=health)


def _vm(vmss: dict, i: dict) -> dict:
    if i["state"] == "creating":
        return {"instanceId": i["id"], "properties": {"provisioningState": "Creating", "instanceView": {"statuses": []}}}
    view = {"statuses": [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}]}
    if vmss["head"]:
        view["vmHealth"] = {"status": {"code": "HealthState/healthy" if i["health"] == "Healthy"
                                       else "HealthState/unhealthy"}}
    return {"instanceId": i["id"], "name": f"{vmss['name']}_{i['id']}",
            "properties": {"provisioningState": "Succeeded", "instanceView": view}}
