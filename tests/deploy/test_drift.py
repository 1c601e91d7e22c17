"""`hetinfra status`: live replicas read from the clouds (pulumi refresh, then the groups' APIs: Auto
Scaling, GCE's listManagedInstances), preempted and unhealthy instances and the cost of what runs,
against the recording stand-in and the cloud behind it (tests/deploy/fake_cloud.py)."""

from __future__ import annotations

import json

GCP_SPOT = "chat-8b-gcp-us-east4-a3-highgpu-1g-spot"
AWS_SPOT = "chat-8b-aws-us-east-1-g6e-xlarge-spot"
AWS_PIPELINE = "chat-8b-aws-us-east-1-g4dn-xlarge"  # replicas of 2 nodes: a one-VM group per node
GCP_ZONE = "us-east4-a"


def _status_json(run_cli, out, *extra):
    code, text, err = run_cli("status", str(out), "--json", *extra)
    assert code == 0, err
    return json.loads(text)


def _price(plan, unit):
    return next(a["price_per_instance_usd_per_hour"] for a in plan["allocations"] if a["deployment_unit"] == unit)


def _replicas(plan, unit=None) -> int:
    """The plan's replicas (desired), of ``unit`` or of all units."""
    return sum(a["count"] for a in plan["allocations"] if unit in (None, a["deployment_unit"]))


def test_a_preemption_shows_in_status_with_the_cost_of_what_runs(fake_pulumi, fake_cloud, cloud_env, planned_out,
                                                                run_cli):
    plan = json.loads((planned_out / "plan.json").read_text())
    assert {GCP_SPOT, AWS_SPOT, AWS_PIPELINE} <= {a["deployment_unit"] for a in plan["allocations"]}
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    desired, pipeline = _replicas(plan), _replicas(plan, AWS_PIPELINE)
    assert desired >= 6 and pipeline >= 1
    live = _status_json(run_cli, planned_out)["live"]
    assert live["live_replicas"] == live["desired_replicas"] == desired and live["drift"] == []
    assert live["cost_usd_per_hour"] == live["planned_cost_usd_per_hour"] == round(plan["cost_usd_per_hour"], 4)

    fake_cloud.preempt(GCP_SPOT, capacity=False)  # its MIG recreates it, but GCE has no spot capacity now
    fake_cloud.preempt(AWS_SPOT)  # a spot instance reclaimed, the group has no capacity to replace it
    fake_cloud.set_health(AWS_PIPELINE, health="Unhealthy")
    calls_before = len(fake_pulumi())
    doc = _status_json(run_cli, planned_out)
    live = doc["live"]
    units = live["units"]
    # both groups heal themselves: replacing, not lost (`pulumi up` would change nothing)
    assert (units[GCP_SPOT]["live"], units[GCP_SPOT]["lost"], units[GCP_SPOT]["replacing"]) == (0, 0, 1)
    assert any("ZONE_RESOURCE_POOL_EXHAUSTED" in n for n in units[GCP_SPOT]["notes"])
    assert (units[AWS_SPOT]["live"], units[AWS_SPOT]["lost"], units[AWS_SPOT]["replacing"]) == (0, 0, 1)
    # both nodes of each of its replicas fail their check
    assert (units[AWS_PIPELINE]["live"], units[AWS_PIPELINE]["unhealthy"]) == (0, 2 * pipeline)
    assert live["live_replicas"] == desired - 2 - pipeline
    assert units[GCP_SPOT]["short_since"] == live["read_at"] and units[GCP_SPOT]["stalled"] == 0  # first seen now
    # what runs bills: the unhealthy pipeline's two nodes still cost, the two preempted instances do not
    gone = _price(plan, GCP_SPOT) + _price(plan, AWS_SPOT)
    assert abs(live["cost_usd_per_hour"] - (plan["cost_usd_per_hour"] - gone)) < 1e-3
    assert units[AWS_PIPELINE]["cost_usd_per_hour"] == round(2 * pipeline * _price(plan, AWS_PIPELINE), 4)
    assert units[GCP_SPOT]["source"] == "pulumi refresh + Compute API"
    # one refresh and one export per stack; Auto Scaling read for the AWS groups, GCE for the MIG
    new = [[a for a in c["argv"] if a != "--non-interactive"][:2] for c in fake_pulumi()[calls_before:]]
    assert new.count(["refresh", "--skip-preview"]) == 2 and new.count(["stack", "export"]) == 2
    asg_calls = [c for c in fake_cloud.calls if c["action"] == "DescribeAutoScalingGroups"]
    assert asg_calls and all("AutoScalingGroupNames.member.1" in c["params"] for c in asg_calls)
    migs = {c["path"] for c in fake_cloud.calls if c["action"] == "listManagedInstances"}
    mig = next(iter(fake_cloud.records(GCP_SPOT).values()))
    assert f"/compute/v1/projects/demo-project-1/zones/{GCP_ZONE}/instanceGroupManagers/{mig['name']}" \
           "/listManagedInstances" in migs
    assert json.loads((planned_out / "state.json").read_text())["live"] == live  # kept for --no-refresh

    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0 and f"live: {desired - 2 - pipeline} of {desired} replica(s)" in text
    lines = {line.split()[1]: line.split() for line in text.splitlines() if line.startswith("  pulumi ")
             and len(line.split()) == 8}
    assert lines[GCP_SPOT][2:7] == ["1", "0", "0", "0", "1"]  # desired, live, unhealthy, lost, replacing
    assert f"drift: {GCP_SPOT}: 0 of 1 replica(s) live; 1 instance(s) missing that the group is replacing" in text
    assert f"drift: {AWS_SPOT}: 0 of 1 replica(s) live; 1 instance(s) missing that the group is replacing" in text

    fake_cloud.restore(GCP_SPOT)  # spot capacity is back: the MIG's new VM serves
    assert _status_json(run_cli, planned_out)["live"]["units"][GCP_SPOT]["live"] == 1

    # --no-refresh asks no cloud: it shows the last read
    calls_before, api_before = len(fake_pulumi()), len(fake_cloud.calls)
    recorded = json.loads((planned_out / "state.json").read_text())["live"]
    assert _status_json(run_cli, planned_out, "--no-refresh")["live"] == recorded
    assert len(fake_pulumi()) == calls_before and len(fake_cloud.calls) == api_before


