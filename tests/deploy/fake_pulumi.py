#!/usr/bin/env python3
"""A recording stand-in for the `pulumi` CLI (the real binary cannot be installed here).

The Automation API runs it exactly as it would run the CLI. Every call is appended to
$FAKE_PULUMI_LOG as JSON ({"argv", "cwd", "passphrase", "backend", "python"}: the last two are
$PULUMI_BACKEND_URL and $PULUMI_PYTHON_CMD). It keeps per-project stacks, config, outputs and
resources in $FAKE_PULUMI_HOME. `config set KEY` without a value reads it from stdin and drops one
trailing newline, as the CLI does when stdin is not a terminal.

The resources are a model of what the real program declares for the project's plan.json (per
region a fleet component and its network; AWS: a launch template and an Auto Scaling group per
unit, or per node of a pipeline replica; GCP and Azure: a VM per node; the gateway VM). `up`
records them and computes the outputs (one endpoint per replica); `preview --json` diffs them
against the last `up` and prints Pulumi's previewDigest: steps[] {op, urn, provider, oldState,
newState, diffReasons, replaceReasons, detailedDiff} with a replacement as create-replacement +
replace ... delete-replaced, and changeSummary. Inputs in REPLACE_ON force a replacement, as the
providers' force-new fields do (a GCE instance's startup script, accelerators or boot disk; an
Azure VM's custom data or priority); other changed inputs are in-place updates.

$FAKE_PULUMI_FAIL="up:gcp" makes `up` fail in the project folder named gcp (like a quota error
from the provider); "preview:gcp" makes `preview` fail there with an error diagnostic.
"""

import hashlib
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

REPLACE_ON = {
    "gcp:compute/instance:Instance": {"guestAccelerators", "metadataStartupScript", "bootDisk", "scheduling", "zone"},
    "azure-native:compute:VirtualMachine": {"customData", "priority", "osDisk", "location"},
    "aws:autoscaling/group:Group": {"placementGroup"},
    "aws:ec2/vpc:Vpc": {"cidrBlock"},
    "gcp:compute/network:Network": set(),
    "azure-native:network:VirtualNetwork": {"location"},
}
NETWORK = {"aws": "aws:ec2/vpc:Vpc", "gcp": "gcp:compute/network:Network",
           "azure": "azure-native:network:VirtualNetwork"}
VM = {"gcp": "gcp:compute/instance:Instance", "azure": "azure-native:compute:VirtualMachine",
      "aws": "aws:ec2/instance:Instance"}


def save():
    db_path.write_text(json.dumps(db))


def opt(name):
    return argv[argv.index(name) + 1] if name in argv else None


def fail_here(op):
    return os.environ.get("FAKE_PULUMI_FAIL") == f"{op}:{cwd.name}"


