"""Routing by adapter (hetinfra.gateway.adapters): an adapter's requests reach only the units holding
it, and with one holder down the others keep serving it."""

from __future__ import annotations

from collections import Counter

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.gateway.adapters import with_adapters
from hetinfra.gateway.balancer import Balancer
from hetinfra.gateway.table import ModelRoutes, RouteClass, RoutingTable

UNITS = ("u1", "u2", "u3")
BASE = ModelRoutes("base", (RouteClass("c", 1000, 200, (("u1", 0.5), ("u2", 0.3), ("u3", 0.2))),),
                   (("u1", 0.5), ("u2", 0.3), ("u3", 0.2)), 200)
TABLE = RoutingTable("svc", {"base": BASE}, {u: (f"http://127.0.0.1:1{i}",) for i, u in enumerate(UNITS)})
HOLDERS = {"sql": ("base", {"u1", "u3"}), "law": ("base", {"u2"})}


def picks(balancer, table, model, n=300):
    routes = table.routes_for(model)
    cls, _ = routes.classify(100, 50)
    out = Counter()
    for _ in range(n):
        b = balancer.pick(routes, cls, set())
        out[b.unit if b else None] += 1
    return out


def test_each_adapter_goes_only_to_its_holders_and_the_base_everywhere():
    table = with_adapters(TABLE, HOLDERS)
    bal = Balancer(table)
    assert set(picks(bal, table, "sql")) == {"u1", "u3"}
    assert set(picks(bal, table, "law")) == {"u2"}
    assert set(picks(bal, table, "base")) == set(UNITS)


def test_with_a_holder_down_the_other_holders_serve_and_a_lone_holder_is_missed():
    table = with_adapters(TABLE, HOLDERS)
    bal = Balancer(table)
    for b in bal.units["u1"].backends:
        b.eject()
    assert set(picks(bal, table, "sql")) == {"u3"}  # no service lost while another unit holds it
    for b in bal.units["u2"].backends:
        b.eject()
    assert set(picks(bal, table, "law")) == {None}  # its only holder is down: no other unit may take it


@pytest.mark.parametrize("holders, words", [({"base": ("base", {"u1"})}, "also a model"),
                                            ({"x": ("nope", {"u1"})}, "not routed here"),
                                            ({"x": ("base", {"u9"})}, "none of its units")])
def test_bad_adapter_routes_are_refused(holders, words):
    with pytest.raises(InvalidInputError, match=words):
        with_adapters(TABLE, holders)