def test_apply_refreshes_before_up_and_restores_resized_groups(fake_pulumi, fake_cloud, cloud_env, planned_out,
                                                               run_cli):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    fake_cloud.resize(GCP_SPOT, 0)  # scaled to zero outside Pulumi
    fake_cloud.resize(AWS_SPOT, 0)
    live = _status_json(run_cli, planned_out)["live"]["units"]
    assert (live[GCP_SPOT]["lost"], live[AWS_SPOT]["lost"]) == (1, 1)
    assert live[GCP_SPOT]["replacing"] == 0  # a group at size 0 lacks nothing it would replace
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    ups = [c["argv"] for c in fake_pulumi() if "up" in c["argv"][:2]]
    assert all("--refresh" in argv for argv in ups)
    live = _status_json(run_cli, planned_out)["live"]
    plan = json.loads((planned_out / "plan.json").read_text())
    assert live["live_replicas"] == _replicas(plan) and live["drift"] == []


def test_unreadable_live_state_is_exit_4_with_the_fallback(fake_pulumi, fake_cloud, cloud_env, planned_out, run_cli,
                                                          monkeypatch):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "refresh:aws")
    code, _, err = run_cli("status", str(planned_out))
    assert code == 4 and "pulumi refresh of the aws stack failed" in err and "InvalidClientTokenId" in err
    assert "--no-refresh" in err
    monkeypatch.delenv("FAKE_PULUMI_FAIL")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, _, err = run_cli("status", str(planned_out))
    assert code == 4 and "no AWS credentials" in err
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "expired")
    code, _, err = run_cli("status", str(planned_out))
    assert code == 4 and "cannot read the managed instance group" in err and "HTTP 401" in err
    assert "--no-refresh" in err
    code, text, _ = run_cli("status", str(planned_out), "--no-refresh")
    units = len(json.loads((planned_out / "plan.json").read_text())["allocations"])
    assert code == 0 and f"{units} unit(s) running" in text and "live replicas: not read" in text


def test_skyserve_units_read_from_sky_serve_status(sky_sdk, cloud_env, planned_out, run_cli):
    plan = json.loads((planned_out / "plan.json").read_text())
    assert run_cli("apply", str(planned_out), "--target", "skypilot", "--yes")[0] == 0
    units = sorted(a["deployment_unit"] for a in plan["allocations"])
    sky_sdk.replicas = {u: ["READY"] for u in units}
    sky_sdk.replicas[GCP_SPOT] = ["PREEMPTED"]  # the controller recycles and replaces it
    sky_sdk.replicas[AWS_PIPELINE] = ["NOT_READY"]  # a 2-node replica failing its readiness probe
    del sky_sdk.replicas[AWS_SPOT]  # taken down outside hetinfra
    live = _status_json(run_cli, planned_out)["live"]
    assert [sorted(c[1][0]) for c in sky_sdk if c[0] == "serve.status"] == [units]  # one call for all services
    u = live["units"]
    assert (u[GCP_SPOT]["live"], u[GCP_SPOT]["replacing"], u[GCP_SPOT]["cost_usd_per_hour"]) == (0, 1, 0)
    assert (u[AWS_PIPELINE]["live"], u[AWS_PIPELINE]["unhealthy"], u[AWS_PIPELINE]["running_instances"]) == (0, 2, 2)
    assert u[AWS_SPOT]["live"] == 0 and "SkyServe does not know this service" in u[AWS_SPOT]["notes"][0]
    # the other services answer one READY replica each
    assert live["live_replicas"] == len(units) - 3 and all(x["source"] == "sky serve status" for x in u.values())
