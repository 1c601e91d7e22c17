#!/usr/bin/env python3
"""A recording stand-in for the `pulumi` CLI (the real binary cannot be installed here).

The Automation API runs it exactly as it would run the CLI. Every call is appended to
$FAKE_PULUMI_LOG as JSON ({"argv", "cwd", "passphrase", "backend", "python"}: the last two are
$PULUMI_BACKEND_URL and $PULUMI_PYTHON_CMD). It keeps per-project stacks, config, outputs and
resources in $FAKE_PULUMI_HOME/db.json, and on `up` computes what the real program would create and
export from the project's plan.json (one load balancer endpoint per unit; the `units` output; a
self-healing group per unit, or per node of a pipeline replica: an AWS Auto Scaling group with a
target group, a GCP managed instance group, an Azure scale set; `vms`: group -> its cloud name).

What the groups are in the cloud lives in the same file under "cloud" (physical id -> record,
tests/deploy/fake_cloud.py), so a test can change the cloud behind Pulumi's back (a group loses
or recreates instances, is resized). As the real CLI does, `up` trusts the state (a group resized
in the cloud keeps its old size in it) unless it runs with --refresh; `refresh` adopts the cloud:
a deleted group leaves the state, a group's size is read back.
New AWS instances pass their load balancer's health check unless $FAKE_CLOUD_TARGET_HEALTH says
otherwise ("initial": still starting, "unhealthy": vLLM does not answer). $FAKE_PULUMI_FAIL="up:gcp" makes `up` fail in the project folder named gcp (like a quota error from
the provider); "refresh:aws" makes `refresh` fail there (like expired credentials).

`preview --json` diffs a model of what the program declares (stack "declared": URN -> {type,
inputs}: per region a fleet component and its network; per unit, or per node of a pipeline
replica, AWS a launch template and an Auto Scaling group, GCP an instance template and a managed
instance group, Azure a scale set; the gateway VM) against the last `up`, and prints Pulumi's
previewDigest: steps[] {op, urn, provider, oldState, newState, diffReasons, replaceReasons,
detailedDiff} with a replacement as create-replacement + replace ... delete-replaced, and
changeSummary. Inputs in REPLACE_ON force a replacement, as the providers' force-new fields do (an
instance template is immutable; a scale set's priority); other changed inputs are in-place
updates. "preview:gcp" in $FAKE_PULUMI_FAIL makes `preview` fail there with an error diagnostic.
`config set KEY` without a value reads it from stdin and drops one trailing newline, as the CLI
does when stdin is not a terminal.

The project folder named ``kubernetes`` (deploy.target kubernetes) is the pulumi-kubernetes program:
its preview, up, refresh and destroy are tests/deploy/fake_pulumi_kube.py's, against the Kubernetes
API server of the project's kubeconfig context.
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
cloud_db = db.setdefault("cloud", {})
key = str(cwd)
sys.path.insert(0, os.environ["FAKE_PULUMI_REPO"])
from tests.deploy import fake_pulumi_kube as kube  # noqa: E402
from tests.deploy.fake_cloud import launch  # noqa: E402

KUBE = cwd.name == "kubernetes"  # the pulumi-kubernetes project, not a cloud's VM stack

#: cloud -> (the group's type token, its kind: resource name suffix and cloud record kind, where its size is)
GROUP = {"aws": ("aws:autoscaling/group:Group", "asg", ("desiredCapacity",)),
         "gcp": ("gcp:compute/instanceGroupManager:InstanceGroupManager", "mig", ("targetSize",)),
         "azure": ("azure-native:compute:VirtualMachineScaleSet", "vmss", ("sku", "capacity"))}
KINDS = {g[0]: g for g in GROUP.values()}

REPLACE_ON = {
    "gcp:compute/instance:Instance": {"guestAccelerators", "metadataStartupScript", "bootDisk", "scheduling", "zone"},
    # instance templates are immutable: any change makes a new one (the group then rolls to it)
    "gcp:compute/instanceTemplate:InstanceTemplate": {"machineType", "metadataStartupScript", "guestAccelerators",
                                                      "scheduling", "disks"},
    "azure-native:compute:VirtualMachine": {"customData", "priority", "osDisk", "location"},
    "azure-native:compute:VirtualMachineScaleSet": {"priority"},
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


def digest(text):
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def size_of(r):
    v = r["outputs"]
    for k in KINDS[r["type"]][2]:
        v = v[k]
    return v


def program(plan, stack_name):
    """(resources, units output, vms output) the real program would create for this project's plan."""
    from hetinfra.stacks.fleet import vm_name

    cloud = cwd.name
    typ, suffix, _ = GROUP[cloud]
    project = f"hetinfra-{plan['service']}-{cloud}"
    gcp_project = (plan.get("deploy") or {}).get("gcp_project") or "demo-project-1"
    resources, units, vms = [], {}, {}
    for a in plan["allocations"]:
        unit, nodes = a["deployment_unit"], a["nodes_per_replica"]
        groups = [(None, 0, unit, a["count"])] if nodes == 1 else \
            [(r, k, vm_name(unit, r, k), 1) for r in range(a["count"]) for k in range(nodes)]
        members = []
        for replica, rank, gname, size in groups:
            res = f"{gname}-{suffix}"
            physical = f"{gname}-{digest(res)}"
            urn = f"urn:pulumi:{stack_name}::{project}::hetinfra:{cloud}:GpuFleet${typ}::{res}"
            member = {"resource": res, "type": typ, "replica": replica, "rank": rank, "name": physical}
            if cloud == "aws":
                outputs = {"name": physical, "desiredCapacity": size}
            elif cloud == "gcp":
                outputs = {"name": physical, "targetSize": size, "zone": f"{a['region']}-a", "project": gcp_project}
                member.update(zone=outputs["zone"], project=gcp_project)
            else:
                physical = (f"/subscriptions/sub-1/resourceGroups/rg-{digest(unit)}/providers/Microsoft.Compute/"
                            f"virtualMachineScaleSets/{gname}")
                outputs = {"name": gname, "id": physical, "sku": {"name": a["instance_type"], "capacity": size}}
                member.update(name=gname, id=physical)
            resources.append({"urn": urn, "type": typ, "id": physical, "outputs": outputs, "unit": unit,
                              "head": rank == 0})
            members.append(member)
            vms[gname] = outputs["name"]
        units[unit] = {"replicas": a["count"], "nodes": nodes, "members": members}
        if cloud == "aws":
            units[unit]["target_group"] = f"arn:aws:elasticloadbalancing:{a['region']}:123456789012:targetgroup/" \
                                          f"hi-{digest(unit)}/{digest(unit + 'tg')}"
    return resources, units, vms


