"""plan.json's routing by origin (docs/regions.md): added only where a model declares
``demand.origins``; a plan without origins is unchanged (its one origin, ``any``, routes by
``routing``).

``origins``: model -> origin -> ``{"share": float, "residency": "region"|"continent"|"none",
"area": str|null, "allowed_regions": [str]|null, "worst_network_ms": float|null}``;
``allowed_regions`` are the regions of the plan's units inside the origin's area (null without
residency: anywhere; the gateway fails over only to these); ``worst_network_ms`` is the largest
round trip (estimated, ``price_feeds/network.py``) any of the origin's routed requests pays, null
when the table knows neither place.

``routing_by_origin``: model -> origin -> class -> ``[{"unit": str, "deployment_unit": str,
"region": str, "share": float, "rps": float, "network_ms": float|null}]``, largest rps first; the
shares of one (origin, class) sum to 1, and summed over origins the rps are ``routing``'s.
"""

from __future__ import annotations

from hetinfra.document.allocation import Allocation, Origin, OriginRouteShare, OriginRouting, Origins
from hetinfra.plan.allocations_json import rounded, share_of
from hetinfra.plan.origins import allowed, area_name, origins_of
from hetinfra.price_feeds.network import round_trip_ms


def origin_sections(pr, allocations: list[Allocation], scale: float = 1.0) -> dict[str, Origins | OriginRouting]:
    """The two plan.json keys as their models (or {} when no model declares origins), constructed
    without validation: the values are the planner's."""
    flows = getattr(pr.result, "origin_flow", None) or {}
    named = {a.unit: a.deployment_unit for a in allocations}
    origins: Origins = {}
    routing: OriginRouting = {}
    for pm in pr.inputs.models:
        declared = origins_of(pm) if pm.spec.demand.origins else []
        if not declared:
            continue
        m = pm.spec.name
        origins[m], routing[m] = {}, {}
        for o, share, rule in declared:
            worst = None
            per_class = routing[m].setdefault(o, {})
            for c in pm.classes:
                total = c.rate_rps * share * pm.spec.demand.peak * (scale or 0.0)
                rows = sorted(((u, rps) for (u, mm, w, oo), rps in flows.items() if mm == m and w == c.name and oo == o),
                              key=lambda x: (-x[1], x[0]))
                entries = []
                for u, rps in rows:
                    region = pr.units[u].region
                    ms = round_trip_ms(o, region)
                    worst = ms if worst is None or (ms is not None and ms > worst) else worst
                    entries.append(OriginRouteShare.model_construct(
                        unit=u, deployment_unit=named.get(u), region=region,
                        share=share_of(rps, total), rps=rounded(rps, 6), network_ms=ms))
                per_class[c.name] = entries
            places = sorted({(a.cloud, a.region) for a in allocations if a.model == m})
            inside = sorted({r for c, r in places if allowed(o, rule, c, r)}) if rule != "none" else None
            origins[m][o] = Origin.model_construct(share=rounded(share, 6), residency=rule,
                                                   area=area_name(o, rule) if rule != "none" else None,
                                                   allowed_regions=inside, worst_network_ms=worst)
    return {"origins": origins, "routing_by_origin": routing} if origins else {}
