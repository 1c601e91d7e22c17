"""Before and after, as a hostile user would (issue 36, second part): Kubernetes API answers and
kubeconfigs, gateway bodies, live counts in state.json, pairs of files, regions and origins, and the
Kubernetes endpoint. Each case runs in its own process on two checkouts:

    BEFORE_ROOT=/tmp/base AFTER_ROOT=. .venv/bin/python tools/hostile_before_after_b.py

BEFORE_ROOT is put first on PYTHONPATH of BEFORE_PY (default /work/main/.venv/bin/python), so a
`git worktree add /tmp/base <commit>` is "before"; AFTER_ROOT with this checkout's venv is "after".
A case prints one JSON line: its outcome and whether it was handled (a clear HetinfraError with the
right exit code, a 400, or the right routing), or not (a traceback, a hang, a silently wrong value).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ shared builders (both checkouts)
def two_model_plan() -> dict:
    from tests.gateway.conftest import CLASSES, MODEL, make_plan

    plan = make_plan()
    u3 = plan["allocations"][2]
    old = u3["unit"]
    u3.update(model="code-3b", unit=old.replace(MODEL, "code-3b"),
              deployment_unit=u3["deployment_unit"].replace(MODEL, "code-3b"),
              skypilot_task=u3["skypilot_task"].replace(MODEL, "code-3b"))
    plan["models"].append(dict(plan["models"][0], name="code-3b"))
    first = plan["allocations"][0]["unit"]
    plan["routing"] = {MODEL: {c: [{"unit": first, "share": 1.0, "rps": 1.0}] for c in CLASSES},
                       "code-3b": {c: [{"unit": u3["unit"], "share": 1.0, "rps": 1.0}] for c in CLASSES}}
    return plan


def out_dir(plan: dict) -> Path:
    from tests.gateway.conftest import write_out

    return write_out(Path(tempfile.mkdtemp()) / "out", plan)


def answer_server(body: bytes):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


def kubeconfig(url: str) -> str:
    import yaml

    path = Path(tempfile.mkdtemp()) / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                    "clusters": [{"name": "c", "cluster": {"server": url}}],
                                    "users": [{"name": "u", "user": {"token": "t"}}],
                                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def read_unit(workload: object, pods: object = None) -> dict:
    """One unit read through the real client from a server answering ``workload`` (GET of the
    Deployment) and ``pods`` (the pod list): what `hetinfra status` does per unit."""
    from hetinfra.deploy import kube
    from hetinfra.deploy.drift import UnitLive
    from hetinfra.deploy.kube_api import connect

    body = workload if isinstance(workload, bytes) else json.dumps(workload).encode()
    url = answer_server(body)
    cluster = connect("aws-us-east-1", {"context": "c"}, kubeconfig(url))
    if pods is not None:
        pod_url = answer_server(json.dumps(pods).encode())
        cluster.pods = lambda ns, sel: _pods_from(pod_url, cluster)
    u = UnitLive("u", "kubernetes", "aws", "us-east-1", "g6e.xlarge", "L40S", False, 1, 2, 1.0)
    kube._read_unit(cluster, "llm", u, 1.8e9, 600)
    return {"live": u.live, "stalled": u.stalled, "running": u.running}


def _pods_from(url: str, cluster):
    from hetinfra.deploy.kube_api import connect

    other = connect("aws-us-east-1", {"context": "c"}, kubeconfig(url))
    return type(cluster).pods(other, "llm", "x")


# ------------------------------------------------------------------ the cases
def live_ok(r: dict) -> bool:
    return isinstance(r.get("live"), int) and 0 <= r["live"] <= 10**6


CASES = {
    # family: Kubernetes API answers and kubeconfigs
    "API: readyReplicas -5": (lambda: read_unit({"status": {"readyReplicas": -5}}), live_ok),
    "API: readyReplicas 1e30": (lambda: read_unit({"status": {"readyReplicas": 10**30}}), live_ok),
    "API: readyReplicas '3' (a string)": (lambda: read_unit({"status": {"readyReplicas": "3"}}), None),
    "API: status is a list": (lambda: read_unit({"status": [1, 2]}), None),
    "API: body nested 5,000 deep": (lambda: read_unit(b"[" * 5000 + b"]" * 5000), None),
    "API: body not UTF-8": (lambda: read_unit(b'{"status": "\xff\xfe"}'), None),
    "API: pod lastTransitionTime 'yesterday'": (lambda: read_unit({"status": {"readyReplicas": 1}}, {"items": [
        {"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                         "reason": "Unschedulable",
                                                         "lastTransitionTime": "yesterday"}]}}]}), None),
    "API: pod conditions is a string": (lambda: read_unit({"status": {"readyReplicas": 1}},
                                                           {"items": [{"status": {"phase": "Pending",
                                                                                  "conditions": "none"}}]}), None),
    "kubeconfig is a FIFO": (lambda: _fifo_kubeconfig(), None),
    "kubeconfig nested 300 deep": (lambda: _deep_kubeconfig(), None),
    # family: gateway bodies
    "gateway body: 100,000 '['": (lambda: _post(b"[" * 100_000), lambda r: r["status"] == 400),
    "gateway body: prompt nested 2,000 deep": (lambda: _post(b'{"model": "chat-8b", "prompt": ' + b"[" * 2000
                                                             + b"]" * 2000 + b"}"), lambda r: r["status"] == 400),
    "gateway: backend answer nested 50,000 deep": (lambda: _post(b'{"model": "chat-8b", "prompt": "hi"}',
                                                                 answer=b"[" * 50_000 + b"]" * 50_000),
                                                   lambda r: r["status"] != 500),
    # family: live counts in state.json
    "state.json live.units.u.live = -5": (lambda: _state_live(-5), None),
    "state.json live_replicas = 10^30": (lambda: _state_live(10**30, top=True), None),
    "record_live of a read counting -5": (lambda: _record_live(-5), None),
    # family: pairs of files
    "plan.json routes chat to code-3b's unit": (lambda: _plan_cross(), None),
    "weights.json sends chat to code-3b's unit": (lambda: _weights_cross(), None),
    "weights.json names a unit plan.json lacks": (lambda: _weights_unknown(), None),
    "state.json of another service beside the plan": (lambda: _state_pair(service="other-svc"), None),
    "state.json runs a unit for another model": (lambda: _state_pair(model="code-3b"), None),
    "state.json runs a vms unit by kubernetes": (lambda: _state_pair(path="kubernetes"), None),
    # family: regions and origins
    "gateway --region US-EAST-1": (lambda: _region("US-EAST-1"), None),
    "gateway --region mars-1": (lambda: _region("mars-1"), None),
    "header x-hetinfra-origin: mars-1 (logged as)": (lambda: _header_origin("mars-1"),
                                                     lambda r: r["logged"] == "other"),
    "replan on a log holding origin mars-1": (lambda: _replan_origin("mars-1"), lambda r: "mars-1" not in r["origins"]),
    "replan on a log holding origin other": (lambda: _replan_origin("other"), lambda r: "other" not in r["origins"]),
    # family: one endpoint per region on Kubernetes
    "k8s: a region's gateway reaches the other cluster": (lambda: _kube_endpoint(),
                                                          lambda r: r["remote_units"] > 0 and r["region"]),
}


def _fifo_kubeconfig():
    from hetinfra.deploy.kube_api import connect

    path = Path(tempfile.mkdtemp()) / "kubeconfig"
    os.mkfifo(path)
    connect("aws-us-east-1", {"context": "c"}, str(path))
    return {"connected": True}


def _deep_kubeconfig():
    from hetinfra.deploy.kube_api import connect

    path = Path(tempfile.mkdtemp()) / "kubeconfig"
    path.write_text("clusters: " + "[" * 300 + "]" * 300 + "\n")
    connect("aws-us-east-1", {"context": "c"}, str(path))
    return {"connected": True}


def _post(body: bytes, answer: bytes | None = None) -> dict:
    import asyncio

    import httpx

    from hetinfra.gateway.server import GatewayConfig, create_app
    from tests.gateway.conftest import UNITS, make_plan

    reply = answer or json.dumps({"choices": [{"text": "t"}], "usage": {"completion_tokens": 1}}).encode()

    class B(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), B)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    out = out_dir(make_plan())
    app = create_app(GatewayConfig(source=str(out), endpoints={u: [base] for u in UNITS.values()},
                                   health_interval_s=30, reload_interval_s=0))
    gw = app.state.gateway

    async def go():
        await gw.start()
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                         base_url="http://gw") as c:
                r = await c.post("/v1/completions", content=body, headers={"content-type": "application/json"})
                return {"status": r.status_code, "body": r.text[:90]}
        finally:
            await gw.stop()

    return asyncio.run(go())


def _state_live(value, top=False):
    from hetinfra.document.state import parse_state

    live = {"live_replicas": value} if top else {"units": {"u": {"live": value}}}
    parse_state({"state_version": 1, "live": live}, Path("state.json"))
    return {"accepted": value}


def _record_live(value):
    from hetinfra.deploy.state import DeployState

    s = DeployState(Path(tempfile.mkdtemp()) / "state.json", {})
    s.record_live({"live_replicas": value, "units": {"u": {"live": value}}})
    return {"recorded": s.doc["live"]["live_replicas"]}


def _plan_cross():
    from hetinfra.document import load_plan

    plan = two_model_plan()
    plan["routing"]["chat-8b"][next(iter(plan["routing"]["chat-8b"]))][0]["unit"] = plan["allocations"][2]["unit"]
    path = Path(tempfile.mkdtemp()) / "plan.json"
    path.write_text(json.dumps(plan))
    load_plan(path)
    return {"loaded": "routes chat to code-3b"}


def _weights(edit):
    from hetinfra.compile.router import router_weights
    from hetinfra.document import Plan
    from hetinfra.gateway.table import load_table

    plan = two_model_plan()
    out = out_dir(plan)
    w = router_weights(Plan.parse(plan))
    edit(w, plan)
    (out / "router" / "weights.json").write_text(json.dumps(w))
    t = load_table(out)
    return {"chat-8b units": sorted({u for c in t.models["chat-8b"].classes for u, _ in c.weights})}


def _weights_cross():
    def edit(w, plan):
        c = next(iter(w["models"]["chat-8b"]["classes"].values()))
        c["weights"] = {plan["allocations"][2]["deployment_unit"]: 1.0}
    return _weights(edit)


def _weights_unknown():
    def edit(w, plan):
        c = next(iter(w["models"]["chat-8b"]["classes"].values()))
        c["weights"] = {"chat-8b-aws-us-west-2-p5-48xlarge": 1.0}
    return _weights(edit)


def _state_pair(**change):
    from hetinfra.gateway.table import load_table

    plan = two_model_plan()
    out = out_dir(plan)
    running = [dict(a, path="pulumi") for a in plan["allocations"]]
    state = {"state_version": 1, "service": plan["service"], "allocations": running,
             "endpoints": {a["deployment_unit"]: ["http://127.0.0.1:9/v1"] for a in running}}
    if "service" in change:
        state["service"] = change["service"]
    else:
        running[0].update(change)
    (out / "state.json").write_text(json.dumps(state))
    t = load_table(out)
    return {"endpoints": len(t.endpoints)}


def _regional_out():
    from tests.gateway.conftest import make_plan

    plan = make_plan()
    return out_dir(plan), plan


def _region(region: str):
    from hetinfra.gateway.table import load_table

    out, _ = _regional_out()
    t = load_table(out, region=region)
    return {"started with region": t.region}


def _header_origin(origin: str):
    from hetinfra.gateway import origins

    hdr = {origins.ORIGIN_HEADER: origin}
    try:
        got = origins.request_origin(hdr, "us-east-1", frozenset({"us-east-1", "us-central1"}))
    except TypeError:  # before: no declared set
        got = origins.request_origin(hdr, "us-east-1")
    return {"logged": got}


def _replan_origin(origin: str):
    import time

    from hetinfra.replan.demand_log import apply_to_spec, observe_spec, read_demand_log
    from hetinfra.spec.load import load_spec

    d = Path(tempfile.mkdtemp())
    now = time.time() - 3 * 86400
    rows = ["timestamp,model,input_tokens,output_tokens,region"]
    for k in range(3 * 288):
        for o, n in (("us-east-1", 3), (origin, 1)):
            rows += [f"{now + k * 300 + i * 60:.1f},chat-8b,100,50,{o}" for i in range(n)]
    (d / "demand.csv").write_text("\n".join(rows) + "\n")
    spec, _, _ = load_spec(HERE / "services" / "chat.yaml")
    observed, _ = observe_spec(read_demand_log(d / "demand.csv"), spec)
    try:
        new, _ = apply_to_spec(spec, observed, frozenset({"us-east-1"}))
    except TypeError:  # before: no known origins
        new, _ = apply_to_spec(spec, observed)
    return {"origins": sorted(new.models[0].demand.origins or {})}


def _kube_endpoint():
    import shlex

    import yaml

    from hetinfra.compile.artifacts import sky_units
    from hetinfra.compile.kubernetes import render_clusters
    from hetinfra.document import Plan
    from tests.gateway.conftest import make_plan

    plan = make_plan()  # units in aws/us-east-1 and gcp/us-central1
    plan["deploy"] = dict(plan["deploy"], target="kubernetes", kubernetes={"clusters": {
        "aws/us-east-1": {"context": "a"}, "gcp/us-central1": {"context": "b"}}})
    p = Plan.parse(plan)
    rendered = render_clusters(p.to_dict(), sky_units(p, include_mixed=True))
    dep = next(o for o in yaml.safe_load_all(rendered["aws-us-east-1"]["gateway.yaml"]) if o["kind"] == "Deployment")
    argv = shlex.split(dep["spec"]["template"]["spec"]["containers"][0]["command"][2].splitlines()[-1])
    urls = [argv[i + 1] for i, a in enumerate(argv) if a == "--endpoint"]
    return {"remote_units": sum("clusterset.local" in u for u in urls),
            "region": argv[argv.index("--region") + 1] if "--region" in argv else None,
            "demand_log": "--no-demand-log" not in argv}


# ------------------------------------------------------------------ the driver (tools/hostile_before_after_c.py's too)
def one(cases: dict, name: str, exits: tuple[int, ...] | None = None) -> dict:
    """Run case ``name``: a HetinfraError is handled (when its exit code is in ``exits``, if given),
    a result is handled when the case's predicate says so, anything else is not."""
    fn, good = cases[name]
    try:
        r = fn()
    except Exception as exc:  # noqa: BLE001 - the outcome is what we record
        from hetinfra.errors import HetinfraError

        if isinstance(exc, HetinfraError):
            return {"outcome": f"exit {exc.exit_code}: {exc.message[:110]}",
                    "handled": exits is None or exc.exit_code in exits}
        return {"outcome": f"{type(exc).__name__}: {str(exc)[:80]}", "handled": False}
    ok = good(r) if good else False  # no error where one was due: silently wrong
    return {"outcome": json.dumps(r, ensure_ascii=True)[:110], "handled": bool(ok)}


