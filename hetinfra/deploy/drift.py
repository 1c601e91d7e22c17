"""Drift and cost: how many replicas of each unit really run, read from the clouds.

``hetinfra status`` and ``hetinfra replan`` read each running unit's live replicas:

- **Pulumi units**: ``pulumi refresh`` of each cloud's stack (the state adopts what the cloud has:
  a spot VM that was preempted and deleted leaves it, a group resized outside Pulumi shows its new
  size), then the refreshed resources (``pulumi stack export``) that the stack's ``units`` output
  names as the unit's capacity (``hetinfra.stacks.common.unit_output``):

  - a VM (GCP instance, Azure VM) is one node: live while it runs (GCP ``currentStatus``
    RUNNING; an Azure VM still in the state exists, as spot eviction deletes it); gone from the
    state it is **lost**, and the next ``pulumi up`` (``hetinfra apply``, ``replan --apply``)
    recreates it;
  - an AWS Auto Scaling group: its size (``desiredCapacity``; below the plan: lost, ``pulumi up``
    restores it) and its instances from the Auto Scaling API (boto3, with the credentials Pulumi
    uses): InService and Healthy are live, other instances are unhealthy, and instances it lacks
    (a spot instance reclaimed, not yet replaced) the group is **replacing** by itself.

- **SkyServe units**: ``sky serve status``: READY replicas are live; provisioning, starting, not
  ready or failed ones unhealthy; preempted or missing ones SkyServe is replacing.

The cost of what runs is the instances that exist (serving or not: they bill) at the plan's price.
A read is recorded in state.json under ``live`` (see :func:`record`), so ``status --no-refresh``
shows the last one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.deploy import pulumi_driver, sky_driver
from hetinfra.deploy.state import DeployState, now
from hetinfra.errors import ProviderError

GCE_VM = "gcp:compute/instance:Instance"
AZURE_VM = "azure-native:compute:VirtualMachine"
AWS_VM = "aws:ec2/instance:Instance"
AWS_GROUP = "aws:autoscaling/group:Group"
NO_REFRESH_HINT = "`hetinfra status OUT --no-refresh` shows what state.json records without asking the clouds"


@dataclass
class UnitLive:
    """One running unit: planned (``desired``) against live replicas, and the instances behind them."""

    unit: str
    path: str
    cloud: str
    region: str
    instance_type: str
    gpu: str
    spot: bool
    nodes: int  # instances per replica
    desired: int  # replicas state.json says run
    price: float  # $/h of one instance (a mixed pipeline: the mean of its stages)
    live: int | None = None  # replicas whose every node runs and is healthy; None: not readable
    unhealthy: int = 0  # instances that exist but do not serve (starting, failing checks, stopped)
    lost: int = 0  # instances gone that `pulumi up` recreates (hetinfra apply, replan --apply)
    replacing: int = 0  # instances a self-healing group or SkyServe is replacing by itself
    running: int = 0  # instances that exist and bill
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def short(self) -> int:
        """Replicas missing from the plan's count (0 when all run, or when unreadable)."""
        return max(0, self.desired - self.live) if self.live is not None else 0

    def doc(self) -> dict:
        planned = self.desired * self.nodes * self.price
        return {"unit": self.unit, "path": self.path, "cloud": self.cloud, "region": self.region,
                "instance_type": self.instance_type, "gpu": self.gpu, "spot": self.spot, "nodes": self.nodes,
                "desired": self.desired, "live": self.live, "unhealthy": self.unhealthy, "lost": self.lost,
                "replacing": self.replacing, "running_instances": self.running,
                "planned_cost_usd_per_hour": round(planned, 4),
                "cost_usd_per_hour": round(self.running * self.price, 4) if self.live is not None else None,
                "source": self.source, "notes": list(self.notes)}


def _unit(a: dict) -> UnitLive:
    nodes = int(a.get("nodes_per_replica") or 1)
    instances = int(a.get("instances") or a["count"] * nodes)
    return UnitLive(a["deployment_unit"], a["path"], a["cloud"], a["region"], a["instance_type"], a["gpu"],
                    bool(a["spot"]), nodes, int(a["count"]), float(a["cost_usd_per_hour"]) / max(1, instances))


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _vm_up(res: dict) -> bool:
    out = res.get("outputs") or {}
    if res["type"] == GCE_VM:
        return out.get("currentStatus", "RUNNING") == "RUNNING"
    if res["type"] == AWS_VM:
        return out.get("instanceState", "running") == "running"
    return True  # an Azure VM in the refreshed state exists (spot eviction deletes it)


