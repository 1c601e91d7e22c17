"""What the plan summary prints agrees with plan.json and says what each figure is (a first-time
user's review): the seeds the promise ran on, the trim's removals put back, the GPUs of one replica,
util over 100%, and single-GPU baselines beside a plan verification padded (their instances counted
as allocations[].instances counts them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from hetinfra.document import Plan
from hetinfra.plan.summary import render_summary
from hetinfra.plan.summary_fleet import gpus_cell, padding_cost
from hetinfra.plan.summary_promise import promise_lines, seed_list
from tests.plan.golden_plans import GOLDEN, filled_golden

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))


def _text(plan: Plan, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    render_summary(plan, console)
    return console.export_text()


def _shared(shared_plan, spec) -> Plan:
    return Plan.parse(json.loads((shared_plan(spec) / "plan.json").read_text()))


@pytest.mark.parametrize("name", NAMES)
def test_the_promise_names_the_seeds_plan_json_says_were_used(name):
    plan = Plan.parse(filled_golden(name))
    reps = plan.fidelity.replications
    if reps is None:
        pytest.skip("unverified")
    line = next(x for x in promise_lines(plan) if x.startswith("promise:"))
    # "seeds from 0" read as 0, 1, ... where the search ran 1000, 1003 (hetinfra.sim.replications.seeds_for)
    assert "seeds from" not in line
    assert f"search {seed_list(reps.decide_seeds)}" in line and f"confirmation {seed_list(reps.confirm_seeds)}" in line
    assert str(reps.decide_seeds[0]) in line and str(reps.confirm_seeds[-1]) in line
    # both levels the promise was held to: the search's and the confirmation's (a plan made before stop 56
    # has no confirm_confidence: its confirmation was the search's level, and the line says one)
    assert "95% bounds (97.5% in the confirmation)" in line
    older = plan.model_copy(update={"fidelity": plan.fidelity.model_copy(update={
        "replications": reps.model_copy(update={"confirm_confidence": None})})})
    assert "95% bounds; seeds" in next(x for x in promise_lines(older) if x.startswith("promise:"))


def test_a_seed_list_keeps_both_ends_of_a_long_run():
    assert seed_list([1001, 1004]) == "1001, 1004"
    assert seed_list(list(range(1079, 1116, 3))) == "1079, 1082, ..., 1115 (13 seeds)"
    assert seed_list([1001, 1004, 1007, 1010, 1040, 1043]) == "1001, 1004, 1007, 1010, 1040, 1043"
    assert seed_list([]) == "none"


def test_a_removal_put_back_was_trimmed_first():
    plan = Plan.parse(filled_golden("chat"))
    unit = plan.allocations[0].unit
    trim = plan.fidelity.trim.model_copy(update={"removed": [], "put_back": [
        {"unit": unit, "model": "chat-8b", "cost_usd_per_hour": 1.0, "reason": "the confirmation on fresh seeds "
                                                                               "missed without it"}]})
    plan = plan.model_copy(update={"fidelity": plan.fidelity.model_copy(update={"trim": trim})})
    line = next(x for x in promise_lines(plan) if x.startswith("verification:"))
    assert "0 replica(s) trimmed, 1 put back" not in line  # the contradiction the review found
    assert "1 replica(s) trimmed, 1 put back as the confirmation missed without them, so 0 stay trimmed" in line


def test_a_real_put_back_reads_as_trimmed_and_put_back(example_plans):
    """services/committed.yaml's plan: its confirmation puts a trim removal back, with no veto after it
    (a vetoed plan's put-backs are not the final plan's: tests/plan/test_verify.py)."""
    plan = Plan.parse(example_plans["committed"][1])
    kept, back = len(plan.fidelity.trim.removed), len(plan.fidelity.trim.put_back)
    assert back, "committed no longer puts a removal back: pick another spec"
    line = next(x for x in promise_lines(plan) if x.startswith("verification:"))
    assert f"{kept + back} replica(s) trimmed, {back} put back" in line and f"so {kept} stay trimmed" in line


@pytest.mark.parametrize("name", NAMES)
def test_the_gpus_column_counts_one_replicas_gpus(name):
    plan = Plan.parse(filled_golden(name))
    for a in plan.allocations:
        cell = gpus_cell(a)
        assert sum(int(n) for n in re.findall(r"(?:^| \+ )(\d+)x", cell)) == a.gpus_per_replica(), (cell, a.unit)
        if a.nodes_per_replica > 1 and not a.stages:
            assert f"({a.gpus_per_instance} per node)" in cell


@pytest.mark.parametrize("per_node", [1, 4])
def test_a_two_node_replica_shows_both_nodes_gpus(per_node):
    """batch's pipeline over two 1-GPU nodes, and the same row with 4 GPUs per node (an instance type's
    GPU count is all the summary reads of it: a two-node TP4 x PP2 replica of 8 GPUs)."""
    doc = filled_golden("batch")
    doc["allocations"][0]["gpus_per_instance"] = per_node
    text = _text(Plan.parse(doc))
    row = next(x for x in text.splitlines() if "g6e.xlarge x2 nodes" in x)
    assert f"{2 * per_node}xL40S ({per_node} per node)" in row and f"│ {per_node}xL40S │" not in row


def test_util_over_100_percent_is_said_and_explained(shared_plan):
    spec = yaml.safe_load((ROOT / "services/chat.yaml").read_text())
    spec["infrastructure"]["gpus"] = ["T4"]
    plan = _shared(shared_plan, spec)
    over = [a for a in plan.allocations if a.utilization > 1]
    assert over, "chat on T4 no longer trims past its rated capacity: pick another spec"
    text = " ".join(_text(plan).split())
    assert "util: the req/s routed to a unit (routed_rps) over its replicas' rated capacity" in text
    trimmed = {r["unit"] for r in plan.fidelity.trim.removed}
    for a in over:
        assert f"{a.deployment_unit} {100 * a.utilization:.0f}%" in text
        assert a.unit in trimmed  # the trim is what takes a unit past the capacity the solve sized it for


def test_a_plan_dearer_than_a_baseline_says_why(shared_plan):
    plan = _shared(shared_plan, ROOT / "benchmarks/specs/two-models.yaml")
    dearer = [b for b in plan.baselines if b.feasible and b.savings_usd_per_hour < 0]
    assert dearer, "two-models no longer pads past a baseline: pick another spec"
    text = " ".join(_text(plan).split())
    added, _ = padding_cost(plan)
    assert "$-" not in text and f"(-${abs(dearer[0].savings_usd_per_hour):.2f}/h)" in text
    assert "not simulated" in text
    assert f"includes ${added:.2f}/h of replicas verification added" in text
    solved = plan.cost_usd_per_hour - added
    assert f"without them the plan costs ${solved:.2f}/h" in text
    # the padding is all that puts the plan above these baselines: none is below the plan without it
    assert all(b.cost_usd_per_hour >= solved - 0.005 for b in dearer)


def test_baseline_instances_count_every_node_of_a_replica():
    from hetinfra.plan.pipeline import plan_document

    pr, doc = plan_document(ROOT / "services/mixed-pipeline.yaml", verify=False)
    nodes = {u.id: u.template.nodes for u in pr.all_units}
    feasible = [b for b in doc.baselines if b.feasible]
    assert any(nodes[x.unit] > 1 for b in feasible for x in b.allocation)  # a multi-node baseline to count
    for b in feasible:
        assert b.instances == sum(x.count * nodes[x.unit] for x in b.allocation), b.gpu