def images(plan, stack):
    """The `images` output: per region and role the image pinned in `hetinfra:images`, else the
    newest ($FAKE_CLOUD_NEWEST_IMAGE; Azure: version 'latest'), and the newest found."""
    pins = json.loads((stack["config"].get("hetinfra:images") or {}).get("value") or "{}")
    newest = "latest" if cwd.name == "azure" else os.environ.get("FAKE_CLOUD_NEWEST_IMAGE", f"{cwd.name}-image-1")
    roles = ("gpu", "gateway") if ((plan.get("deploy") or {}).get("gateway") or {}).get("enabled") else ("gpu",)
    return {region: {role: {"id": (pins.get(region) or {}).get(role) or newest, "latest": newest} for role in roles}
            for region in sorted({a["region"] for a in plan["allocations"]})}


def refresh(stack):
    """Adopt the cloud: groups it no longer has leave the state; their sizes are read back."""
    kept = []
    for r in stack.get("resources", []):
        rec = cloud_db.get(r["id"])
        if rec is None:
            continue
        where = r["outputs"]
        for k in KINDS[r["type"]][2][:-1]:
            where = where[k]
        where[KINDS[r["type"]][2][-1]] = rec["desired"]
        kept.append(r)
    stack["resources"] = kept


def create_in_cloud(r):
    """Create or update the group in the cloud: it launches up to its size."""
    rec = cloud_db.setdefault(r["id"], {"kind": KINDS[r["type"]][1], "unit": r["unit"], "instances": [],
                                        "name": r["outputs"]["name"], "id": r["id"], "head": r["head"],
                                        "zone": r["outputs"].get("zone"), "project": r["outputs"].get("project")})
    rec["desired"] = size_of(r)
    rec["target_group"] = r.get("target_group")
    rec["new_target"] = os.environ.get("FAKE_CLOUD_TARGET_HEALTH", "healthy")
    launch(rec)


