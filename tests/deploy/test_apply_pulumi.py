"""`hetinfra apply/status/destroy` through the Automation API, against the recording stand-in
for the `pulumi` CLI: the exact commands, the state file, failure half-way and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _plan(out):
    return json.loads((out / "plan.json").read_text())


def _by_project(calls, out):
    per: dict[str, list] = {}
    for c in calls:
        argv = [a for a in c["argv"] if a != "--non-interactive"]
        if argv[:1] != ["version"]:
            per.setdefault(c["cwd"].replace(str(out / "pulumi") + "/", ""), []).append(argv)
    return per


# in-process stand-in (tests/deploy/inprocess_pulumi.py): the same argv, folder, environment and stdin; the
# spawned executable, secrets on stdin, is test_preview.py's test_secrets_never_on_a_command_line (the
# same apply through the real binary boundary: one such run is enough, each costs ~25 process starts)
def test_apply_runs_pulumi_up_per_cloud_and_records_state(fake_pulumi, pulumi_stacks, cloud_env, planned_out, run_cli,
                                                            tmp_path):
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, stderr + stdout
    plan = _plan(planned_out)
    # The preview lists every instance before anything runs.
    assert "Plan: " + str(sum(a["instances"] for a in plan["allocations"])) + " instance(s) to add, 0 to remove" in stdout
    per = _by_project(fake_pulumi(), planned_out)
    assert sorted(per) == ["aws", "gcp"]
    for cloud, argvs in per.items():
        ops = [a[:2] for a in argvs]
        # preview first (the stack made, its secret and the image pins set as `up` will have them), then the up
        assert ops[:5] == [["stack", "select"], ["stack", "init"], ["config", "set"], ["config", "set"],
                           ["preview", "--json"]]
        assert argvs[2] == ["config", "set", "--secret", "--stack", "prod", "hetinfra:apiKey"]  # the value on stdin
        assert argvs[3][:3] == ["config", "set", "hetinfra:images"]
        assert pulumi_stacks()[cloud]["prod"]["config"]["hetinfra:apiKey"] == {"secret": True, "value": "sk-test-key"}
        assert ops.index(["up", "--yes"]) > ops.index(["preview", "--json"])
        up = next(a for a in argvs if a[0] == "up")
        assert up[:3] == ["up", "--yes", "--skip-preview"] and up[up.index("--stack") + 1] == "prod"
        assert "--color" in up and up[up.index("--color") + 1] == "never"
        assert ["stack", "output", "--json"] == next(a for a in argvs if a[:2] == ["stack", "output"])[:3]
    assert all(c["passphrase"] for c in fake_pulumi())
    state = json.loads((planned_out / "state.json").read_text())
    running = sorted((a["deployment_unit"], a["count"], a["path"]) for a in state["allocations"])
    assert running == sorted((a["deployment_unit"], a["count"], "pulumi") for a in plan["allocations"])
    for a in plan["allocations"]:  # one load balancer per unit, whatever its replicas
        assert len(state["endpoints"][a["deployment_unit"]]) == 1
    assert state["operation"]["status"] == "done"
    assert [s["status"] for s in state["operation"]["steps"]] == ["done", "done"]
    assert set(state["pulumi"]) == {"aws", "gcp"}
    # status mirrors it
    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0 and f"{len(plan['allocations'])} unit(s) running" in text and "apply done" in text
    # plan --state reads what runs from state.json: nothing changed, nothing to start or stop
    from tests.deploy.conftest import at_the_middle

    code, out, err = run_cli("plan", str(at_the_middle(tmp_path, "multi-region")), "--state", str(planned_out),
                             "--json", "--no-baselines", "--no-verify")
    assert code == 0, err
    churn = json.loads(out)["churn"]
    assert churn["started"] == {} and churn["stopped"] == {}


def test_failure_half_way_is_recorded_and_resumed(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "up:gcp")
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 4
    assert "apply stopped at step pulumi:gcp (1 of 2 steps done)" in stderr
    assert "VcpuLimitExceeded" in stderr and "run `hetinfra apply" in stderr
    state = json.loads((planned_out / "state.json").read_text())
    assert {a["cloud"] for a in state["allocations"]} == {"aws"}  # only what really finished
    assert state["operation"]["status"] == "failed"
    assert [(s["id"], s["status"]) for s in state["operation"]["steps"]] == [("pulumi:aws", "done"),
                                                                              ("pulumi:gcp", "failed")]
    code, text, _ = run_cli("status", str(planned_out))
    assert "apply failed" in text and "again to resume" in text

    monkeypatch.delenv("FAKE_PULUMI_FAIL")
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, stderr
    # aws finished in the failed run: its preview shows no change and its step is not run again
    assert "aws (stack prod): 0 to create, 0 to update, 0 to replace, 0 to delete" in stdout
    assert "[pulumi:aws] done in an earlier run; skipped" in stdout
    ups = [c["cwd"].rsplit("/", 1)[1] for c in fake_pulumi() if "up" in c["argv"][:2]]
    assert ups == ["aws", "gcp", "gcp"]  # aws once, gcp failed then succeeded
    state = json.loads((planned_out / "state.json").read_text())
    assert {a["cloud"] for a in state["allocations"]} == {"aws", "gcp"} and state["operation"]["status"] == "done"


def test_destroy_mirrors_apply(fake_pulumi, cloud_env, planned_out, run_cli):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    code, stdout, stderr = run_cli("destroy", str(planned_out), "--yes")
    assert code == 0, stderr
    assert "to remove" in stdout
    destroys = sorted(c["cwd"].rsplit("/", 1)[1] for c in fake_pulumi() if "destroy" in c["argv"][:2])
    assert destroys == ["aws", "gcp"]
    state = json.loads((planned_out / "state.json").read_text())
    assert state["allocations"] == [] and state["endpoints"] == {} and state["pulumi"] == {}


def test_missing_cli_credentials_passphrase_or_key_change_nothing(fake_pulumi, cloud_env, planned_out, run_cli,
                                                                   monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 4 and "PULUMI_CONFIG_PASSPHRASE" in err
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 4 and "gcp: no GCP credentials" in err and "gcloud auth application-default login" in err
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/x.json")
    monkeypatch.delenv("VLLM_API_KEY")
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "VLLM_API_KEY is not set" in err
    monkeypatch.setenv("VLLM_API_KEY", "k")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pulumi
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 4 and "pulumi command is not on PATH" in err and "get.pulumi.com" in err
    # preflight may ask `pulumi version` (the binaries check); nothing else ran
    assert not (planned_out / "state.json").exists() and [c["argv"] for c in fake_pulumi()
                                                          if c["argv"][:1] != ["version"]] == []


def test_preflight_lists_every_missing_prerequisite_in_one_run(fake_pulumi, cloud_env, planned_out, run_cli,
                                                                monkeypatch):
    """Four things missing at once: one run names all of them, the binary first, each with its fix."""
    for name in ("PULUMI_CONFIG_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS", "VLLM_API_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pulumi
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2, err  # the lowest code among them: the missing setting (VLLM_API_KEY)
    assert "4 prerequisites are missing (1 configuration, 3 provider: exit 2, the lowest code among them)" in err
    for fragment in ("[binaries] (provider, exit 4) the pulumi command is not on PATH",
                     "[settings] (configuration, exit 2) VLLM_API_KEY is not set",
                     "[settings] (provider, exit 4) the file:// Pulumi backend", "(provider, exit 4) gcp: no GCP credentials"):
        assert fragment in err, fragment
    assert err.index("pulumi command is not on PATH") < err.index("VLLM_API_KEY") < err.index("gcp: no GCP")
    assert "Traceback" not in err and not (planned_out / "state.json").exists()


def test_several_missing_provider_prerequisites_exit_4(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    """No pulumi, no passphrase, no GCP login, the configuration whole: every item is a provider's,
    so cron reads 4 (a provider failure), not 2, however many are missing."""
    for name in ("PULUMI_CONFIG_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pulumi
    code, out, err = run_cli("apply", str(planned_out), "--yes", "--json")
    assert code == 4, err
    missing = json.loads(out)["error"]["missing"]
    assert [m["exit_code"] for m in missing] == [4, 4, 4] and [m["kind"] for m in missing] == [
        "binaries", "settings", "credentials"]
    assert "(3 provider: exit 4, the lowest code among them)" in json.loads(out)["error"]["message"]


def test_several_missing_configuration_items_exit_2(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    """No VLLM_API_KEY and no GCP project, the tools and logins all there: exit 2, each line says so."""
    for name in ("VLLM_API_KEY", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name)
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2, err
    assert "2 prerequisites are missing (2 configuration: exit 2, the lowest code among them)" in err
    assert "[settings] (configuration, exit 2) VLLM_API_KEY is not set" in err
    assert "[settings] (configuration, exit 2) the gcp stack needs a GCP project" in err


def test_no_confirmation_without_a_terminal(fake_pulumi, pulumi_stacks, cloud_env, planned_out, run_cli):
    code, stdout, err = run_cli("apply", str(planned_out))
    assert code == 2 and "pass --yes" in err and "instance(s) to add" in stdout
    # the preview was shown (the five AWS units of the middle-rate plan), nothing was applied
    assert "aws (stack prod): 22 to create" in stdout
    ops = {tuple(c["argv"][1:3]) for c in fake_pulumi() if c["argv"][:1] != ["version"]}
    assert ops == {("stack", "select"), ("stack", "init"), ("config", "set"), ("set", "hetinfra:images"),
                   ("preview", "--json")}
    assert all(s["prod"]["resources"] == [] and s["prod"]["declared"] == {} for s in pulumi_stacks().values())
    assert not (planned_out / "state.json").exists()


def test_missing_plan_is_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("apply", str(tmp_path), "--yes")  # a folder without plan.json
    assert code == 2 and "no plan.json" in err and "hetinfra plan SPEC --out" in err
    code, _, err = run_cli("apply", str(tmp_path / "nowhere"), "--yes")  # no folder (hetinfra.cli.common.OutDir)
    assert code == 2 and "nowhere: no such directory" in err and "hetinfra plan SPEC --out" in err


def test_destroy_needs_no_passphrase_with_a_service_backend(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    code, _, err = run_cli("destroy", str(planned_out), "--yes")
    assert code == 4 and "PULUMI_CONFIG_PASSPHRASE" in err  # file backend: the passphrase is needed
    plan = json.loads((planned_out / "plan.json").read_text())
    plan["deploy"]["backend_url"] = "https://api.pulumi.com"
    (planned_out / "plan.json").write_text(json.dumps(plan))
    code, _, err = run_cli("destroy", str(planned_out), "--yes")
    assert code == 0, err


def test_a_moved_out_dir_destroys_from_its_own_backend(fake_pulumi, cloud_env, planned_out, run_cli, tmp_path):
    """apply and destroy hand pulumi the backend inside the project folder where it is now
    (PULUMI_BACKEND_URL), and this interpreter to run the program (PULUMI_PYTHON_CMD)."""
    import shutil
    import sys

    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    ups = [c for c in fake_pulumi() if c["argv"][:1] != ["version"]]
    assert ups and all(c["backend"] == f"file://{(planned_out / 'pulumi' / c['cwd'].rsplit('/', 1)[1] / 'state').resolve()}"
                       and c["python"] == sys.executable for c in ups)
    moved = tmp_path / "moved" / "out"
    shutil.copytree(planned_out, moved)
    shutil.rmtree(planned_out)
    code, _, err = run_cli("destroy", str(moved), "--yes")
    assert code == 0, err
    destroys = [c for c in fake_pulumi() if c["argv"][:1] != ["version"] and str(moved) in c["cwd"]]
    assert sorted({c["cwd"].rsplit("/", 1)[1] for c in destroys}) == ["aws", "gcp"]
    for c in destroys:
        assert c["backend"] == f"file://{(Path(c['cwd']) / 'state').resolve()}"
        assert c["backend"].startswith(f"file://{moved.resolve()}/pulumi/")
