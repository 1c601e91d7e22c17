"""The single-GPU-type baselines beside the plan (plan.json ``baselines``, the summary's table and note)
are figures a user can stand behind: a plan on one GPU type is that type's baseline (its own cost,
instances and units: held-out h106b read "L40S 97 instances $1017.79/h, this plan saves 30.9%" beside a
plan that is itself L40S only, and h110 "L40S 10 instances $7.97/h, this plan saves -7.5%" beside an
L40S-only plan whose off-peak fleets needed $0.60/h more), and a baseline cheaper than a verified plan
says it was never simulated, and why it is cheaper."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from hetinfra.document import Plan
from hetinfra.plan.summary import render_summary
from hetinfra.plan.summary_fleet import baseline_note, saving_cell
from tests.plan.golden_plans import GOLDEN, filled_golden

NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))


def _text(plan: Plan) -> str:
    console = Console(width=200, record=True, color_system=None)
    render_summary(plan, console)
    return " ".join(console.export_text().split())


def _with_baseline_cost(name: str, gpu: str, cost: float, **fidelity) -> Plan:
    """Golden plan ``name`` with baseline ``gpu`` at ``cost`` (its savings as plan_json computes them)."""
    doc = filled_golden(name)
    b = next(x for x in doc["baselines"] if x["gpu"] == gpu)
    b.update(cost_usd_per_hour=cost, savings_usd_per_hour=round(cost - doc["cost_usd_per_hour"], 4),
             savings_pct=round(100 * (cost - doc["cost_usd_per_hour"]) / cost, 2))
    doc["fidelity"]["confirmation"].update(fidelity)
    return Plan.parse(doc)


def test_every_one_gpu_golden_plan_is_its_own_baseline():
    for name in NAMES:
        doc = json.loads((GOLDEN / f"{name}.json").read_text())
        gpus = {a["gpu"] for a in doc["allocations"]}
        for b in doc["baselines"]:
            itself = len(gpus) == 1 and b["gpu"] in gpus and not doc["unmet_rps"]
            assert bool(b.get("plan_itself")) == itself, (name, b["gpu"])
            if itself:
                assert b["cost_usd_per_hour"] == doc["cost_usd_per_hour"] and b["savings_usd_per_hour"] == 0
                assert b["instances"] == sum(a["instances"] for a in doc["allocations"])
                assert {(u["unit"], u["count"]) for u in b["allocation"]} == {(a["unit"], a["count"]) for a in
                                                                              doc["allocations"]}


def test_a_cheaper_baseline_beside_a_verified_plan_says_it_is_unverified_and_why():
    """multi-region (A10G, H100 and L40S) with its H100 baseline below the plan and an off-peak fleet
    that verification gave replicas back (h110's cause)."""
    plan = _with_baseline_cost("multi-region", "H100", 15.0, off_peak=[
        {"periods": [0, 1], "met": True, "replicas_added": {"some-unit": 1}, "missed": []}])
    text = _text(plan)
    assert "-29.3% (-$4.39/h), unverified: at the last solve's rates" in text
    assert ("H100 below the plan: the plan's off-peak fleets carry replicas verification gave back where they "
            "missed without them") in text
    assert "report it if neither applies" not in text


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["multi-region", "chat", "variants", "summarize"]), factor=st.floats(0.3, 3.0))
def test_only_a_negative_saving_says_unverified(name, factor):
    doc = filled_golden(name)
    gpu = next(b["gpu"] for b in doc["baselines"] if b["feasible"] and not b.get("plan_itself"))
    plan = _with_baseline_cost(name, gpu, round(factor * doc["cost_usd_per_hour"], 4))
    x = next(b for b in plan.baselines if b.gpu == gpu)
    assert ("unverified" in saving_cell(plan, x)) == (x.savings_usd_per_hour < -0.005)
    assert (f"{gpu} below the plan" in (baseline_note(plan) or "")) == (x.savings_usd_per_hour < -0.005)
    own = [b for b in plan.baselines if b.plan_itself]
    assert all(saving_cell(plan, b) == "0.0% (this plan)" for b in own)


def test_the_note_says_the_trim_is_the_plans_alone_and_a_lone_own_row_is_not_called_solved():
    doc = filled_golden("multi-region")
    unit = doc["allocations"][0]["unit"]
    doc["fidelity"]["trim"]["removed"] = [{"unit": unit, "model": doc["allocations"][0]["model"],
                                           "cost_usd_per_hour": 1.0, "reason": "met without it"}]
    note = baseline_note(Plan.parse(doc))
    assert "the plan's trim removed 1 replica(s) its simulation showed were not needed; no baseline is trimmed" in note
    committed = Plan.parse(filled_golden("committed"))  # on L4 alone, whose one baseline is L4: the plan itself
    assert [b.gpu for b in committed.baselines] == ["L4"]
    assert baseline_note(committed) == "baselines: L4 is this plan itself (it uses L4 only)"
