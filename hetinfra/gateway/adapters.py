"""Routing by LoRA adapter: a request whose OpenAI ``model`` names an adapter goes only to the units
holding it (plan/adapters: the ILP's ``x[u,a]``), by the base model's class weights among them.

An adapter's routes are its base model's with every class's weights and the fallback shares kept to
the holding units, so the balancer's whole path (classes, least outstanding, ejection, retries on
another holder) applies unchanged: with one holder down the others take the adapter's requests, and
no request of it ever reaches a unit that does not hold it. The adapter's name stays the request's
``model`` (vLLM serves the adapter under it), and the demand log records it as such.
"""

from __future__ import annotations

from dataclasses import replace

from hetinfra.errors import InvalidInputError
from hetinfra.gateway.table import ModelRoutes, RouteClass, RoutingTable

__all__ = ["adapter_routes", "with_adapters"]


def adapter_routes(base: ModelRoutes, adapter: str, holders: set[str]) -> ModelRoutes:
    """``base``'s routes kept to ``holders``, named ``adapter``."""
    classes = tuple(RouteClass(c.name, c.input_tokens, c.output_tokens,
                               tuple((u, w) for u, w in c.weights if u in holders)) for c in base.classes)
    shares = tuple((u, s) for u, s in base.shares if u in holders)
    return ModelRoutes(adapter, classes, shares, base.default_max_tokens)


def with_adapters(table: RoutingTable, holders: dict[str, tuple[str, set[str]]]) -> RoutingTable:
    """``table`` also routing each adapter (name -> (base model, units holding it)). An adapter named like
    a model, of an unknown base, or held by no unit of its base's routes is exit 2."""
    models = dict(table.models)
    for name, (base, units) in sorted(holders.items()):
        if name in table.models or base not in table.models:
            why = "is also a model's name" if name in table.models else f"has base {base!r}, not routed here"
            raise InvalidInputError(f"adapter {name!r} {why}")
        base_units = {u for c in table.models[base].classes for u, _ in c.weights} | \
                     {u for u, _ in table.models[base].shares}
        if not set(units) & base_units:
            raise InvalidInputError(f"adapter {name!r}: none of its units ({', '.join(sorted(units))}) serve "
                                    f"{base!r} in this routing table")
        models[name] = adapter_routes(table.models[base], name, set(units))
    return replace(table, models=models)
