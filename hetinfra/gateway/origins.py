"""A gateway that knows where it is (docs/regions.md): per client origin, the plan's row of
routing (plan.json ``routing_by_origin``), with failover only to units the origin's residency allows.

The origin of a request is the ``x-hetinfra-origin`` header a global front door sets (a region
name), else the gateway's own ``--region``; a gateway whose region is no origin routes by the class
routing (``routing``), as a plan without origins always does.

Which names count (:func:`declared_regions`): the regions the plan declares, i.e. its origins
(``origins``) and the regions of its units (the fleet regions ``apply`` puts gateways in).

- ``--region`` must be one of them, spelled as the plan spells it (exit 2 listing them otherwise):
  region names are lowercase in every cloud, and ``US-EAST-1`` is refused with a did-you-mean rather
  than folded, because the operator typed it and a silent fold hides a wrong deployment variable.
- The header is folded (stripped, lowercased: a front door may write it in any case) and then names
  an origin only if the plan declares it. Any other origin (``mars-1``, a region the plan does not
  serve, or any header when the gateway has no plan.json, only weights) is **pooled**: routed as the
  gateway's own region and logged as :data:`OTHER` in the demand log, whose ``replan`` pools it
  too (hetinfra.replan.origins). A header that is not a region name at all is still a 400.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING

from hetinfra.document.crosscheck import declared_regions

if TYPE_CHECKING:
    from hetinfra.document import Plan

__all__ = ["ORIGIN_HEADER", "OTHER", "check_region", "current_origin", "declared_regions", "origin_routes",
           "request_origin"]

ORIGIN_HEADER = "x-hetinfra-origin"
#: the demand log's origin of a request whose header names a region the plan does not declare
OTHER = "other"
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
#: the origin of the request being handled (the demand log records it)
_CURRENT: ContextVar[str | None] = ContextVar("hetinfra_origin", default=None)


def check_region(region: str, declared: frozenset[str], where: str) -> None:
    """``--region`` is "" or a region ``where`` (plan.json) declares, spelled exactly (exit 2 otherwise)."""
    if not region or not declared or region in declared:
        return
    from hetinfra.errors import InvalidInputError, did_you_mean

    folded = [r for r in sorted(declared) if r == region.strip().lower()]
    hint = (f"region names are lowercase: did you mean '{folded[0]}'?" if folded else did_you_mean(region, declared))
    raise InvalidInputError(f"--region '{region}' is not a region {where} declares; it declares "
                            f"{', '.join(sorted(declared))}", hint=hint)


def request_origin(headers, own_region: str, declared: frozenset[str] = frozenset()) -> str | None:
    """The request's origin (header, else ``own_region``; "" when neither), or None when the header
    is not a region name; a header region ``declared`` lacks is :data:`OTHER` (pooled: routed as
    ``own_region``). Remembered for the demand log (:func:`current_origin`)."""
    raw = headers.get(ORIGIN_HEADER)
    if raw is None:
        origin = own_region
    elif _REGION.match(raw.strip().lower()):
        origin = raw.strip().lower()
        if origin not in declared:
            origin = OTHER
    else:
        return None
    _CURRENT.set(origin)
    return origin


def current_origin() -> str | None:
    return _CURRENT.get()


def origin_routes(plan: "Plan | None", models: dict) -> dict[str, dict]:
    """origin -> model -> ModelRoutes of that origin's row: class weights from
    ``routing_by_origin``, and as the fallback (no live unit in the class) the model's units in the
    regions the origin's residency allows (plan.json ``origins[m][o].allowed_regions``), by their
    overall share. A LoRA adapter's classes in the row (``chat~sql``) route the adapter, as a model of
    its own, only to its holders there (hetinfra.gateway.adapter_routes)."""
    from hetinfra.gateway.adapter_routes import origin_adapter_routes, share_weights

    out: dict[str, dict] = {}
    if plan is None:
        return out
    place = {a.deployment_unit: a.region for a in plan.allocations}
    for model, rows in sorted((plan.routing_by_origin or {}).items()):
        base = models.get(model)
        if base is None:
            continue
        rules = (plan.origins or {}).get(model) or {}
        for origin, per_class in sorted(rows.items()):
            inside = rules[origin].allowed_regions if origin in rules else None  # None: no residency, anywhere

            def in_area(u: str, inside=inside) -> bool:
                return u in place and (inside is None or place[u] in inside)

            classes = tuple(replace(c, weights=share_weights(per_class.get(c.name))) for c in base.classes)
            shares = tuple((u, s) for u, s in base.shares if in_area(u))
            out.setdefault(origin, {})[model] = replace(base, classes=classes, shares=shares)
            # LoRA: each adapter only to its holders in the area
            out[origin].update(origin_adapter_routes(models, per_class, in_area))
    return out
