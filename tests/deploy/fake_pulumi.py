#!/usr/bin/env python3
"""A recording stand-in for the `pulumi` CLI (the real binary cannot be installed here).

The Automation API runs it exactly as it would run the CLI. Every call is appended to
$FAKE_PULUMI_LOG as JSON ({"argv", "cwd", "passphrase", "backend", "python"}: the last two are
$PULUMI_BACKEND_URL and $PULUMI_PYTHON_CMD). It keeps per-project stacks, config and
outputs in $FAKE_PULUMI_HOME, and on `up` computes the outputs the real program would export
from the project's plan.json (one endpoint per replica). $FAKE_PULUMI_FAIL="up:gcp" makes `up`
fail in the project folder named gcp (like a quota error from the provider).
"""

import json
import os
import sys
from pathlib import Path

argv = [a for a in sys.argv[1:] if a != "--non-interactive"]  # the Automation API's global flag
cwd = Path.cwd()
log = os.environ.get("FAKE_PULUMI_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(json.dumps({"argv": sys.argv[1:], "cwd": str(cwd),
                             "passphrase": "PULUMI_CONFIG_PASSPHRASE" in os.environ,
                             "backend": os.environ.get("PULUMI_BACKEND_URL"),
                             "python": os.environ.get("PULUMI_PYTHON_CMD")}) + "\n")

home = Path(os.environ["FAKE_PULUMI_HOME"])
db_path = home / "db.json"
db = json.loads(db_path.read_text()) if db_path.exists() else {}
key = str(cwd)


def save():
    db_path.write_text(json.dumps(db))


def opt(name):
    return argv[argv.index(name) + 1] if name in argv else None


def fail_here(op):
    return os.environ.get("FAKE_PULUMI_FAIL") == f"{op}:{cwd.name}"


if argv[:1] == ["version"]:
    print("v3.272.0")
elif argv[:2] == ["stack", "select"]:
    if opt("--stack") not in db.get(key, {}):
        print(f"error: no stack named '{opt('--stack')}' found", file=sys.stderr)
        sys.exit(255)
elif argv[:2] == ["stack", "init"]:
    name = opt("--stack") or argv[2]
    db.setdefault(key, {})[name] = {"config": {}, "outputs": {}, "history": []}
    save()
elif argv[:2] == ["config", "set-all"]:
    stack = db[key][opt("--stack")]
    for i, a in enumerate(argv):
        if a in ("--secret", "--plaintext"):
            k, v = argv[i + 1].split("=", 1)
            stack["config"][k] = {"secret": a == "--secret", "value": v}
    save()
elif argv[:1] == ["up"]:
    stack = db[key][opt("--stack")]
    if fail_here("up"):
        print("error: creating EC2 Instance: VcpuLimitExceeded: You have requested more vCPU capacity than your "
              "current vCPU limit allows", file=sys.stderr)
        sys.exit(255)
    plan = json.loads((cwd / "plan.json").read_text())
    port = (plan.get("deploy") or {}).get("port", 8000)
    endpoints, n = {}, 0
    for a in plan["allocations"]:
        for r in range(a["count"]):
            n += 1
            base = os.environ.get("FAKE_PULUMI_ENDPOINT")  # e.g. a loopback server for health checks
            url = f"{base}/{a['deployment_unit']}/r{r}/v1" if base else f"http://203.0.113.{n}:{port}/v1"
            endpoints.setdefault(a["deployment_unit"], []).append(url)
    stack["outputs"] = {"endpoints": endpoints, "vms": {f"vm{i}": f"i-{i:08x}" for i in range(n)}}
    gateway = (plan.get("deploy") or {}).get("gateway") or {}
    if gateway.get("enabled"):  # one gateway per fleet region of this project's cloud
        regions = sorted({a["region"] for a in plan["allocations"] if a["cloud"] == cwd.name})
        base = os.environ.get("FAKE_PULUMI_GATEWAY")
        stack["outputs"]["gateways"] = {
            f"{plan['service']}-{cwd.name}-{r}": f"{base}/v1" if base else f"http://198.51.100.{k + 1}:{gateway.get('port', 8080)}/v1"
            for k, r in enumerate(regions)}
    stack["history"].append({"kind": "update", "result": "succeeded", "n": n})
    save()
    print(f"Updating ({opt('--stack')}):\n Resources:\n    + {n} created")
elif argv[:1] == ["destroy"]:
    stack = db[key][opt("--stack")]
    if fail_here("destroy"):
        print("error: deleting resources: timeout", file=sys.stderr)
        sys.exit(255)
    stack["outputs"] = {}
    stack["history"].append({"kind": "destroy", "result": "succeeded", "n": 0})
    save()
    print(" Resources:\n    - deleted")
elif argv[:3] == ["stack", "output", "--json"]:
    print(json.dumps(db[key][opt("--stack")]["outputs"]))
elif argv[:3] == ["stack", "history", "--json"]:
    hist = db[key][opt("--stack")]["history"]
    last = hist[-1] if hist else {"kind": "update", "result": "succeeded", "n": 0}
    print(json.dumps([{"version": len(hist), "kind": last["kind"], "result": last["result"], "message": "",
                       "environment": {}, "config": {},
                       "startTime": "2026-11-21T10:00:00.000Z", "endTime": "2026-11-21T10:05:00.000Z",
                       "resourceChanges": {"create": last["n"]}}]))
# anything else (whoami, about, ...) succeeds silently
