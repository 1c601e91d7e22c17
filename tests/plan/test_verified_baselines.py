"""plan --verify-baselines (hetinfra.plan.verified_baselines): each single-GPU-type row is the spec planned on
that GPU type alone and verified, not a solve at the plan's rates."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


CHAT = REPO / "services" / "chat.yaml"


@functools.cache
def _chat():
    from hetinfra.spec.load import load_spec

    return load_spec(CHAT)[0]


@settings(max_examples=6, deadline=None)
@given(flag=st.sampled_from(["verify_baselines", "strict"]),
       form=st.sampled_from(["  verify: {enabled: false}\n", "  verify:\n    enabled: false\n",
                             "  verify: {requests: 5000, enabled: no}\n"]))
def test_a_flag_that_judges_by_verification_meets_a_spec_that_turns_it_off(tmp_path_factory, flag, form):
    """--verify-baselines and --strict-verify beside planning.verify.enabled: false exit 2 at that key's line,
    before any solve, as beside --no-verify: verified rows read "missed in its own verification" of plans
    never simulated, and --strict-verify passed a plan nobody checked."""
    from hetinfra.errors import InvalidInputError
    from hetinfra.plan.pipeline import plan_document

    text = CHAT.read_text().replace("  headroom: 0.1\n", "  headroom: 0.1\n" + form)
    spec = tmp_path_factory.mktemp("s") / "s.yaml"
    spec.write_text(text)
    line = text.splitlines().index(next(ln for ln in text.splitlines() if "enabled" in ln)) + 1
    with pytest.raises(InvalidInputError) as e:
        plan_document(spec, **{flag: True})
    assert e.value.message.startswith(f"{spec}:{line}:") and "planning.verify.enabled is false" in e.value.message
    assert ("--verify-baselines" if flag == "verify_baselines" else "--strict-verify") in e.value.message


@settings(max_examples=12, deadline=None)
@given(fidelity=st.one_of(st.none(), st.builds(lambda r: {"verified": False, "reason": r},
                                               st.one_of(st.none(), st.text(min_size=1, max_size=40))),
                          st.builds(lambda m: {"verified": True, "met": m}, st.booleans())),
       cost=st.floats(0.5, 1000))
def test_a_verified_row_says_missed_only_where_its_plan_was_simulated_and_missed(fidelity, cost):
    """A verified row whose own plan was never simulated (too large: more than MAX_VERIFIED_ENGINES) has no
    ``met`` and says why, not "missed in its own verification" (chat at 3,000 req/s: its A10, A10G and L4
    rows)."""
    from types import SimpleNamespace

    from hetinfra.plan.summary_fleet import saving_cell
    from hetinfra.plan.verified_baselines import _verified_row

    fid = None if fidelity is None else SimpleNamespace(**{"met": None, "reason": None, **fidelity})
    sub = SimpleNamespace(cost_usd_per_hour=cost, allocations=[], fidelity=fid)
    planner = (lambda *a, **k: (None, sub), CHAT, {})
    doc = SimpleNamespace(cost_usd_per_hour=1.0, fidelity=None)
    row = _verified_row(doc, "L4", _chat(), planner, True)
    simulated = fid is not None and fid.verified
    assert row.met == (bool(fid.met) if simulated else None)
    assert (row.reason is None) == simulated and (simulated or row.reason)
    cell = saving_cell(doc, row)
    assert ("missed in its own verification" in cell) == (simulated and not fid.met)
    assert ("not verified" in cell) == (not simulated)
