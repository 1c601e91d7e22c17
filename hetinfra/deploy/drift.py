"""Drift and cost: how many replicas of each unit really run, read from the clouds.

``hetinfra status`` and ``hetinfra replan`` read each running unit's live replicas:

- **Pulumi units** run in self-healing groups (an AWS Auto Scaling group, a GCP managed instance
  group, an Azure scale set: one per single-node unit, one per node of a pipeline replica; the
  stack's ``units`` output names them, hetinfra.stacks.common.unit_output). ``pulumi refresh`` of
  each cloud's stack adopts what the cloud has (a group resized or deleted outside Pulumi), then
  per group, from the refreshed state (``pulumi stack export``) and the cloud's API
  (hetinfra.deploy.groups):

  - its size below the plan (or the group gone): those instances are **lost**; only ``pulumi up``
    restores them (``hetinfra apply``, ``replan --apply``), which a re-plan forces;
  - instances serving count toward **live** replicas (a pipeline replica when every node's group
    serves); those that exist but do not serve are **unhealthy** (the group's health checks
    replace them);
  - instances the group lacks (a spot VM preempted, not yet back) or is creating are
    **replacing**: the group recreates them by itself, so a re-plan does not fight it. A unit
    whose groups are still replacing after :data:`PATIENCE_S` (every read since the first that
    found it short found it short: ``short_since``) is **stalled**: the cloud has no capacity for
    it (spot pools run dry), and ``replan`` treats those replicas as gone and moves them elsewhere.

- **SkyServe units**: ``sky serve status``: READY replicas are live; provisioning, starting, not
  ready or failed ones unhealthy; preempted or missing ones SkyServe is replacing (it fails over
  across the unit's alternates itself).

The cost of what runs is the instances that bill (serving or not) at the plan's price. A read is
recorded in state.json under ``live`` (see :func:`record`), so ``status --no-refresh`` shows the
last one and the next read knows since when a unit is short; what reads the record (status's lines,
replan's view of what runs) is in :mod:`hetinfra.deploy.live_read`.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from hetinfra.csvtext import whole_number
from hetinfra.deploy import groups, pulumi_driver, sky_driver
from hetinfra.deploy.groups import AWS_GROUP, AZURE_VMSS, GCP_MIG, NO_REFRESH_HINT, Instances
from hetinfra.deploy.state import DeployState, now
from hetinfra.document import Plan, load_plan
from hetinfra.document.bundle_shape import role_node
from hetinfra.document.state import MAX_LIVE_COUNT, RunningAllocation, State
from hetinfra.errors import ProviderError
from hetinfra.fileio import present

#: a group type -> (where its size is in the refreshed state, the API that lists its instances)
GROUPS = {AWS_GROUP: (("desiredCapacity",), "Auto Scaling API"), GCP_MIG: (("targetSize",), "Compute API"),
          AZURE_VMSS: (("sku", "capacity"), "ARM API")}
PATIENCE_S = 1800  # how long groups may be replacing instances before the unit counts as stalled


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
    stalled: int = 0  # of the replacing, those the groups have lacked for PATIENCE_S or longer
    short_since: str | None = None  # the first read of the run of reads that found groups replacing
    source: str = ""
    notes: list[str] = field(default_factory=list)
    #: a prefill/decode bundle: (role, engines per replica, nodes per replica, instance type), prefill
    #: first; nodes 0: one node runs every engine of both roles (hetinfra.compile.bundle), else the
    #: role's own nodes in the replica's placement group (its instance type may differ). A replica is
    #: live only when every node of it is, so each role's engines and nodes are the live replicas
    #: times its counts: the roles scale together at the planned ratio
    roles: tuple[tuple[str, int, int, str], ...] = ()

    def role_counts(self) -> dict[str, dict]:
        """Per role of a bundle: the engines (and across nodes, the nodes) planned and live (None: unreadable)."""
        out: dict[str, dict] = {}
        for r, n, nodes, itype in self.roles:
            out[r] = {"engines_per_replica": n, "planned": self.desired * n,
                      "live": None if self.live is None else self.live * n}
            if nodes:
                out[r].update(instance_type=itype, nodes_per_replica=nodes, nodes_planned=self.desired * nodes,
                              nodes_live=None if self.live is None else self.live * nodes)
        return out

    @property
    def short(self) -> int:
        """Replicas missing from the plan's count (0 when all run, or when unreadable)."""
        return max(0, self.desired - self.live) if self.live is not None else 0

    def doc(self) -> dict:
        planned = self.desired * self.nodes * self.price
        return {"unit": self.unit, "path": self.path, "cloud": self.cloud, "region": self.region,
                "instance_type": self.instance_type, "gpu": self.gpu, "spot": self.spot, "nodes": self.nodes,
                "desired": self.desired, "live": self.live, "unhealthy": self.unhealthy, "lost": self.lost,
                "replacing": self.replacing, "stalled": self.stalled, "short_since": self.short_since,
                "running_instances": self.running,
                "planned_cost_usd_per_hour": round(planned, 4),
                "cost_usd_per_hour": round(self.running * self.price, 4) if self.live is not None else None,
                "source": self.source, "notes": list(self.notes), **({"roles": self.role_counts()} if self.roles else {})}


