"""plan.json's routes of an adapter's class (``<class>~<adapter>``, in ``routing`` and
``routing_by_origin``) go only to units that hold the adapter (plan_route_problems), and a unit holds
each adapter once, within its slots' rank (UnitAdapters). A hand-edited plan whose unit dropped an
adapter still routed to it was simulated as served (exit 0); vLLM answers such a request 404."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.document.allocation import Allocation, OriginRouteShare, RouteShare, plan_route_problems
from tests.compile.split_plan import PLAN

ADAPTERS = ["sql", "law", "med.v2"]  # a '.' in a name: the check reads the class, not the dotted path
BASE = json.loads(PLAN.read_text())["allocations"][0]
BASE.pop("disaggregation")
BASE.update(template="m|aws|p5en|tp4x2", nodes_per_replica=1)


def _unit(i: int, held: list[str], rank: int = 16) -> Allocation:
    a = copy.deepcopy(BASE)
    a.update(unit=f"u{i}", deployment_unit=f"u{i}", skypilot_task=f"skypilot/u{i}.yaml", model="m")
    a["instances"] = a["count"]
    if held:
        a["adapters"] = {"max_loras": 2, "max_lora_rank": 16, "slot_memory_gb": 0.1, "slowdown": 1.2,
                         "derate": 0.8, "cold_load_ms": 3.0,
                         "held": [{"name": n, "source": f"org/{n}", "lora_rank": rank, "instances": a["count"],
                                   "routed_rps": 1.0} for n in held]}
    return Allocation.model_validate(a)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.sampled_from(ADAPTERS)), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from(ADAPTERS + [None]), st.integers(0, 2)), min_size=1, max_size=6),
       st.booleans())
def test_a_route_of_an_adapter_class_is_refused_exactly_when_its_unit_does_not_hold_it(holds, routes, by_origin):
    units = [_unit(i, sorted(h)) for i, h in enumerate(holds)]
    routes = [(ad, i % len(units)) for ad, i in routes]
    classes: dict[str, list] = {}
    for ad, i in routes:
        cls = "chat" if ad is None else f"chat~{ad}"
        row = (OriginRouteShare(unit=f"u{i}", deployment_unit=f"u{i}", region="us-east-1", share=1.0, rps=1.0,
                                network_ms=None) if by_origin else RouteShare(unit=f"u{i}", share=1.0, rps=1.0))
        classes.setdefault(cls, []).append(row)
    routing = {} if by_origin else {"m": classes}
    problems = plan_route_problems(units, routing, {"m": {"us-east-1": classes}} if by_origin else None)
    wrong = [(ad, i) for ad, i in routes if ad is not None and ad not in holds[i]]
    assert bool(problems) == bool(wrong)
    assert all("does not hold it" in p for p in problems) and len(problems) == len(wrong)


def test_a_unit_holds_each_adapter_once_within_its_slots_rank():
    with pytest.raises(ValidationError, match="more than once"):
        _unit(0, ["sql", "sql"])
    with pytest.raises(ValidationError, match="above the slots' max_lora_rank 16"):
        _unit(0, ["sql"], rank=64)