def _count_pulumi(u: UnitLive, entry: dict | None, resources: dict, groups: dict) -> None:
    """Fill ``u`` from the unit's ``units`` output entry, the refreshed resources by (type, name)
    and the Auto Scaling groups' instances by group name."""
    if not entry or not entry.get("members"):
        u.notes.append("the stack exports no live capacity for this unit (deployed by an older hetinfra?): "
                       "`hetinfra apply` updates it")
        return
    pooled, per_replica = 0, {}
    for m in entry["members"]:
        res = resources.get((m["type"], m["resource"]))
        planned = (u.desired if m.get("replica") is None else 1)
        if m["type"] in (GCE_VM, AZURE_VM, AWS_VM):
            healthy = 0
            if res is None:
                u.lost += 1
            elif _vm_up(res):
                healthy, u.running = 1, u.running + 1
            else:
                u.unhealthy += 1
        elif m["type"] == AWS_GROUP:
            if res is None:
                u.lost += planned
                healthy = 0
            else:
                size = int((res.get("outputs") or {}).get("desiredCapacity", planned))
                u.lost += max(0, planned - size)
                name = (res.get("outputs") or {}).get("name") or m.get("name")
                healthy, other = groups.get(name, (0, 0))
                u.unhealthy += other
                u.running += healthy + other
                u.replacing += max(0, size - healthy - other)
        else:
            u.notes.append(f"no live reader for {m['type']} ({m['resource']})")
            return
        if m.get("replica") is None:
            pooled += healthy
        else:
            per_replica[m["replica"]] = per_replica.get(m["replica"], 0) + healthy
    u.live = pooled + sum(1 for n in per_replica.values() if n >= u.nodes)


def aws_group_instances(region: str, names: list[str]) -> dict[str, tuple[int, int]]:
    """Auto Scaling groups' instances (boto3 ``describe_auto_scaling_groups``): group name ->
    (InService and Healthy, any other instance). Exit 4 when the API cannot be read."""
    from hetinfra.price_feeds.aws_api import client_factory, session_or_warning

    session, why = session_or_warning()
    if session is None:
        raise ProviderError(f"cannot read the Auto Scaling groups in {region}: {why}", hint=NO_REFRESH_HINT)
    client = client_factory(session)("autoscaling", region)
    out: dict[str, tuple[int, int]] = {}
    try:
        for i in range(0, len(names), 50):  # the API takes at most 50 names per call
            pages = client.get_paginator("describe_auto_scaling_groups").paginate(AutoScalingGroupNames=names[i:i + 50])
            for page in pages:
                for g in page.get("AutoScalingGroups", []):
                    ok = sum(1 for x in g.get("Instances", [])
                             if x.get("LifecycleState") == "InService" and x.get("HealthStatus") == "Healthy")
                    out[g["AutoScalingGroupName"]] = (ok, len(g.get("Instances", [])) - ok)
    except Exception as exc:  # botocore raises ClientError, EndpointConnectionError, NoCredentialsError...
        raise ProviderError(f"cannot read the Auto Scaling groups in {region}: {type(exc).__name__}: {exc}",
                            hint="check the AWS credentials (`aws sts get-caller-identity`); " + NO_REFRESH_HINT) from None
    return out