def _unit(a: RunningAllocation) -> UnitLive:
    nodes, instances = a.nodes_per_replica, a.instances
    roles = tuple((r.role, r.engines, r.nodes, role_node(r, a).instance_type)
                  for r in a.disaggregation.roles) if a.disaggregation is not None else ()
    return UnitLive(a.deployment_unit, a.path, a.cloud, a.region, a.instance_type, a.gpu,
                    a.spot, nodes, a.count, float(a.cost_usd_per_hour) / max(1, instances), roles=roles)


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _size(res: dict, typ: str, planned: int) -> int:
    """A group's size in the refreshed state (the plan's when the state has none)."""
    v = res.get("outputs") or {}
    for k in GROUPS[typ][0]:
        v = v.get(k) if isinstance(v, dict) else None
    if v is None:
        return planned
    # the provider's refreshed state is an outside answer: a whole count in bounds, or exit 4
    size = None if isinstance(v, bool) or not isinstance(v, (int, str)) else whole_number(str(v))
    if size is None or size > MAX_LIVE_COUNT:
        raise ProviderError(f"{typ} {_name(res.get('urn', ''))}: the refreshed state gives its size as {str(v)[:40]!r}, "
                            f"not a whole number from 0 to {MAX_LIVE_COUNT:,}",
                            hint="run `pulumi refresh` on the stack, then `hetinfra status` again")
    return size


def _key(m: dict, res: dict) -> str:
    """How the group's API names it: the ARM id of a scale set, else the group's name."""
    out = res.get("outputs") or {}
    if m["type"] == AZURE_VMSS:
        return str(res.get("id") or out.get("id") or m.get("id"))
    return str(out.get("name") or m.get("name"))


def _read_instances(pairs: list[tuple[UnitLive, dict | None]], resources: dict | None,
                    env: Mapping[str, str]) -> dict[str, Instances]:
    """The instances of every group the units' ``units`` entries name (those still in
    ``resources``, the refreshed state; None: not refreshed, all), from each cloud's API."""
    aws: dict[str, set[str]] = {}
    gcp, azure = set(), set()
    for u, entry in pairs:
        for m in (entry or {}).get("members") or []:
            res = {} if resources is None else resources.get((m["type"], m["resource"]))
            if res is None or m["type"] not in GROUPS:
                continue
            out, head = res.get("outputs") or {}, m.get("rank", 0) == 0  # heads carry the health checks
            if m["type"] == AWS_GROUP:
                aws.setdefault(u.region, set()).add(_key(m, res))
            elif m["type"] == GCP_MIG:
                gcp.add((out.get("project") or m.get("project"), out.get("zone") or m.get("zone"), _key(m, res), head))
            else:
                azure.add((_key(m, res), head))
    found: dict[str, Instances] = {}
    for region, names in sorted(aws.items()):
        found.update(groups.aws_groups(region, sorted(names)))
    if gcp:
        found.update(groups.gcp_groups(sorted(gcp), env))
    if azure:
        found.update(groups.azure_groups(sorted(azure), env))
    return found


def _count_pulumi(u: UnitLive, entry: dict | None, resources: dict | None, found: dict[str, Instances]) -> None:
    """Fill ``u`` from the unit's ``units`` output entry, the refreshed resources by (type, name)
    (None: not refreshed, every group at its planned size) and the groups' instances by API key."""
    if not entry or not entry.get("members"):
        u.notes.append("the stack exports no live capacity for this unit (deployed by an older hetinfra?): "
                       "`hetinfra apply` updates it")
        return
    unknown = [m for m in entry["members"] if m["type"] not in GROUPS]
    if unknown:
        u.notes.append(f"no live reader for {unknown[0]['type']} ({unknown[0]['resource']})")
        return
    pooled, per_replica = 0, {}
    for m in entry["members"]:
        planned = u.desired if m.get("replica") is None else 1
        res = {} if resources is None else resources.get((m["type"], m["resource"]))
        if res is None:  # the group itself is gone
            u.lost += planned
            healthy = 0
        else:
            size = _size(res, m["type"], planned)
            u.lost += max(0, planned - size)
            got = found.get(_key(m, res), Instances())
            healthy = min(got.healthy, size)
            u.unhealthy += got.other
            u.running += got.billing
            u.replacing += max(0, size - got.healthy - got.other)
            u.notes += [n for n in (f"the cloud could not create an instance: {e}" for e in sorted(set(got.errors)))
                        if n not in u.notes]
        if m.get("replica") is None:
            pooled += healthy
        else:
            per_replica[m["replica"]] = per_replica.get(m["replica"], 0) + healthy
    u.live = pooled + sum(1 for n in per_replica.values() if n >= u.nodes)


