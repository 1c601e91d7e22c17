"""A move forced by the new plan's cost alone is held where the running fleet, simulated at the new
demand, still meets (hetinfra.plan.still_meets; stop 59's replan audit, B1: multi-region with chat-8b
at 22 req/s instead of 20 was forced $19.39 -> $20.40/h, and the applied move flapped back)."""

from __future__ import annotations

import shutil

from hetinfra.document import Plan
from hetinfra.plan.still_meets import running_meets
from hetinfra.spec.load import load_spec
from tests.plan.golden_plans import REPO

SPEC = REPO / "services" / "multi-region.yaml"


def _at(plan: Plan, scale: float) -> Plan:
    """``plan`` whose demand is ``scale`` x its own (every class of every model)."""
    models = [m.model_copy(update={"rate_rps": m.rate_rps * scale,
                                   "classes": [c.model_copy(update={"rate_rps": c.rate_rps * scale})
                                               for c in m.classes]}) for m in plan.models]
    return plan.model_copy(update={"models": models})


def test_the_running_fleet_is_judged_at_the_new_demand(example_plans, tmp_path):
    out = shutil.copytree(example_plans["multi-region"][0], tmp_path / "out")
    plan = Plan.parse(example_plans["multi-region"][1], out / "plan.json")
    spec = load_spec(SPEC)[0]
    running = list(plan.allocations)
    says = running_meets(out, _at(plan, 1.1), spec, SPEC, running)
    assert says and "still meets the new demand" in says
    assert running_meets(out, _at(plan, 3.0), spec, SPEC, running) is None  # three times the demand: it misses
    fewer = [a.model_copy(update={"count": a.count + 1}) if k == 0 else a for k, a in enumerate(running)]
    assert running_meets(out, _at(plan, 1.1), spec, SPEC, fewer) is None  # what runs is not plan.json's fleet
    m = plan.models[0]
    renamed = plan.model_copy(update={"models": [m.model_copy(update={"classes": [
        c.model_copy(update={"name": c.name + "x"}) for c in m.classes]}), *plan.models[1:]]})
    assert running_meets(out, renamed, spec, SPEC, running) is None  # a class the running routing lacks
