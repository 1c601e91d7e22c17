"""The cloud behind the recording `pulumi` stand-in (tests/deploy/fake_pulumi.py): what its
resources are in the cloud, kept in $FAKE_PULUMI_HOME/db.json under "cloud", changed here behind
Pulumi's back, and served to boto3 by a loopback AWS API (the Auto Scaling and ELBv2 Query APIs'
``DescribeAutoScalingGroups`` and ``DescribeTargetHealth``, at the endpoints botocore reads from
``AWS_ENDPOINT_URL_AUTO_SCALING`` / ``AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2``)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from pathlib import Path
from xml.sax.saxutils import escape


class FakeCloud:
    def __init__(self, home: Path):
        self.path = home / "db.json"
        self.calls: list[dict] = []  # AWS API calls: {"action", "params"}

    def _load(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _save(self, db: dict) -> None:
        self.path.write_text(json.dumps(db))

    def records(self, unit: str) -> dict:
        return {k: v for k, v in self._load().get("cloud", {}).items() if v["unit"] == unit}

    def preempt(self, unit: str, n: int = 1) -> None:
        """The cloud reclaims ``n`` of the unit's instances: VMs are deleted (spot with a delete
        action), a group loses instances it does not get back (no spot capacity)."""
        db = self._load()
        for pid, rec in sorted(db["cloud"].items()):
            if rec["unit"] != unit or n <= 0:
                continue
            if rec["kind"] == "vm":
                del db["cloud"][pid]
                n -= 1
            else:
                k = min(n, len(rec["instances"]))
                del rec["instances"][:k]
                n -= k
        assert n == 0, f"{unit} has fewer instances than that"
        self._save(db)

    def set_health(self, unit: str, *, health: str = "Healthy", target: str = "healthy") -> None:
        """Every instance of the unit's groups gets this ASG health status and target health."""
        db = self._load()
        for rec in db["cloud"].values():
            if rec["unit"] == unit and rec["kind"] == "asg":
                for inst in rec["instances"]:
                    inst["health"], inst["target"] = health, target
        self._save(db)

    def resize(self, unit: str, desired: int) -> None:
        """Someone sets the unit's group size outside Pulumi."""
        db = self._load()
        for rec in db["cloud"].values():
            if rec["unit"] == unit and rec["kind"] == "asg":
                rec["desired"] = desired
                del rec["instances"][desired:]
        self._save(db)

    # --- the loopback AWS API ---------------------------------------------------------------

    def answer(self, params: dict[str, str]) -> tuple[int, str]:
        action = params.get("Action")
        self.calls.append({"action": action, "params": params})
        groups = {k: v for k, v in self._load().get("cloud", {}).items() if v["kind"] == "asg"}
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

    def serve(self) -> tuple[http.server.ThreadingHTTPServer, str]:
        cloud = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                params = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                status, body = cloud.answer(params)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"
