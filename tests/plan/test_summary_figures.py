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


def test_a_padded_plan_on_one_gpu_type_is_its_own_baseline(shared_plan):
    """two-models (L40S only) was padded past its L40S baseline's solve ("L40S 6 $11.17/h, this plan saves
    -16.7%"): a plan on one GPU type is that type's baseline (plan_json._as_baseline); the note still says
    what the other baselines, solved and never simulated, do not carry."""
    plan = _shared(shared_plan, ROOT / "benchmarks/specs/two-models.yaml")
    assert {a.gpu for a in plan.allocations} == {"L40S"}, "two-models no longer plans on L40S alone: pick another spec"
    own = next(b for b in plan.baselines if b.gpu == "L40S")
    assert own.plan_itself and own.cost_usd_per_hour == plan.cost_usd_per_hour and own.savings_usd_per_hour == 0
    assert own.instances == sum(a.instances for a in plan.allocations)
    assert not [b for b in plan.baselines if b.feasible and b.savings_usd_per_hour < 0]
    text = " ".join(_text(plan).split())
    added, _ = padding_cost(plan)
    assert added > 0, "two-models is no longer padded: pick another spec"
    assert "0.0% (this plan)" in text and "L40S is this plan itself (it uses L40S only)" in text
    assert "not simulated" in text and f"includes ${added:.2f}/h of replicas verification added" in text
    assert f"without them the plan costs ${plan.cost_usd_per_hour - added:.2f}/h" in text


def test_baseline_instances_count_every_node_of_a_replica():
    from hetinfra.plan.pipeline import plan_document

    pr, doc = plan_document(ROOT / "services/mixed-pipeline.yaml", verify=False)
    nodes = {u.id: u.template.nodes for u in pr.all_units}
    feasible = [b for b in doc.baselines if b.feasible]
    assert any(nodes[x.unit] > 1 for b in feasible for x in b.allocation)  # a multi-node baseline to count
    for b in feasible:
        assert b.instances == sum(x.count * nodes[x.unit] for x in b.allocation), b.gpu
