"""hetinfra.plan.adapters: adapter demand keys and holds (the planner path: tests/plan/test_adapter_plan.py)."""

from __future__ import annotations

import pytest

from hetinfra.plan.adapters import adapter_demand, adapter_holds
from hetinfra.spec.adapters import AdapterDemand, AdapterSpec


def spec(name, share=None, rate=None, regions=None):
    return AdapterSpec(name=name, base="m", source=f"org/{name}", demand=AdapterDemand(share=share, rate_rps=rate),
                       regions=regions)


def test_shares_split_the_base_and_rates_add_to_it():
    demand, keys = adapter_demand("m", {"s": 6.0, "l": 4.0}, [spec("a", share=0.5), spec("b", rate=2.0)])
    assert demand[("m", "s")] == pytest.approx(3.0) and demand[("m", "l")] == pytest.approx(2.0)
    assert demand[("m", "s~a")] == pytest.approx(3.0) and demand[("m", "l~b")] == pytest.approx(0.8)
    assert sum(demand.values()) == pytest.approx(12.0) and keys["b"] == (("m", "s~b"), ("m", "l~b"))


def test_an_adapter_taking_everything_leaves_the_base_no_key():
    demand, _ = adapter_demand("m", {"s": 5.0}, [spec("a", share=1.0)])
    assert ("m", "s") not in demand


def test_copies_and_residency_reach_the_problem():
    demand, keys = adapter_demand("m", {"s": 10.0}, [spec("a", share=0.9, regions=["eu"]), spec("b", share=0.1)])
    a, b = adapter_holds("m", [spec("a", share=0.9, regions=["eu"]), spec("b", share=0.1)], keys, demand)
    # one holding unit each: a unit holds an adapter on all its instances, its capacity rows size them
    assert (a.regions, a.cover) == (("eu",), (((), 1),)) and b.cover == (((), 1),)
