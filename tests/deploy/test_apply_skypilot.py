"""`hetinfra apply --target skypilot` with SkyPilot's SDK mocked at its boundary (the request
calls and stream_and_get): the exact calls, secrets by value at launch only, make-before-break."""

from __future__ import annotations

import json
from hetinfra.document import Plan  # apply_plan takes the typed plan
from tests.plan.golden_plans import routed_to_allocations


def test_skypilot_apply_update_and_down(sky_sdk, cloud_env, planned_out, run_cli):
    from hetinfra.deploy.apply import apply_plan

    plan = json.loads((planned_out / "plan.json").read_text())
    code, stdout, stderr = run_cli("apply", str(planned_out), "--target", "skypilot", "--yes")
    assert code == 0, stderr + stdout
    ups = [c for c in sky_sdk if c[0] == "serve.up"]
    assert sorted(c[1][1] for c in ups) == sorted(a["deployment_unit"] for a in plan["allocations"])
    for _, (task, name), _ in ups:
        a = next(x for x in plan["allocations"] if x["deployment_unit"] == name)
        res = list(task.resources)[0]  # the planned offer; its alternates follow (`ordered`)
        assert (res.instance_type, res.region, res.use_spot) == (a["instance_type"], a["region"], a["spot"])
        secret = task.secrets["VLLM_API_KEY"]  # given at launch, never in the YAML
        assert (secret.get_secret_value() if hasattr(secret, "get_secret_value") else secret) == "sk-test-key"
    assert "sk-test-key" not in "".join(p.read_text() for p in (planned_out / "skypilot").iterdir())
    assert sky_sdk[0][0] == "enabled_clouds"  # checked before the first launch
    state = json.loads((planned_out / "state.json").read_text())
    assert {a["path"] for a in state["allocations"]} == {"skypilot"}
    assert state["endpoints"][ups[0][1][1]] == [f"{ups[0][1][1]}.sky.example:30001"]

    # A new plan: one unit grows, one leaves. Ups/updates first, the down last (make-before-break).
    grown, gone = plan["allocations"][0], plan["allocations"][-1]
    new_plan = dict(plan, allocations=[dict(grown, count=grown["count"] + 1,
                                                         instances=(grown["count"] + 1) * grown["nodes_per_replica"])]
                    + plan["allocations"][1:-1])
    sky_sdk.clear()
    shown: list[str] = []
    report: dict = {}
    apply_plan(planned_out, Plan.parse(routed_to_allocations(new_plan)), target="skypilot", yes=True, echo=shown.append, report=report)
    text = "\n".join(shown)
    assert "SkyServe: 0 new service(s), 1 update(s), 1 down" in text
    before = grown["count"]
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert (f"~ update {grown['deployment_unit']} {before} -> {before + 1} replica(s) {grown['instance_type']} "
            f"({grown['gpu']})" + (" spot" if grown["spot"] else "") + " (rolling)") in lines
    assert any(line.startswith(f"- down {gone['deployment_unit']} {gone['count']} -> 0 replica(s)") for line in lines)
    assert [(r["unit"], r["action"], r["replicas_before"], r["replicas_after"]) for r in report["changes"]["skypilot"]] \
        == [(grown["deployment_unit"], "update", before, before + 1), (gone["deployment_unit"], "down", gone["count"], 0)]
    assert report["services"][grown["deployment_unit"]]["service"] == grown["deployment_unit"]
    assert [c[0] for c in sky_sdk] == ["enabled_clouds", "serve.update", "serve.down"]
    assert sky_sdk[1][1][1] == grown["deployment_unit"] and sky_sdk[2][1][0] == [gone["deployment_unit"]]
    state = json.loads((planned_out / "state.json").read_text())
    assert gone["deployment_unit"] not in {a["deployment_unit"] for a in state["allocations"]}


def test_a_unit_never_runs_through_both_paths(sky_sdk, fake_pulumi, cloud_env, planned_out, run_cli):
    assert run_cli("apply", str(planned_out), "--target", "skypilot", "--yes")[0] == 0
    code, _, err = run_cli("apply", str(planned_out), "--target", "pulumi", "--yes")
    assert code == 2 and "would run it twice" in err and "hetinfra destroy" in err