def digest(*parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def project_name():
    for line in (cwd / "Pulumi.yaml").read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    return cwd.name


def model(plan, stack):
    """URN -> {type, inputs} of what the program would declare, in declaration order."""
    cloud, deploy = cwd.name, plan.get("deploy") or {}
    prefix = f"urn:pulumi:{stack}::{project_name()}::"
    component = f"hetinfra:{cloud}:GpuFleet"
    res = {}

    def add(rtype, name, inputs, child=True):
        res[prefix + (f"{component}${rtype}" if child else rtype) + "::" + name] = {"type": rtype, "inputs": inputs}

    engine = {k: deploy.get(k) for k in ("vllm_version", "runtime", "port")}
    for region in sorted({a["region"] for a in plan["allocations"]}):
        fleet = f"{plan['service']}-{cloud}-{region}"
        add(component, fleet, {}, child=False)
        add(NETWORK[cloud], f"{fleet}-net", {"cidrBlock": (deploy.get("network_cidrs") or {}).get(f"{cloud}/{region}")})
        for a in [a for a in plan["allocations"] if a["region"] == region]:
            unit, nodes = a["deployment_unit"], int(a.get("nodes_per_replica") or 1)
            boot = digest(engine, a["model"], a["tp"], a["pp"])
            names = [(unit, a["count"], None)] if nodes == 1 and cloud == "aws" else \
                [(f"{unit}-r{r}-n{k}", 1, r) for r in range(a["count"]) for k in range(nodes)]
            for name, size, replica in names:
                if cloud == "aws":
                    add("aws:ec2/launchTemplate:LaunchTemplate", f"{name}-lt",
                        {"instanceType": a["instance_type"], "userData": boot, "diskGb": deploy.get("disk_gb")})
                    add("aws:autoscaling/group:Group", f"{name}-asg",
                        {"desiredCapacity": size, "minSize": size, "capacityRebalance": bool(a["spot"]),
                         "placementGroup": f"{unit}-r{replica}-pg" if nodes > 1 else None})
                elif cloud == "gcp":
                    add(VM[cloud], name, {"machineType": a["instance_type"], "metadataStartupScript": boot,
                                          "guestAccelerators": [{"type": a["gpu"], "count": a["gpus_per_instance"]}],
                                          "scheduling": {"provisioningModel": "SPOT" if a["spot"] else "STANDARD"},
                                          "bootDisk": {"size": deploy.get("disk_gb")}})
                else:
                    add(VM[cloud], name, {"vmSize": a["instance_type"], "customData": boot,
                                          "priority": "Spot" if a["spot"] else "Regular",
                                          "osDisk": {"diskSizeGB": deploy.get("disk_gb")}})
        if (deploy.get("gateway") or {}).get("enabled"):
            add(VM[cloud], f"{fleet}-gateway", {"gateway": digest(deploy.get("gateway"))})
    return res


def state_of(urn, r):
    return {"urn": urn, "custom": not r["type"].startswith("hetinfra:"), "type": r["type"], "inputs": r["inputs"]}


def preview_doc(stack, config):
    old = stack.get("resources", {})
    new = model(json.loads((cwd / "plan.json").read_text()), opt("--stack"))
    steps, replaced, summary = [], [], {}
    for urn, r in new.items():
        before = old.get(urn)
        if before is None:
            op, diff = "create", []
        else:
            diff = sorted(k for k in set(before["inputs"]) | set(r["inputs"]) if before["inputs"].get(k) != r["inputs"].get(k))
            forced = [k for k in diff if k in REPLACE_ON.get(r["type"], set())]
            op = "replace" if forced else "update" if diff else "same"
        summary[op] = summary.get(op, 0) + 1
        step = {"op": op, "urn": urn, "provider": "", "newState": state_of(urn, r)}
        if before is not None:
            step["oldState"] = state_of(urn, before)
        if op in ("update", "replace"):
            step["diffReasons"] = diff
            step["detailedDiff"] = {k: {"kind": "update-replace" if op == "replace" and k in forced else "update",
                                        "inputDiff": True} for k in diff}
        if op == "replace":
            step["replaceReasons"] = forced
            steps.append(dict(step, op="create-replacement"))
            replaced.append({"op": "delete-replaced", "urn": urn, "provider": "", "oldState": state_of(urn, before)})
        steps.append(step)
    for urn in reversed([u for u in old if u not in new]):  # children before their parents
        summary["delete"] = summary.get("delete", 0) + 1
        steps.append({"op": "delete", "urn": urn, "provider": "", "oldState": state_of(urn, old[urn])})
    return {"config": {k: "[secret]" if v["secret"] else v["value"] for k, v in config.items()},
            "steps": steps + replaced, "duration": 1520000000, "changeSummary": summary}


if argv[:1] == ["version"]:
    print("v3.272.0")
elif argv[:2] == ["stack", "select"]:
    if opt("--stack") not in db.get(key, {}):
        print(f"error: no stack named '{opt('--stack')}' found", file=sys.stderr)
        sys.exit(255)
elif argv[:2] == ["stack", "init"]:
    name = opt("--stack") or argv[2]
    db.setdefault(key, {})[name] = {"config": {}, "outputs": {}, "history": [], "resources": {}}
    save()
elif argv[:2] == ["config", "set-all"]:
    stack = db[key][opt("--stack")]
    for i, a in enumerate(argv):
        if a in ("--secret", "--plaintext"):
            k, v = argv[i + 1].split("=", 1)
            stack["config"][k] = {"secret": a == "--secret", "value": v}
    save()
elif argv[:2] == ["config", "set"]:
    stack = db[key][opt("--stack")]
    words = [a for a in argv[2:] if a not in ("--secret", "--plaintext", "--stack", "--", opt("--stack"))]
    value = words[1] if len(words) > 1 else sys.stdin.read()
    if len(words) == 1 and value.endswith("\n"):
        value = value[:-1]
    stack["config"][words[0]] = {"secret": "--secret" in argv, "value": value}
    save()
elif argv[:1] == ["preview"]:
    stack = db[key][opt("--stack")]
    missing = "hetinfra:apiKey" not in stack["config"]
    if fail_here("preview") or missing:
        message = ("Missing required configuration variable 'hetinfra:apiKey'" if missing else
                   "googleapi: Error 403: Required 'compute.instances.create' permission for 'projects/demo'")
        print(json.dumps({"steps": [], "diagnostics": [{"urn": "", "prefix": "error: ", "message": message,
                                                        "severity": "error"}]}))
        print(f"error: preview failed: {message}", file=sys.stderr)
        sys.exit(255)
    print(json.dumps(preview_doc(stack, stack["config"]), indent=4))
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
    stack["resources"] = model(plan, opt("--stack"))
    stack["history"].append({"kind": "update", "result": "succeeded", "n": len(stack["resources"])})
    save()
    print(f"Updating ({opt('--stack')}):\n Resources:\n    {len(stack['resources'])} in the stack")
elif argv[:1] == ["destroy"]:
    stack = db[key][opt("--stack")]
    if fail_here("destroy"):
        print("error: deleting resources: timeout", file=sys.stderr)
        sys.exit(255)
    stack["outputs"], stack["resources"] = {}, {}
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
