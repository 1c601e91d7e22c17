"""The engines' lengths are an invariant of plan.json's model (hetinfra.document.engines): every
parse refuses a unit whose --max-model-len exceeds its KV cache or misses a class routed to it, so
apply's preflight has no check of its own. And the typed views deploy and replan read instead of
plan.json's dicts give what the dict helpers gave."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.compile.artifacts import expand_stages
from hetinfra.document import Allocation, Plan
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import GOLDEN, filled_golden, golden_allocation

NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))
PLANS = {n: filled_golden(n) for n in NAMES}


def _routed(plan: dict, alloc: dict) -> int:
    sizes = {c["name"]: c["input_tokens"] + c["output_tokens"] for m in plan["models"] if m["name"] == alloc["model"]
             for c in m["classes"]}
    return max((sizes[c] for c, shares in plan["routing"].get(alloc["model"], {}).items()
                for s in shares if s["unit"] == alloc["unit"] and s["rps"] > 0), default=0)


#: (golden plan, index of one of its allocations)
UNITS = st.sampled_from([(n, i) for n in NAMES for i in range(len(PLANS[n]["allocations"]))])


def _changed(name: str, i: int, **changes) -> tuple[dict, dict]:
    """(golden plan ``name`` with ``changes`` to allocation ``i``, that allocation as it was)."""
    plan = PLANS[name]
    allocs = [dict(a, **changes) if j == i else a for j, a in enumerate(plan["allocations"])]
    return dict(plan, allocations=allocs), plan["allocations"][i]


@settings(max_examples=30, deadline=None)
@given(unit=UNITS, kv=st.integers(1, 70000))
def test_a_kv_cache_below_the_length_is_refused_on_parse(unit, kv):
    doc, a = _changed(*unit, kv_cache_tokens=kv)
    if kv >= a["max_model_len"]:
        assert Plan.parse(doc).allocations[unit[1]].kv_cache_tokens == kv
        return
    with pytest.raises(InvalidInputError, match=f"unit {a['deployment_unit']}: --max-model-len .* exceeds its KV "
                                                f"cache of {kv} tokens") as err:
        Plan.parse(doc)
    assert err.value.exit_code == 2


@settings(max_examples=30, deadline=None)
@given(unit=UNITS, length=st.integers(1, 70000))
def test_a_length_below_a_routed_class_is_refused_on_parse(unit, length):
    doc, a = _changed(*unit, max_model_len=length)
    need, kv = _routed(PLANS[unit[0]], a), a["kv_cache_tokens"]
    if need > length:
        with pytest.raises(InvalidInputError, match=f"below the {need} tokens of a class routed to it"):
            Plan.parse(doc)
    elif kv is not None and length > kv:
        with pytest.raises(InvalidInputError, match=f"exceeds its KV cache of {kv} tokens"):
            Plan.parse(doc)
    else:
        assert Plan.parse(doc).allocations[unit[1]].max_model_len == length


MIXED = golden_allocation(pp=2, nodes_per_replica=2, count=3, instance_type="h1+l1", gpu="H100+L40S",
                          stages=[{"instance_type": "h1", "gpu": "H100", "gpus": 2, "layers": 50,
                                   "price_usd_per_hour": 4.0},
                                  {"instance_type": "l1", "gpu": "L40S", "gpus": 1, "layers": 30,
                                   "price_usd_per_hour": 1.5}])


@pytest.mark.parametrize("alloc", [a for n in NAMES for a in PLANS[n]["allocations"]] + [MIXED])
def test_instance_groups_are_the_expanded_stages(alloc):
    groups = Allocation.model_validate(alloc).instance_groups()
    expanded = expand_stages([alloc])
    assert [(g.instance_type, g.gpu, g.gpus_per_instance, g.instances, g.price_per_instance_usd_per_hour,
             g.cost_usd_per_hour) for g in groups] == [
        (e["instance_type"], e["gpu"], e["gpus_per_instance"], e["instances"], e["price_per_instance_usd_per_hour"],
         e["cost_usd_per_hour"]) for e in expanded]
    per_replica = Allocation.model_validate(alloc).gpus_per_replica()
    assert per_replica * alloc["count"] == sum(g.gpus_per_instance * g.instances for g in groups)
