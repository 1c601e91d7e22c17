"""`hetinfra plan --detailed-exitcode`: 0 when the plan changes nothing against the out dir's
deployment (state.json, else the previous plan.json), 10 when changes are pending."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import copied_plan

REPO = Path(__file__).resolve().parents[2]
SPEC = str(REPO / "services" / "multi-region.yaml")
FAST = ("--no-baselines", "--no-verify")


def test_detailed_exitcode_against_plan_and_state(run_cli, tmp_path):
    out = tmp_path / "out"
    code, _, err = run_cli("plan", SPEC, "--out", str(out), "--detailed-exitcode", *FAST)
    plan = json.loads((out / "plan.json").read_text())
    assert code == 10 and "changes pending against nothing deployed (no state.json or plan.json): " \
        f"+{sum(a['instances'] for a in plan['allocations'])}/-0 instance(s); {len(plan['allocations'])} unit(s) to start" in err

    # The same spec again: the previous plan.json is the reference, and nothing differs.
    code, stdout, err = run_cli("plan", SPEC, "--out", str(out), "--detailed-exitcode", "--json", *FAST)
    assert code == 0 and f"no change against {out / 'plan.json'}" in err
    assert json.loads(stdout)["allocations"] == plan["allocations"]  # stdout stays the plan document

    # What runs (state.json) has one unit short a replica and lacks another: both are pending.
    short, missing = plan["allocations"][0], plan["allocations"][1]
    running = [dict(a, path="pulumi") for a in plan["allocations"] if a is not missing]
    grown = short["instances"] + short["nodes_per_replica"]  # its $/h with it, as apply records a unit
    running[0] = dict(short, path="pulumi", count=short["count"] + 1, instances=grown,
                      cost_usd_per_hour=round(short["price_per_instance_usd_per_hour"] * grown, 4))
    (out / "state.json").write_text(json.dumps({"state_version": 1, "service": plan["service"], "allocations": running}))
    code, _, err = run_cli("plan", SPEC, "--state", str(out), "--detailed-exitcode", *FAST)
    assert code == 10
    assert (f"changes pending against {out / 'state.json'}: +{missing['instances']}/-{short['nodes_per_replica']} "
            "instance(s); 1 unit(s) to start; 1 changed (count, instances)") in err


def test_a_changed_deploy_section_is_pending(run_cli, tmp_path, shared_plan):
    out = copied_plan(shared_plan(Path(SPEC), *FAST), tmp_path / "out")  # the run's one plan of SPEC, *FAST
    plan = json.loads((out / "plan.json").read_text())
    plan["deploy"]["vllm_version"] = "0.1.0"  # what was planned before differs in its engine only
    (out / "plan.json").write_text(json.dumps(plan))
    code, _, err = run_cli("plan", SPEC, "--out", str(out), "--detailed-exitcode", *FAST)
    assert code == 10 and err.strip().endswith(f"changes pending against {out / 'plan.json'}: +0/-0 instance(s); "
                                               "deploy: vllm_version")


def test_detailed_exitcode_needs_a_deployment(run_cli):
    code, stdout, err = run_cli("plan", SPEC, "--detailed-exitcode", "--json", *FAST)
    assert code == 2 and "give --state DIR or --out DIR" in err
    doc = json.loads(stdout)
    assert doc["exit_code"] == 2 and doc["error"]["type"] == "InvalidInputError"
