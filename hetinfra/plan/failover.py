"""Failover of SkyServe units, chosen from the offers the plan already loaded (no re-solve).

A unit's **alternates** are the places its replicas may go when the planned offer has no capacity:
units of the same model, variant and purchase option whose template has the planned one's GPU type and count,
vLLM layout (TP, PP, engines, nodes) and at least its rate on every class (before any derate), so
the capacity the plan counted on holds wherever a replica lands. They are further limited to

- the spec's allowlists (the units were built from offers filtered by ``infrastructure.clouds``,
  ``regions`` and ``gpus``), the clouds of ``deploy.skypilot_clouds`` when it is set (the unit's
  own cloud always counts), and the unit's own region when ``planning.locality`` applies to it;
- the unit's continent (:func:`hetinfra.price_feeds.geo.continent`): a replica that fails over
  from us-east-1 to eu-south-2 would add a transatlantic round trip to its clients' latency (a
  region it does not know, from a user's offers file, is not restricted);
- availability groups (cloud, region, GPU) with room for one more replica under their cap, next to
  what the plan already runs there;
- at most ``deploy.failover.max_premium`` more per hour than the planned offer;

cheapest first (ties by cloud, region, instance type), at most ``deploy.failover.max_alternates``.
Committed units get none: a commitment is bought for one region and machine type, and a replica
that moves pays on-demand elsewhere while the commitment is still paid.

A spot unit's **on-demand fallback** (SkyServe's ``dynamic_ondemand_fallback``) is priced at the
planned offer's on-demand price: the first entry SkyPilot tries with ``use_spot: false``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetinfra.document.allocation import Allocation, Alternate, OndemandFallback
from hetinfra.plan.library import TemplateUnit
from hetinfra.price_feeds.geo import continent
from hetinfra.price_feeds.offers import KNOWN_CLOUDS
from hetinfra.facts import VLLM_PORT

if TYPE_CHECKING:
    from hetinfra.spec.deploy import DeploySpec

_REL = 1e-9
WORLD = "0.0.0.0/0"


def _layout(u: TemplateUnit) -> tuple:
    t = u.template
    # the variant too: an alternate must load the same checkpoint the unit's rates were planned for
    return (u.model, t.variant, u.purchase_option, t.gpu, t.gpus_per_instance, t.tp, t.pp, t.engines, t.nodes)


def _price(u: TemplateUnit) -> float:
    """$/h of one instance (a replica's nodes are alike), rounded as plan.json's prices."""
    return round(u.cost / u.template.nodes, 4)


def with_failover(pr, allocations: list[Allocation]) -> list[Allocation]:
    """``allocations`` (plan.json's) with their ``alternates`` and ``ondemand_fallback`` set."""
    spec = pr.inputs.spec
    used: dict[tuple[str, str, str], int] = {}
    for a in allocations:
        for g, n in pr.units[a.unit].gpu_use.items():
            used[g] = used.get(g, 0) + n * a.count
    candidates: dict[tuple, list[TemplateUnit]] = {}
    for x in pr.all_units:
        if not x.template.mixed and not x.custom_cloud:
            candidates.setdefault(_layout(x), []).append(x)
    places = _Places(base={u.id: u for u in pr.all_units},  # rates as estimated, before any derate
                     candidates=candidates, used=used, caps=pr.inputs.caps,
                     origins={pm.spec.name: set(pm.spec.demand.origins or {}) for pm in pr.inputs.models},
                     by_origin={k[0] for k in getattr(pr.result, "origin_flow", {})})
    return [a.model_copy(update=_failover(pr.units[a.unit], a, places, spec)) for a in allocations]


@dataclass(frozen=True)
class _Places:
    """What every unit's alternates are chosen from."""

    base: dict[str, TemplateUnit]  # unit id -> the unit as estimated (before any derate)
    candidates: dict[tuple, list[TemplateUnit]]  # layout -> the units that may stand in for each other
    used: dict[tuple[str, str, str], int]  # availability group -> GPUs the plan runs there
    caps: dict  # availability group -> its cap
    origins: dict[str, set[str]]  # model -> the origins it declares
    by_origin: set[str]  # units routed by origin


def _failover(u: TemplateUnit, a: Allocation, places: _Places, spec) -> dict:
    """``alternates`` and ``ondemand_fallback`` of one allocation."""
    fo = spec.deploy.failover
    out = {"alternates": [], "ondemand_fallback": None}
    if a.skypilot_task is None or u.committed:
        # custom cloud or mixed pipeline: no SkyPilot task; a commitment is bought for its region and
        # machine type: moving forfeits it
        return out
    planned = places.base.get(u.id, u)
    if u.spot and fo.ondemand_fallback:
        od = places.base.get(u.id.rsplit("|", 1)[0] + "|ondemand")
        if od is not None:
            out["ondemand_fallback"] = OndemandFallback.model_construct(price_per_hour=_price(od))
    sky_clouds = set(spec.deploy.skypilot_clouds)
    clouds = (sky_clouds | {u.template.cloud}) if sky_clouds else set(KNOWN_CLOUDS)
    # routing by origin: its flows' round trips and residency were planned for this region
    local = (spec.planning.locality > 0 and u.region in places.origins.get(u.model, ())) or u.id in places.by_origin
    limit = _price(u) * (1 + fo.max_premium) * (1 + _REL)
    here = (u.template.cloud, u.region, u.template.instance_type)
    # one unit per place: the layout fixes the template of an instance type
    found = {(x.template.cloud, x.region, x.template.instance_type): x for x in places.candidates.get(_layout(u), [])
             if (x.template.cloud, x.region, x.template.instance_type) != here and x.template.cloud in clouds
             and not (local and x.region != u.region) and _same_continent(x, u) and _price(x) <= limit
             and _covers(x, planned) and _room(x, u, places.caps, places.used)}
    best = sorted(found.items(), key=lambda kv: (_price(kv[1]), kv[0]))[:fo.max_alternates]
    out["alternates"] = [Alternate.model_construct(cloud=c, region=r, instance_type=it, price_per_hour=_price(x),
                                                   spot=x.spot) for (c, r, it), x in best]
    return out


def _same_continent(x: TemplateUnit, u: TemplateUnit) -> bool:
    """Replicas stay near the clients the plan placed them for. A region of a user's offers file that
    :func:`continent` does not know is not restricted (the spec's allowlist is what says where it is)."""
    here, there = continent(u.template.cloud, u.region), continent(x.template.cloud, x.region)
    return here is None or there is None or here == there


def _covers(x: TemplateUnit, planned: TemplateUnit) -> bool:
    return all(x.template.rates.get(w, 0.0) >= r * (1 - _REL) for w, r in planned.template.rates.items())


def _room(x: TemplateUnit, u: TemplateUnit, caps: dict, used: dict) -> bool:
    """One replica of ``x`` fits under the caps of its groups, next to the plan's use there (less one
    replica of ``u``: the one that fails over is not running)."""
    for g, n in x.gpu_use.items():
        if g in caps and caps[g] - used.get(g, 0) + u.gpu_use.get(g, 0) < n:
            return False
    return True


def failover_warnings(allocations: list[Allocation], deploy: "DeploySpec", cost: float | None,
                      budget: float | None) -> list[str]:
    """What failover may cost beyond the plan (``cost``, $/h, against the spec's ``budget``), and the
    CIDRs SkyPilot cannot enforce."""
    out = []
    extra = sum((a.ondemand_fallback.price_per_hour - a.price_per_instance_usd_per_hour) * a.instances
                for a in allocations if a.ondemand_fallback)
    if budget and extra > 0 and cost + extra > budget * (1 + _REL):
        out.append(f"while spot replicas are replaced by on-demand ones (deploy.failover.ondemand_fallback) the "
                   f"fleet may cost up to ${cost + extra:.2f}/h, above the budget ${budget:g}/h")
    sky = sorted(a.deployment_unit for a in allocations if a.skypilot_task and a.cloud in (deploy.skypilot_clouds or []))
    loose = []
    if WORLD not in (deploy.ingress_cidrs or []):
        loose.append(f"port {deploy.port or VLLM_PORT} (deploy.ingress_cidrs)")
    if WORLD not in (deploy.ssh_cidrs or []):
        loose.append("SSH (deploy.ssh_cidrs)")
    if sky and loose:
        out.append(f"SkyPilot opens {' and '.join(loose)} to 0.0.0.0/0 on the SkyServe units ({', '.join(sky)}): "
                   "it cannot restrict them to the spec's CIDRs (vLLM still requires VLLM_API_KEY); deploy them "
                   "with the Pulumi stacks where the CIDRs must hold")
    return out
