"""A plan's adapter classes as routes of their own (issue 38): the routing table's models with each LoRA
adapter's classes (``chat~sql``) taken out of its base model. Imports nothing of the table
(hetinfra.gateway.table calls it while it builds one), so the two stay one way."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.spec.adapters import ADAPTER_KEY_SEP, adapter_of, base_class

__all__ = ["origin_adapter_routes", "share_weights", "split_adapter_routes"]


def split_adapter_routes(models: dict) -> dict:
    """A plan's routes with its adapters' classes (``chat~sql``: class chat of adapter sql, hetinfra.plan.
    adapters) taken out of their base model and routed as the adapter's own model: its classes keep
    their base class's name and sizes and the plan's weights (only units holding it), its fallback
    shares are its holders' weights. A base all of whose demand names adapters keeps every unit of
    its adapters' classes (a base request may go to any of them). Without adapter classes: unchanged."""
    out: dict = {}
    for name, routes in models.items():
        own = [c for c in routes.classes if ADAPTER_KEY_SEP not in c.name]
        per: dict[str, list] = {}
        for c in routes.classes:
            if ADAPTER_KEY_SEP in c.name:
                base_cls, adapter = c.name.split(ADAPTER_KEY_SEP, 1)
                per.setdefault(adapter, []).append(replace(c, name=base_cls))
        if not per:
            out[name] = routes
            continue
        for adapter, classes in sorted(per.items()):
            out[adapter] = replace(routes, name=adapter, classes=tuple(classes), shares=_shares(classes))
        if not own:  # every request of the base names an adapter: base requests may use any of their units
            own = [replace(c, weights=_shares(cs)) for c, cs in _by_name(per).items()]
        out[name] = replace(routes, classes=tuple(own))
    return out


def _shares(classes: list) -> tuple[tuple[str, float], ...]:
    """Each unit's share of the weights of ``classes``, summing to 1."""
    total: dict[str, float] = {}
    for c in classes:
        for u, w in c.weights:
            total[u] = total.get(u, 0.0) + w
    s = sum(total.values()) or 1.0
    return tuple((u, w / s) for u, w in sorted(total.items()))


def _by_name(per: dict[str, list]) -> dict:
    """First class of each base class name -> every adapter's class of that name."""
    out: dict[str, list] = {}
    for classes in per.values():
        for c in classes:
            out.setdefault(c.name, []).append(c)
    return {cs[0]: cs for cs in out.values()}


def share_weights(entries) -> tuple[tuple[str, float], ...]:
    """A class's entries of plan.json ``routing_by_origin`` as its weights: (deployment unit, share) of
    each positive share, sorted."""
    return tuple(sorted((e.deployment_unit, float(e.share)) for e in entries or () if float(e.share) > 0))


def origin_adapter_routes(models: dict, per_class: dict, inside) -> dict:
    """One origin's routes of each adapter whose classes (``chat~sql``) that origin's row of plan.json
    ``routing_by_origin`` lists (``per_class``: class -> its entries): the adapter's routes
    (:func:`split_adapter_routes`, in ``models``) with each class weighted as the origin's row says (only
    units holding it in the origin's area), the fallback shares kept to units ``inside(unit)`` the area."""
    per: dict[str, dict[str, tuple]] = {}
    for cls, entries in per_class.items():
        adapter = adapter_of(cls)
        if adapter is None:
            continue
        per.setdefault(adapter, {})[base_class(cls)] = share_weights(entries)
    out: dict = {}
    for adapter, weights in sorted(per.items()):
        routes = models.get(adapter)
        if routes is None:
            continue
        classes = tuple(replace(c, weights=weights.get(c.name, ())) for c in routes.classes)
        out[adapter] = replace(routes, classes=classes, shares=tuple((u, s) for u, s in routes.shares if inside(u)))
    return out