def _pulumi_cloud(out: Path, cloud: str, units: list[UnitLive], state: DeployState, plan: dict | None, command,
                  refresh: bool, log: Callable[[str], None]) -> None:
    stack = (state.doc["pulumi"].get(cloud) or {}).get("stack") or ((plan or {}).get("deploy") or {}).get("stack", "prod")
    project = pulumi_driver.PulumiProject(out / "pulumi" / cloud, stack, command, on_output=log, plan=plan)
    try:
        if refresh:
            project.refresh()
        resources = {(r.get("type"), _name(r.get("urn", ""))): r for r in project.resources()}
        outputs = project.outputs()
    except ProviderError:
        raise
    except Exception as exc:  # the Automation API raises CommandError and friends
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        raise ProviderError(f"pulumi refresh of the {cloud} stack failed: {' | '.join(lines[-3:])}",
                            hint="check the cloud's credentials and PULUMI_CONFIG_PASSPHRASE; " + NO_REFRESH_HINT) from None
    entries = outputs.get("units") or {}
    groups: dict[str, tuple[int, int]] = {}
    by_region: dict[str, list[str]] = {}
    for u in units:
        for m in (entries.get(u.unit) or {}).get("members") or []:
            res = resources.get((m["type"], m["resource"]))
            if m["type"] == AWS_GROUP and res is not None:
                by_region.setdefault(u.region, []).append((res.get("outputs") or {}).get("name") or m.get("name"))
    for region, names in sorted(by_region.items()):
        groups.update(aws_group_instances(region, sorted(set(names))))
    for u in units:
        u.source = "pulumi refresh" + (" + Auto Scaling API" if by_region.get(u.region) else "") if refresh \
            else "pulumi state"
        _count_pulumi(u, entries.get(u.unit), resources, groups)


SKY_LIVE = {"READY"}
SKY_REPLACING = {"PENDING", "PREEMPTED"}


def _sky_units(units: list[UnitLive]) -> None:
    records = {r.get("name"): r for r in sky_driver.serve_status([u.unit for u in units])}
    for u in units:
        u.source = "sky serve status"
        rec = records.get(u.unit)
        if rec is None:
            u.live, u.replacing = 0, u.desired * u.nodes
            u.notes.append("SkyServe does not know this service (taken down outside hetinfra?)")
            continue
        statuses = [str(getattr(r.get("status"), "value", r.get("status"))) for r in rec.get("replica_info") or []]
        u.live = sum(1 for s in statuses if s in SKY_LIVE)
        waiting = sum(1 for s in statuses if s in SKY_REPLACING)
        other = len(statuses) - u.live - waiting
        u.unhealthy = other * u.nodes
        u.running = (u.live + sum(1 for s in statuses if s in ("PROVISIONING", "STARTING", "NOT_READY"))) * u.nodes
        u.replacing = max(0, u.desired - u.live - other) * u.nodes


def read_live(out: Path, state: DeployState, *, refresh: bool = True, pulumi_command=None, env: dict | None = None,
              log: Callable[[str], None] | None = None) -> dict:
    """Read every running unit's live replicas from the clouds (see the module docstring); returns
    the ``live`` document (:func:`record` keeps it in state.json)."""
    env = dict(os.environ) if env is None else env
    plan = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else None
    units = [_unit(a) for a in sorted(state.allocations, key=lambda a: (a["path"], a["cloud"], a["region"],
                                                                       a["deployment_unit"]))]
    quiet = log or (lambda _line: None)
    clouds = sorted({u.cloud for u in units if u.path == "pulumi"})
    if clouds:
        pulumi_driver.check_ready(clouds, pulumi_driver.backend_urls(plan, clouds), env)
        command = pulumi_command or pulumi_driver.pulumi_command()
        for cloud in clouds:
            _pulumi_cloud(out, cloud, [u for u in units if u.path == "pulumi" and u.cloud == cloud], state, plan,
                          command, refresh, quiet)
    sky = [u for u in units if u.path == "skypilot"]
    if sky:
        _sky_units(sky)
    return live_doc(units, refreshed=refresh)


def live_doc(units: list[UnitLive], *, refreshed: bool) -> dict:
    known = [u for u in units if u.live is not None]
    return {"read_at": now(), "refreshed": refreshed,
            "desired_replicas": sum(u.desired for u in units), "live_replicas": sum(u.live for u in known),
            "cost_usd_per_hour": round(sum(u.running * u.price for u in known), 4),
            "planned_cost_usd_per_hour": round(sum(u.desired * u.nodes * u.price for u in units), 4),
            "drift": [drift_line(u) for u in units if u.short or u.lost or u.live is None],
            "units": {u.unit: u.doc() for u in units}}