def test_skypilot_without_cloud_access_is_exit_4(sky_sdk, sky_offline, cloud_env, planned_out, run_cli, monkeypatch):
    from sky.client import sdk

    monkeypatch.setattr(sdk, "enabled_clouds", lambda *a, **k: "req-x")
    sky, _ = sky_offline
    monkeypatch.setattr(sky, "stream_and_get", lambda rid, **kw: ["AWS"])
    code, _, err = run_cli("apply", str(planned_out), "--target", "skypilot", "--yes")
    assert code == 4 and "SkyPilot cannot use gcp" in err and "sky check gcp" in err
    assert not (planned_out / "state.json").exists()


def test_target_all_splits_by_cloud_and_removes_units_that_left(sky_sdk, fake_pulumi, cloud_env, planned_out):
    from hetinfra.deploy.apply import apply_plan

    plan = json.loads((planned_out / "plan.json").read_text())
    plan["deploy"]["skypilot_clouds"] = ["gcp"]
    apply_plan(planned_out, Plan.parse(plan), target="all", yes=True, echo=lambda s: None)
    state = json.loads((planned_out / "state.json").read_text())
    assert {(a["cloud"], a["path"]) for a in state["allocations"]} == {("aws", "pulumi"), ("gcp", "skypilot")}
    gcp_units = sorted(a["deployment_unit"] for a in plan["allocations"] if a["cloud"] == "gcp")
    assert sorted(c[1][1] for c in sky_sdk if c[0] == "serve.up") == gcp_units

    # The next plan has no GCP unit left: `all` takes the SkyServe services down too.
    sky_sdk.clear()
    aws_only = dict(plan, allocations=[a for a in plan["allocations"] if a["cloud"] == "aws"])
    apply_plan(planned_out, Plan.parse(routed_to_allocations(aws_only)), target="all", yes=True, echo=lambda s: None)
    assert [(c[0], c[1][0]) for c in sky_sdk if c[0] == "serve.down"] == [("serve.down", gcp_units)]
    state = json.loads((planned_out / "state.json").read_text())
    assert {a["cloud"] for a in state["allocations"]} == {"aws"}


def _server(monkeypatch, *, up: bool, stops: list):
    """SkyPilot's local API server seen through its own status call: up or not, stops recorded."""
    from types import SimpleNamespace

    from sky.client import sdk
    from sky.server import common

    status = common.ApiServerStatus.HEALTHY if up else common.ApiServerStatus.UNHEALTHY
    monkeypatch.setattr(common, "is_api_server_local", lambda *a, **k: True)
    monkeypatch.setattr(common, "get_api_server_status", lambda *a, **k: SimpleNamespace(status=status))
    monkeypatch.setattr(sdk, "api_stop", lambda: stops.append("stop") or print("SkyPilot API server stopped."))


def test_a_failed_skypilot_apply_stops_the_server_it_started_and_keeps_json_pure(
        sky_sdk, sky_offline, cloud_env, planned_out, run_cli, monkeypatch):
    from sky.client import sdk

    stops: list = []
    _server(monkeypatch, up=False, stops=stops)

    def chatty_enabled_clouds(*a, **k):  # SkyPilot prints its banner on stdout, at both levels
        print("Starting SkyPilot API server, view logs at ~/.sky/api_server/server.log")
        import os
        os.write(1, b"sky banner on fd 1\n")
        return "req-x"

    monkeypatch.setattr(sdk, "enabled_clouds", chatty_enabled_clouds)
    sky, _ = sky_offline
    monkeypatch.setattr(sky, "stream_and_get", lambda rid, **kw: ["AWS"])  # gcp not enabled: exit 4
    code, stdout, err = run_cli("apply", str(planned_out), "--target", "skypilot", "--yes", "--json")
    assert code == 4 and "SkyPilot cannot use gcp" in err
    assert json.loads(stdout)["exit_code"] == 4  # stdout is the JSON document only
    assert "Starting SkyPilot API server" in err and "API server stopped" in err
    assert stops == ["stop"]  # started by this run, stopped on the error path


def test_a_server_that_was_running_before_is_left_running(sky_sdk, cloud_env, planned_out, run_cli, monkeypatch):
    stops: list = []
    _server(monkeypatch, up=True, stops=stops)
    code, _, err = run_cli("apply", str(planned_out), "--target", "skypilot", "--yes")
    assert code == 0, err
    code, _, err = run_cli("destroy", str(planned_out), "--target", "skypilot", "--yes")
    assert code == 0, err
    assert stops == []
