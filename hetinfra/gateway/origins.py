"""A gateway that knows where it is (docs/regions.md): per client origin, the plan's row of
routing (plan.json ``routing_by_origin``), with failover only to units the origin's residency allows.

The origin of a request is the ``x-hetinfra-origin`` header a global front door sets (a region
name), else the gateway's own ``--region``; an origin the plan does not know routes as the
gateway's region does, and a gateway whose region is no origin routes by the class routing
(``routing``), as a plan without origins always does.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetinfra.document import Plan

__all__ = ["ORIGIN_HEADER", "origin_routes", "request_origin", "current_origin"]

ORIGIN_HEADER = "x-hetinfra-origin"
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
#: the origin of the request being handled (the demand log records it)
_CURRENT: ContextVar[str | None] = ContextVar("hetinfra_origin", default=None)


def request_origin(headers, own_region: str) -> str | None:
    """The request's origin (header, else ``own_region``; "" when neither), or None when the header
    is not a region name. Remembered for the demand log (:func:`current_origin`)."""
    raw = headers.get(ORIGIN_HEADER)
    if raw is None:
        origin = own_region
    elif _REGION.match(raw.strip().lower()):
        origin = raw.strip().lower()
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
    overall share."""
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
            classes = tuple(replace(c, weights=tuple(sorted(
                (e.deployment_unit, float(e.share)) for e in per_class.get(c.name) or () if float(e.share) > 0)))
                for c in base.classes)
            shares = tuple((u, s) for u, s in base.shares if u in place and (inside is None or place[u] in inside))
            out.setdefault(origin, {})[model] = replace(base, classes=classes, shares=shares)
    return out