def drift_line(u: UnitLive) -> str:
    """One line saying what is missing from a unit and who restores it."""
    if u.live is None:
        return f"{u.unit}: live replicas unknown ({'; '.join(u.notes) or 'not readable'})"
    parts = []
    if u.lost:
        parts.append(f"{u.lost} instance(s) gone (preempted or deleted): `pulumi up` recreates them "
                     "(hetinfra apply, replan --apply)")
    if u.replacing:
        parts.append(f"{u.replacing} instance(s) missing that the {'SkyServe service' if u.path == 'skypilot' else 'group'}"
                     " is replacing")
    if u.unhealthy:
        parts.append(f"{u.unhealthy} instance(s) not serving")
    return f"{u.unit}: {u.live} of {u.desired} replica(s) live" + (f"; {'; '.join(parts)}" if parts else "")


def record(out: Path, live: dict) -> DeployState:
    """Keep ``live`` in state.json (reloaded first: an apply may have written it meanwhile)."""
    state = DeployState.load(out)
    state.doc["live"] = live
    state.save()
    return state


def lost_replicas(live: dict) -> dict[str, int]:
    """Units with instances `pulumi up` must restore: unit -> replicas to restore."""
    out = {}
    for unit, u in (live.get("units") or {}).items():
        if u.get("live") is not None and u.get("lost"):
            out[unit] = min(u["desired"], -(-u["lost"] // max(1, u["nodes"])))
    return out


def live_lines(live: dict | None, *, updated_at: str | None = None) -> list[str]:
    """Text lines of a ``live`` document for ``hetinfra status``."""
    if not live:
        return ["live replicas: not read (run `hetinfra status OUT` without --no-refresh)"]
    how = "read from the clouds" if live.get("refreshed") else "read from the Pulumi state without a refresh"
    lines = [f"live: {live['live_replicas']} of {live['desired_replicas']} replica(s); "
             f"${live['cost_usd_per_hour']:,.2f}/h running (planned ${live['planned_cost_usd_per_hour']:,.2f}/h); "
             f"{how} at {live['read_at']}"]
    lines.append(f"  {'path':<8} {'unit':<52} {'desired':>7} {'live':>4} {'unhealthy':>9} {'lost':>4} "
                 f"{'replacing':>9} {'$/h now':>9}")
    for name, u in sorted(live["units"].items(), key=lambda kv: (kv[1]["path"], kv[0])):
        cost = "?" if u["cost_usd_per_hour"] is None else f"{u['cost_usd_per_hour']:,.2f}"
        live_n = "?" if u["live"] is None else str(u["live"])
        lines.append(f"  {u['path']:<8} {name:<52} {u['desired']:>7} {live_n:>4} {u['unhealthy']:>9} {u['lost']:>4} "
                     f"{u['replacing']:>9} {cost:>9}")
    lines += [f"drift: {d}" for d in live.get("drift") or []]
    return lines


def running_now(allocations: list[dict], live: dict) -> tuple[list[dict], list[str], list[str]]:
    """What runs for a re-plan: ``allocations`` (state.json's) less the replicas whose instances
    are gone and that only `pulumi up` brings back (a unit left with none is dropped); lines that
    force restoring them; lines on what groups and SkyServe are replacing by themselves."""
    lost = lost_replicas(live)
    units = live.get("units") or {}
    out, forced, notes = [], [], []
    for a in allocations:
        unit = a["deployment_unit"]
        u = units.get(unit) or {}
        if u.get("replacing"):
            notes.append(f"{unit}: {u['live']} of {u['desired']} replica(s) live; the "
                         f"{'SkyServe service' if u['path'] == 'skypilot' else 'group'} is replacing "
                         f"{u['replacing']} instance(s) by itself")
        k = lost.get(unit, 0)
        if not k:
            out.append(a)
            continue
        forced.append(f"{unit}: {u['lost']} instance(s) gone (preempted or deleted); {k} replica(s) to restore")
        count = a["count"] - k
        if count > 0:
            nodes = int(a.get("nodes_per_replica") or 1)
            out.append(dict(a, count=count, instances=count * nodes,
                            cost_usd_per_hour=round(a["cost_usd_per_hour"] * count / a["count"], 4)))
    return out, forced, notes