def _side(script: Path, name: str, py: str, root: str, timeout: int) -> dict:
    env = dict(os.environ, PYTHONPATH=root, HETINFRA_CACHE_DIR="off")
    try:
        p = subprocess.run([py, str(script), "--case", name], cwd=root, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": f"hang ({timeout} s)", "handled": False}
    line = (p.stdout.strip().splitlines() or ['{"outcome": "no output", "handled": false}'])[-1]
    if p.returncode and not p.stdout.strip():
        return {"outcome": "crash: " + (p.stderr.strip().splitlines() or [""])[-1][:80], "handled": False}
    return json.loads(line) if line.startswith("{") else {"outcome": line[:90], "handled": False}


def drive(script: Path, cases: dict, timeout: int = 60) -> None:
    """Each case of ``script`` in its own process, before (BEFORE_PY with BEFORE_ROOT first on its
    path) and after (this checkout): one table row per case, then the counts."""
    sides = {"before": (os.environ.get("BEFORE_PY", "/work/main/.venv/bin/python"), os.environ.get("BEFORE_ROOT", "/tmp/base")),
             "after": (str(HERE / ".venv/bin/python"), os.environ.get("AFTER_ROOT", str(HERE)))}
    rows = []
    for name in cases:
        row = {"case": name, **{side: _side(script, name, py, root, timeout) for side, (py, root) in sides.items()}}
        rows.append(row)
        print(f"| {name} | {row['before']['outcome']} | {'yes' if row['before']['handled'] else 'no'} | "
              f"{row['after']['outcome']} | {'yes' if row['after']['handled'] else 'no'} |", flush=True)
    for side in ("before", "after"):
        print(f"{side}: {sum(r[side]['handled'] for r in rows)} of {len(rows)} handled")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--case":
        print(json.dumps(one(CASES, sys.argv[2])))
        return
    drive(Path(__file__).resolve(), CASES)


if __name__ == "__main__":
    main()
