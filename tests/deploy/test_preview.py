"""`hetinfra apply` shows Pulumi's own preview per stack (replacements of GPU VMs called out) before
it asks; a failed preview changes nothing; `--json` on apply and destroy; secrets never in argv."""

from __future__ import annotations

import json

import pytest

from hetinfra.deploy.preview import parse_preview, render_changes
from tests.plan.golden_plans import routed_to_allocations

# Pulumi's previewDigest as `pulumi preview --json` prints it: a replacement is three steps of one URN.
DIGEST = {
    "config": {"aws:region": "us-east-1", "hetinfra:apiKey": "[secret]"},
    "steps": [
        {"op": "same", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet::chat-aws-us-east-1"},
        {"op": "create-replacement", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:autoscaling/group:Group::u1-asg",
         "replaceReasons": ["placementGroup"]},
        {"op": "replace", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:autoscaling/group:Group::u1-asg",
         "diffReasons": ["placementGroup", "desiredCapacity"], "replaceReasons": ["placementGroup"]},
        {"op": "update", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:ec2/launchTemplate:LaunchTemplate::u1-lt",
         "diffReasons": ["userData"]},
        {"op": "create", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:ec2/instance:Instance::chat-aws-us-east-1-gateway"},
        {"op": "delete", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:lb/listener:Listener::u0-listener"},
        {"op": "delete-replaced", "urn": "urn:pulumi:prod::p::hetinfra:aws:GpuFleet$aws:autoscaling/group:Group::u1-asg"},
    ],
    "changeSummary": {"same": 1, "replace": 1, "update": 1, "create": 1, "delete": 1},
}


def test_a_replacement_reported_three_ways_counts_once():
    p = parse_preview("aws", "prod", DIGEST)
    assert p.counts == {"create": 1, "update": 1, "replace": 1, "delete": 1, "same": 1}
    assert p.counts == {k: DIGEST["changeSummary"].get(k, 0) for k in p.counts}  # agrees with Pulumi's own summary
    (rep,) = p.replacements
    assert (rep.name, rep.type, rep.kind, rep.reasons) == ("u1-asg", "aws:autoscaling/group:Group", "gpu",
                                                                      ["placementGroup"])
    kinds = {c.name: c.kind for c in p.changes}
    assert kinds == {"u1-asg": "gpu", "u1-lt": "gpu", "chat-aws-us-east-1-gateway": "gateway", "u0-listener": "other"}
    text = render_changes([p], [])
    assert "  aws (stack prod): 1 to create, 1 to update, 1 to replace, 1 to delete, 1 unchanged" in text
    assert "    !! REPLACE GPU group u1-asg [aws:autoscaling/group:Group] (because placementGroup changed)" in text
    assert "     - delete u0-listener [aws:lb/listener:Listener]" in text
    assert "!! 1 GPU VM(s)/group(s) will be REPLACED" in text


def _plan(out):
    return json.loads((out / "plan.json").read_text())


def _edit(out, plan):
    (out / "plan.json").write_text(json.dumps(plan, indent=2))


def _change_fleet(out):
    """A new engine version, one more replica of an AWS single-node unit, one GCP unit gone."""
    plan = _plan(out)
    plan["deploy"]["vllm_version"] = "0.11.1"
    grown = next(a for a in plan["allocations"] if a["cloud"] == "aws" and a["nodes_per_replica"] == 1)
    gone = next(a for a in plan["allocations"] if a["cloud"] == "gcp")
    plan["allocations"] = [dict(a, count=a["count"] + 1, instances=a["count"] + 1,
                                cost_usd_per_hour=round(a["price_per_instance_usd_per_hour"] * (a["count"] + 1), 4))
                           if a is grown else a for a in plan["allocations"] if a is not gone]
    plan = routed_to_allocations(plan)  # the gone unit's routes move to its model's others, as a re-plan's would
    _edit(out, plan)
    return plan, grown, gone


def _groups(a):
    """A unit's self-healing groups: one, or one per node of a pipeline replica."""
    if a["nodes_per_replica"] == 1:
        return [a["deployment_unit"]]
    return [f"{a['deployment_unit']}-r{r}-n{k}" for r in range(a["count"]) for k in range(a["nodes_per_replica"])]


def test_apply_shows_each_stacks_preview_and_calls_out_gpu_replacements(fake_pulumi, pulumi_stacks, cloud_env,
                                                                        planned_out, run_cli):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    before = pulumi_stacks()
    plan, grown, gone = _change_fleet(planned_out)
    code, stdout, err = run_cli("apply", str(planned_out))  # no terminal: shown, then refused
    assert code == 2 and "pass --yes" in err
    aws = [a for a in plan["allocations"] if a["cloud"] == "aws"]
    gcp = [a for a in plan["allocations"] if a["cloud"] == "gcp"]
    aws_groups = sum(1 if a["nodes_per_replica"] == 1 else a["count"] * a["nodes_per_replica"] for a in aws)
    aws_regions = len({a["region"] for a in aws})
    # AWS: every launch template gets the new engine in its user data and the grown unit's group its
    # new desired capacity, in place; GCP: each VM's startup script forces a replacement.
    assert (f"  aws (stack prod): 0 to create, {aws_groups + 1} to update, 0 to replace, 0 to delete, "
            f"{2 * aws_regions + aws_groups - 1} unchanged") in stdout
    # GCP: each group's instance template is immutable, so the new startup script replaces it and
    # the managed instance group is updated in place to roll to it
    kept = sorted(g for a in gcp for g in _groups(a))
    assert (f"  gcp (stack prod): 0 to create, {len(kept)} to update, {len(kept)} to replace, "
            f"{2 * len(_groups(gone))} to delete, 2 unchanged") in stdout
    for g in kept:
        assert (f"    !! REPLACE GPU template {g}-tpl [gcp:compute/instanceTemplate:InstanceTemplate] "
                "(because metadataStartupScript changed)") in stdout
    for g in _groups(gone):
        assert f"     - delete {g}-mig [gcp:compute/instanceGroupManager:InstanceGroupManager]" in stdout
    assert f"!! {len(kept)} GPU VM(s)/group(s) will be REPLACED" in stdout
    # the preview comes before the question and changes nothing
    assert stdout.index("Pulumi preview, per stack:") > stdout.index("Plan: ")
    assert len([c for c in fake_pulumi() if c["argv"][1:2] == ["up"]]) == 2  # the first apply's only
    assert {c: s["prod"]["declared"] for c, s in pulumi_stacks().items()} == \
        {c: s["prod"]["declared"] for c, s in before.items()}


def test_a_failed_preview_changes_nothing_and_exits_4(fake_pulumi, pulumi_stacks, cloud_env, planned_out, run_cli,
                                                      monkeypatch):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    state_before = (planned_out / "state.json").read_text()
    before = pulumi_stacks()
    _change_fleet(planned_out)
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "preview:gcp")
    code, stdout, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 4
    assert ("error: pulumi preview of the gcp stack failed: googleapi: Error 403: Required 'compute.instances.create' "
            "permission for 'projects/demo'; nothing was changed") in err
    assert "cd <OUT>/pulumi/gcp && pulumi preview" in err
    assert (planned_out / "state.json").read_text() == state_before
    assert len([c for c in fake_pulumi() if c["argv"][1:2] == ["up"]]) == 2  # the first apply's only
    assert {c: s["prod"]["declared"] for c, s in pulumi_stacks().items()} == \
        {c: s["prod"]["declared"] for c, s in before.items()}
    # --json: the one document says what was found before the failure, and the error with its code
    code, stdout, err = run_cli("apply", str(planned_out), "--yes", "--json")
    doc = json.loads(stdout)
    assert code == 4 and doc["exit_code"] == 4 and doc["error"]["exit_code"] == 4
    assert doc["error"]["type"] == "ProviderError" and "pulumi preview of the gcp stack failed" in doc["error"]["message"]
    assert doc["command"] == "apply" and doc["applied"] is False and doc["changes"]["instances_added"] == 1


def test_apply_and_destroy_json(fake_pulumi, cloud_env, planned_out, run_cli):
    plan = _plan(planned_out)
    code, stdout, err = run_cli("apply", str(planned_out), "--yes", "--json")
    assert code == 0, err
    doc = json.loads(stdout)  # the whole of stdout is one document
    assert "[pulumi:aws] ..." in err and "Applied: " in err  # progress went to stderr
    assert doc["command"] == "apply" and doc["applied"] is True and doc["target"] == "all"
    ch = doc["changes"]
    assert ch["instances_added"] == sum(a["instances"] for a in plan["allocations"]) and ch["instances_removed"] == 0
    assert ch["cost_usd_per_hour"]["before"] == 0 and \
        abs(ch["cost_usd_per_hour"]["after"] - sum(a["cost_usd_per_hour"] for a in plan["allocations"])) < 1e-3
    gcp_groups = sum(len(_groups(a)) for a in plan["allocations"] if a["cloud"] == "gcp")  # a template + a group each
    assert ch["pulumi"]["gcp"]["counts"] == {"create": 2 + 2 * gcp_groups, "update": 0, "replace": 0, "delete": 0,
                                             "same": 0}
    assert {c["op"] for c in ch["pulumi"]["aws"]["changes"]} == {"create"} and ch["skypilot"] == []
    assert [(s["id"], s["status"]) for s in doc["steps"]] == [("pulumi:aws", "done"), ("pulumi:gcp", "done")]
    assert set(doc["stacks"]) == {"aws", "gcp"} and all(s["status"] == "done" for s in doc["stacks"].values())
    for a in plan["allocations"]:  # one load balancer per unit
        assert len(doc["endpoints"][a["deployment_unit"]]) == 1
        assert doc["stacks"][a["cloud"]]["outputs"]["endpoints"][a["deployment_unit"]] == \
            doc["endpoints"][a["deployment_unit"]]
    assert doc["running"] == sorted(a["deployment_unit"] for a in plan["allocations"])

    code, stdout, err = run_cli("apply", str(planned_out), "--yes", "--json")  # again: the previews show no change
    doc = json.loads(stdout)
    assert code == 0 and doc["changes"]["instances_added"] == 0 and doc["changes"]["instances_removed"] == 0
    assert all(p["changes"] == [] and p["counts"]["same"] > 0 for p in doc["changes"]["pulumi"].values())

    code, stdout, err = run_cli("destroy", str(planned_out), "--yes", "--json")
    doc = json.loads(stdout)
    assert code == 0 and doc["command"] == "destroy" and doc["destroyed"] is True
    assert doc["changes"]["instances_removed"] == sum(a["instances"] for a in plan["allocations"])
    assert doc["running"] == [] and doc["endpoints"] == {} and doc["stacks"] == {}
    assert [s["status"] for s in doc["steps"]] == ["done", "done"]

    code, stdout, _ = run_cli("destroy", str(planned_out / "nowhere"), "--yes", "--json")
    doc = json.loads(stdout)  # no such folder (hetinfra.cli.common.OutDir): the usage error's document
    assert code == 2 and doc["exit_code"] == 2 and "nowhere: no such directory" in doc["error"]["message"]
    (planned_out / "empty").mkdir()
    code, stdout, _ = run_cli("destroy", str(planned_out / "empty"), "--yes", "--json")
    doc = json.loads(stdout)
    assert code == 2 and doc["exit_code"] == 2 and "no state.json" in doc["error"]["message"]


def test_a_failed_step_in_json_names_the_steps(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "up:gcp")
    code, stdout, _ = run_cli("apply", str(planned_out), "--yes", "--json")
    doc = json.loads(stdout)
    assert code == 4 and doc["exit_code"] == 4 and doc["error"]["step"] == "pulumi:gcp"
    assert [(s["id"], s["status"]) for s in doc["error"]["steps"]] == [("pulumi:aws", "done"), ("pulumi:gcp", "failed")]
    assert doc["changes"]["pulumi"]["gcp"]["counts"]["create"] > 0


# the real binary boundary: secrets must not reach a spawned process's argv
@pytest.mark.pulumi_subprocess
def test_secrets_never_on_a_command_line(fake_pulumi, pulumi_stacks, cloud_env, planned_out, run_cli, monkeypatch,
                                         tmp_path):
    key = tmp_path / "gw.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nMIIEvQ-private-key-body\n-----END PRIVATE KEY-----\n")
    plan = _plan(planned_out)
    plan["deploy"]["gateway"] = {"enabled": True, "port": 8443, "tls_cert": str(key), "tls_key": str(key)}
    _edit(planned_out, plan)
    secrets = {"VLLM_API_KEY": "sk-very-secret-4f2a", "HF_TOKEN": "hf_secret_token_9b1c",
               "HETINFRA_API_KEY": "ops:ck-secret-77e0"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    code, stdout, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, err
    calls = fake_pulumi()
    assert any(c["argv"][1:3] == ["config", "set"] for c in calls)
    values = list(secrets.values()) + ["MIIEvQ-private-key-body"]
    for c in calls:
        line = " ".join(c["argv"])
        assert not [v for v in values if v in line], c["argv"]
    for cloud, stacks in pulumi_stacks().items():  # ... and each arrived whole, through stdin
        config = stacks["prod"]["config"]
        assert config["hetinfra:apiKey"] == {"secret": True, "value": secrets["VLLM_API_KEY"]}
        assert config["hetinfra:hfToken"]["value"] == secrets["HF_TOKEN"]
        assert config["hetinfra:gatewayApiKey"]["value"] == secrets["HETINFRA_API_KEY"]
        assert config["hetinfra:gatewayTlsKey"]["value"] == key.read_text()
    written = "".join(p.read_text() for p in planned_out.rglob("*") if p.is_file() and "state" not in p.parts)
    assert not [v for v in values if v in written]