def inputs_digest(*parts):
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
    image = images(plan, db[key][stack])  # the pinned image, else the newest: what the program would use
    for region in sorted({a["region"] for a in plan["allocations"]}):
        gpu_image = image[region]["gpu"]["id"]
        fleet = f"{plan['service']}-{cloud}-{region}"
        add(component, fleet, {}, child=False)
        add(NETWORK[cloud], f"{fleet}-net", {"cidrBlock": (deploy.get("network_cidrs") or {}).get(f"{cloud}/{region}")})
        for a in [a for a in plan["allocations"] if a["region"] == region]:
            unit, nodes = a["deployment_unit"], int(a.get("nodes_per_replica") or 1)
            boot = inputs_digest(engine, a["model"], a["tp"], a["pp"])
            names = [(unit, a["count"], None)] if nodes == 1 else \
                [(f"{unit}-r{r}-n{k}", 1, r) for r in range(a["count"]) for k in range(nodes)]
            for name, size, replica in names:
                if cloud == "aws":
                    add("aws:ec2/launchTemplate:LaunchTemplate", f"{name}-lt",
                        {"instanceType": a["instance_type"], "userData": boot, "diskGb": deploy.get("disk_gb"),
                         "imageId": gpu_image})
                    add("aws:autoscaling/group:Group", f"{name}-asg",
                        {"desiredCapacity": size, "minSize": size, "capacityRebalance": bool(a["spot"]),
                         "placementGroup": f"{unit}-r{replica}-pg" if nodes > 1 else None})
                elif cloud == "gcp":
                    add("gcp:compute/instanceTemplate:InstanceTemplate", f"{name}-tpl",
                        {"machineType": a["instance_type"], "metadataStartupScript": boot,
                         "guestAccelerators": [{"type": a["gpu"], "count": a["gpus_per_instance"]}],
                         "scheduling": {"provisioningModel": "SPOT" if a["spot"] else "STANDARD"},
                         "disks": {"size": deploy.get("disk_gb"), "sourceImage": gpu_image}})
                    add(GROUP[cloud][0], f"{name}-mig", {"targetSize": size, "version": {"instanceTemplate": boot}})
                else:
                    add(GROUP[cloud][0], f"{name}-vmss",
                        {"sku": {"name": a["instance_type"], "capacity": size}, "customData": boot,
                         "priority": "Spot" if a["spot"] else "Regular", "osDisk": {"diskSizeGB": deploy.get("disk_gb")},
                         "imageReference": {"version": gpu_image}})
        if (deploy.get("gateway") or {}).get("enabled"):
            add(VM[cloud], f"{fleet}-gateway", {"gateway": inputs_digest(deploy.get("gateway"))})
    return res


def state_of(urn, r):
    return {"urn": urn, "custom": not r["type"].startswith("hetinfra:"), "type": r["type"], "inputs": r["inputs"]}


