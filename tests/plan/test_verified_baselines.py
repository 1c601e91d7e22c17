"""plan --verify-baselines (hetinfra.plan.verified_baselines): each single-GPU-type row is the spec planned on
that GPU type alone and verified, not a solve at the plan's rates."""

from __future__ import annotations

import json

import pytest

from tests.plan.heldout import REPO, planned_held_out

H137 = REPO / "benchmarks" / "results" / "heldout65" / "h137-old-gpus-azure-fp16.yaml"


@pytest.mark.heavy
def test_each_row_is_its_gpu_types_own_verified_plan(tmp_path, run_cli):
    """Held-out h137 (Azure T4, V100 and A10; F3 of benchmarks/results/heldout65): the A10 row read 26 instances
    at $149.60/h, "this plan saves 80.8%", beside an A10-only plan of the same spec (h137b) at $45.52/h.
    Verified, the row is that plan: its cost, instances and units, and it met."""
    code, out, err = run_cli("plan", str(H137), "--json", "--verify-baselines")
    assert code == 0, err
    doc = json.loads(out)
    rows = {b["gpu"]: b for b in doc["baselines"]}
    assert set(rows) == {"A10", "T4", "V100"}
    assert all(b["verified"] and b["met"] for b in rows.values())
    a10 = planned_held_out("h137b-a10-only", tmp_path, folder="heldout65")
    assert rows["A10"]["cost_usd_per_hour"] == a10["cost_usd_per_hour"]
    assert rows["A10"]["instances"] == sum(a["instances"] for a in a10["allocations"])
    assert rows["A10"]["allocation"] == sorted(({"unit": a["unit"], "count": a["count"]} for a in a10["allocations"]),
                                               key=lambda u: u["unit"])
    saved = rows["A10"]["cost_usd_per_hour"] - doc["cost_usd_per_hour"]
    assert rows["A10"]["savings_usd_per_hour"] == pytest.approx(saved, abs=1e-3)


@pytest.mark.parametrize("other", ["--no-baselines", "--no-verify"])
def test_verify_baselines_needs_baselines_and_verification(run_cli, other):
    code, _, err = run_cli("plan", str(H137), "--verify-baselines", other)
    assert code == 2 and f"--verify-baselines and {other} contradict each other" in err


def test_the_summary_says_which_rows_are_verified_and_which_are_estimates():
    """Rows solved at the plan's rates say how to verify them; verified rows say they are, and a verified
    fleet below the plan is named as one its search did not reach."""
    from hetinfra.document import Plan
    from hetinfra.plan.summary_fleet import baseline_note, saving_cell
    from tests.plan.golden_plans import filled_golden

    doc = filled_golden("multi-region")
    plan = Plan.parse(doc)
    assert "`plan --verify-baselines` plans and verifies each" in baseline_note(plan)
    for b in doc["baselines"]:
        if b["feasible"] and not b.get("plan_itself"):
            b.update(verified=True, met=True, cost_usd_per_hour=doc["cost_usd_per_hour"] - 1.0,
                     savings_usd_per_hour=-1.0, savings_pct=-5.0)
        elif not b["feasible"]:
            b["verified"] = True  # a GPU type that cannot serve the spec alone, as its own plan said
    plan = Plan.parse(doc)
    note = baseline_note(plan)
    assert "verify-baselines` plans" not in note and "verified rows: the spec planned on that GPU type alone" in note
    assert "verified below this plan: a fleet its search did not reach" in note
    row = next(b for b in plan.baselines if b.verified)
    assert saving_cell(plan, row) == "-5.0% (-$1.00/h), verified"