def live_replicas(alloc: RunningAllocation, entry: dict | None, env: Mapping[str, str]) -> int:
    """Replicas of a running unit that serve now, by its groups' instances as the cloud's API lists
    them (no refresh: the groups at their planned sizes); the health wait's count."""
    u = _unit(alloc)
    _count_pulumi(u, entry, None, _read_instances([(u, entry)], None, env))
    return u.live or 0


def _pulumi_cloud(out: Path, cloud: str, units: list[UnitLive], state: DeployState, plan: Plan | None, command,
                  refresh: bool, env: Mapping[str, str], log: Callable[[str], None]) -> None:
    last = state.model.pulumi.get(cloud)
    stack = (last.stack if last else None) or (plan.deploy.stack if plan else "prod")
    project = pulumi_driver.PulumiProject(out / "pulumi" / cloud, stack, command, on_output=log,
                                          plan=plan.to_dict() if plan else None)
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
    found = _read_instances([(u, entries.get(u.unit)) for u in units], resources, env)
    for u in units:
        apis = sorted({GROUPS[m["type"]][1] for m in (entries.get(u.unit) or {}).get("members") or []
                       if m["type"] in GROUPS})
        u.source = " + ".join(["pulumi refresh" if refresh else "pulumi state"] + apis)
        _count_pulumi(u, entries.get(u.unit), resources, found)


def _seconds(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


def _stalled(units: list[UnitLive], previous: dict | None, read_at: str) -> None:
    """Carry ``short_since`` from the previous read; groups replacing for PATIENCE_S are stalled."""
    before = (previous or {}).get("units") or {}
    for u in units:
        if u.path != "pulumi" or not u.replacing:
            continue
        last = before.get(u.unit) or {}
        u.short_since = (last.get("short_since") if last.get("replacing") else None) or read_at
        if _seconds(read_at) - _seconds(u.short_since) >= PATIENCE_S:
            u.stalled = u.replacing


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
    plan = load_plan(out) if present(out / "plan.json") else None
    recorded = State.of(state.doc, out / "state.json")
    if plan is not None:  # another service's state.json must not be read as this plan's live state
        from hetinfra.document.crosscheck import check_against_plan

        check_against_plan(plan, out / "plan.json", state=recorded, state_path=out / "state.json", target=False)
    units = [_unit(a) for a in sorted(recorded.allocations, key=lambda a: (a.path, a.cloud, a.region, a.deployment_unit))]
    quiet = log or (lambda _line: None)
    clouds = sorted({u.cloud for u in units if u.path == "pulumi"})
    if clouds:
        pulumi_driver.check_ready(clouds, pulumi_driver.backend_urls(plan.to_dict() if plan else None, clouds), env)
        command = pulumi_command or pulumi_driver.pulumi_command()
        for cloud in clouds:
            _pulumi_cloud(out, cloud, [u for u in units if u.path == "pulumi" and u.cloud == cloud], state, plan,
                          command, refresh, env, quiet)
    sky = [u for u in units if u.path == "skypilot"]
    if sky:
        _sky_units(sky)
    read_at = now()
    kube = [u for u in units if u.path == "kubernetes"]
    if kube:  # deploy.target kubernetes: pods pending for capacity stall like a VM group (hetinfra.deploy.kube)
        from hetinfra.deploy.kube import read_kube_units

        read_kube_units(state, kube, read_at=read_at, patience_s=PATIENCE_S)
    _stalled(units, recorded.live, read_at)
    return live_doc(units, refreshed=refresh, read_at=read_at)


def live_doc(units: list[UnitLive], *, refreshed: bool, read_at: str) -> dict:
    known = [u for u in units if u.live is not None]
    return {"read_at": read_at, "refreshed": refreshed,
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
    if u.stalled:
        parts.append(f"{u.stalled} instance(s) the group has been replacing since {u.short_since} (no capacity?): "
                     "a re-plan moves them elsewhere")
    elif u.replacing:
        parts.append(f"{u.replacing} instance(s) missing that the {'SkyServe service' if u.path == 'skypilot' else 'group'}"
                     " is replacing")
    if u.unhealthy:
        parts.append(f"{u.unhealthy} instance(s) not serving")
    parts += u.notes
    roles = " (" + ", ".join(f"{u.live * n} of {u.desired * n} {r} engines" + (
        f" on {u.live * nodes} of {u.desired * nodes} {itype} nodes" if nodes else "")
        for r, n, nodes, itype in u.roles) + ")" if u.roles else ""
    return f"{u.unit}: {u.live} of {u.desired} replica(s) live{roles}" + (f"; {'; '.join(parts)}" if parts else "")


def record(out: Path, live: dict) -> DeployState:
    """Keep ``live`` in state.json (reloaded first: an apply may have written it meanwhile)."""
    state = DeployState.load(out)
    state.record_live(live)
    state.save()
    return state