def preview_doc(stack, config):
    old = stack.get("declared", {})
    plan = json.loads((cwd / "plan.json").read_text())
    new = kube.model(plan, opt("--stack"), project_name(), config) if KUBE else model(plan, opt("--stack"))
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
    db.setdefault(key, {})[name] = {"config": {}, "outputs": {}, "history": [], "resources": [], "declared": {}}
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
    if KUBE:
        created = kube.up(stack, json.loads((cwd / "plan.json").read_text()), opt("--stack"), project_name(),
                          refreshed="--refresh" in argv)
        stack["history"].append({"kind": "update", "result": "succeeded", "n": len(stack["declared"])})
        save()
        print(f"Updating ({opt('--stack')}):\n Resources:\n    + {created} created")
        sys.exit(0)
    if "--refresh" in argv:
        refresh(stack)
    plan = json.loads((cwd / "plan.json").read_text())
    port = (plan.get("deploy") or {}).get("port", 8000)
    base = os.environ.get("FAKE_PULUMI_ENDPOINT")  # e.g. a loopback server for health checks
    endpoints = {}
    for n, a in enumerate(plan["allocations"], start=1):  # one load balancer per unit
        unit = a["deployment_unit"]
        endpoints[unit] = [f"{base}/{unit}/v1" if base else f"http://203.0.113.{n}:{port}/v1"]
    wanted, units, vms = program(plan, opt("--stack"))
    have = {r["urn"]: r for r in stack.get("resources", [])}
    created = 0
    for r in wanted:
        r["target_group"] = units[r["unit"]].get("target_group")
        old = have.get(r["urn"])
        if old is None or old["outputs"] != r["outputs"]:  # create, or set a group's size back
            created += old is None
            create_in_cloud(r)
    for urn, r in have.items():  # resources the program no longer declares are deleted
        if urn not in {w["urn"] for w in wanted}:
            cloud_db.pop(r["id"], None)
    stack["resources"] = wanted
    n = sum(a["count"] * a["nodes_per_replica"] for a in plan["allocations"])
    stack["outputs"] = {"endpoints": endpoints, "vms": vms, "units": units, "images": images(plan, stack)}
    gateway = (plan.get("deploy") or {}).get("gateway") or {}
    if gateway.get("enabled"):  # one gateway per fleet region of this project's cloud
        regions = sorted({a["region"] for a in plan["allocations"] if a["cloud"] == cwd.name})
        base = os.environ.get("FAKE_PULUMI_GATEWAY")
        stack["outputs"]["gateways"] = {
            f"{plan['service']}-{cwd.name}-{r}": f"{base}/v1" if base else f"http://198.51.100.{k + 1}:{gateway.get('port', 8080)}/v1"
            for k, r in enumerate(regions)}
    stack["declared"] = model(plan, opt("--stack"))
    stack["history"].append({"kind": "update", "result": "succeeded", "n": len(stack["declared"])})
    save()
    print(f"Updating ({opt('--stack')}):\n Resources:\n    + {created} created")
elif argv[:1] == ["refresh"]:
    stack = db[key][opt("--stack")]
    if fail_here("refresh"):
        print("error: refreshing: InvalidClientTokenId: The security token included in the request is invalid",
              file=sys.stderr)
        sys.exit(255)
    before = len(stack.get("resources", []))
    (kube.refresh if KUBE else refresh)(stack)
    stack["history"].append({"kind": "refresh", "result": "succeeded", "n": 0})
    save()
    print(f"Refreshing ({opt('--stack')}):\n Resources:\n    - {before - len(stack['resources'])} deleted")
elif argv[:1] == ["destroy"]:
    stack = db[key][opt("--stack")]
    if fail_here("destroy"):
        print("error: deleting resources: timeout", file=sys.stderr)
        sys.exit(255)
    if KUBE:
        kube.destroy(stack)
    for r in stack.get("resources", []):
        cloud_db.pop(r["id"], None)
    stack["outputs"], stack["resources"], stack["declared"] = {}, [], {}
    stack["history"].append({"kind": "destroy", "result": "succeeded", "n": 0})
    save()
    print(" Resources:\n    - deleted")
elif argv[:3] == ["stack", "output", "--json"]:
    print(json.dumps(db[key][opt("--stack")]["outputs"]))
elif argv[:2] == ["stack", "export"]:
    stack = db[key][opt("--stack")]
    resources = [{k: v for k, v in r.items() if k in ("urn", "type", "id", "outputs")}
                 for r in stack.get("resources", [])]
    print(json.dumps({"version": 3, "deployment": {"manifest": {"version": "v3.272.0"}, "resources": resources}}))
elif argv[:3] == ["stack", "history", "--json"]:
    hist = db[key][opt("--stack")]["history"]
    last = hist[-1] if hist else {"kind": "update", "result": "succeeded", "n": 0}
    print(json.dumps([{"version": len(hist), "kind": last["kind"], "result": last["result"], "message": "",
                       "environment": {}, "config": {},
                       "startTime": "2026-11-21T10:00:00.000Z", "endTime": "2026-11-21T10:05:00.000Z",
                       "resourceChanges": {"create": last["n"]}}]))
# anything else (whoami, about, ...) succeeds silently
