"""hetinfra.plan.adapters: adapter demand keys, copies, round-robin dealing, and issue 38's acceptance run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.plan.adapters import adapter_demand, adapter_holds, copies_needed, instance_adapters
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
    a, b = adapter_holds("m", [spec("a", share=0.9, regions=["eu"]), spec("b", share=0.1)], keys, demand, 5.0)
    assert (a.regions, a.cover) == (("eu",), (((), 2),)) and b.cover == (((), 1),)
    assert copies_needed(9.0, 5.0) == 2 and copies_needed(1.0, 5.0) == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.data())
def test_round_robin_keeps_slots_and_distinct_copies(count, slots, data):
    names = [f"a{i}" for i in range(data.draw(st.integers(0, 12)))]
    holds, room = {}, slots * count
    for name in names:
        c = data.draw(st.integers(1, count))
        if c <= room:
            holds[name], room = c, room - c
    lists = instance_adapters(count, slots, holds)
    assert len(lists) == count and all(len(x) <= slots and len(set(x)) == len(x) for x in lists)
    assert {a: sum(a in x for x in lists) for a in holds} == holds


def test_acceptance_50_zipf_adapters_use_fewer_gpus_than_both_baselines():
    from tools.lora_acceptance import main

    out = main(["--adapters", "50", "--rate", "40"])
    assert out["status"] == "optimal"
    assert out["plan"]["gpus"] < out["one_deployment_per_adapter"]["gpus"]
    assert out["plan"]["gpus"] < out["all_adapters_on_every_replica"]["gpus"]
