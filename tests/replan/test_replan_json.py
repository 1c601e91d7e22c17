"""`hetinfra replan --json`: one JSON document on stdout with the outcome, its exit code, the
decision and what was proposed or applied; the exit codes are those of the plain run."""

from __future__ import annotations

import json


def _deploy(run_cli, spec, offers, out):
    assert run_cli("plan", str(spec), "--feeds", str(offers), "--out", str(out), "--no-baselines")[0] == 0
    assert run_cli("apply", str(out), "--yes")[0] == 0


def test_replan_json_proposes_then_applies(fake_pulumi, cloud_env, service, run_cli, tmp_path, healthy_server,
                                           monkeypatch):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    day2 = offers("day2", 3.00, 0.80)

    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--json")
    doc = json.loads(stdout)
    assert code == 10 and doc["exit_code"] == 10 and doc["outcome"] == "proposed"
    assert doc["summary"].startswith("change: +1/-1 instance(s), $3.00/h -> $0.80/h") and "replan: change" in err
    d = doc["decision"]
    assert d["kind"] == "worth" and (d["instances_added"], d["instances_removed"]) == (1, 1)
    assert d["cost_usd_per_hour"] == {"running_when_planned": 1.0, "running_now": 3.0, "new": 0.8}
    assert (d["savings_usd_per_hour"], d["savings_pct"]) == (2.2, 73.33)
    assert sorted((c["instance_type"], c["before"], c["after"]) for c in d["changes"]) == \
        [("g5.xlarge", 1, 0), ("g6.xlarge", 0, 1)]
    assert "g5.xlarge in aws/us-east-1: $1/h -> $3/h (+200.0%)" in d["triggers"]
    assert doc["proposed_plan"] == str(out / "proposed" / "plan.json") and doc["stages"] is None

    monkeypatch.setenv("FAKE_PULUMI_ENDPOINT", healthy_server[0])
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply", "--json")
    doc = json.loads(stdout)
    assert code == 11 and doc["outcome"] == "applied" and doc["proposed_plan"] is None
    assert [(s["name"], s["status"]) for s in doc["stages"]] == [("make", "done"), ("break", "done")]
    log = (out / "replan.log").read_text()  # the apply's details, each stage's Pulumi preview too, go to the log
    assert "aws (stack prod): 2 to create, 0 to update, 0 to replace, 0 to delete, 4 unchanged" in log
    assert "     - delete toy-aws-us-east-1-g5-xlarge-asg [aws:autoscaling/group:Group]" in log

    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--json")
    doc = json.loads(stdout)
    assert code == 0 and doc["outcome"] == "no_change" and doc["decision"]["kind"] == "none"


def test_replan_json_error(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(tmp_path / "empty"), "--feeds",
                              str(offers("d", 1.0, 1.2)), "--json")
    doc = json.loads(stdout)
    assert code == 2 and doc["exit_code"] == 2 and doc["command"] == "replan" and "--state" in doc["error"]["message"]
