"""What a replan leaves in OUT: a preflight failure of ``--apply`` changes nothing (no half-way journal
to push later), a run that proposes nothing leaves no stale proposal, another service's spec is refused,
and the summary's counts are the whole change's real launches and removals, apart from this run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml


def _files(out: Path) -> dict[str, bytes]:
    """OUT's files and their bytes, but for the log and the lock every run writes."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("replan.log", ".replan.lock")}


def _planned(service, run_cli, tmp_path) -> tuple[Path, Path, Path]:
    """(the toy spec, OUT planned from it on day 1's prices, those prices)."""
    spec, offers = service
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    assert run_cli("plan", str(spec), "--feeds", str(day1), "--out", str(out), "--no-baselines")[0] == 0
    return spec, out, day1


def _replan_json(run_cli, spec: Path, out: Path, feeds: Path, *more: str) -> tuple[int, dict]:
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(feeds), "--json", *more)
    return code, json.loads(stdout)


@pytest.mark.parametrize("deployed", [True, False])
def test_a_failed_preflight_leaves_out_as_it_was(fake_pulumi, cloud_env, service, run_cli, tmp_path, monkeypatch,
                                                 deployed):
    spec, offers = service
    out = tmp_path / "out"
    assert run_cli("plan", str(spec), "--feeds", str(offers("day1", 1.00, 1.20)), "--out", str(out),
                   "--no-baselines")[0] == 0
    if deployed:
        assert run_cli("apply", str(out), "--yes")[0] == 0
    before = _files(out)
    day2 = offers("day2", 3.00, 0.80)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)  # a prerequisite the preflight finds missing
    # --no-refresh: a live read records what it read in state.json, as `status` does (not this run's change)
    code, _, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply", "--no-refresh")
    assert code in (2, 4) and "VLLM_API_KEY" in err, err
    assert _files(out) == before  # plan.json, the Pulumi projects, router/, skypilot/: as they were
    assert not (out / "replan.json").exists()  # no step ran: nothing half-way to complete
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2))
    assert code == 10 and stdout.startswith("replan: change: +1/-1"), stdout


def test_a_run_that_proposes_nothing_removes_the_stale_proposal(service, run_cli, tmp_path):
    spec, out, day1 = _planned(service, run_cli, tmp_path)
    assert run_cli("replan", str(spec), "--state", str(out), "--feeds", str(service[1]("day2", 3.00, 0.80)))[0] == 10
    assert (out / "proposed" / "plan.json").exists()
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1))
    assert code == 0 and "no change worth making" in stdout
    assert not (out / "proposed").exists()


def test_another_services_spec_is_refused(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, out, day1 = _planned(service, run_cli, tmp_path)
    assert run_cli("apply", str(out), "--yes")[0] == 0
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(dict(yaml.safe_load(spec.read_text()), name="other")))
    code, _, err = run_cli("replan", str(other), "--state", str(out), "--feeds", str(day1))
    assert code == 2 and "runs service 'toy'" in err and "is service 'other'" in err and "hint:" in err, err
    assert len(err.strip().splitlines()) == 2 and not (out / "proposed").exists()
    copy = tmp_path / "copy.yaml"  # the same service from another spec file: apply refuses it, so does replan
    copy.write_text(spec.read_text())
    code, _, err = run_cli("replan", str(copy), "--state", str(out), "--feeds", str(day1))
    assert code == 2 and "another spec file" in err and str(spec) in err, err
    (out / "plan.json").write_text("{not json")  # beside a state, plan.json only names the spec in the hint
    code, _, err = run_cli("replan", str(other), "--state", str(out), "--feeds", str(day1))
    assert code == 2 and "runs service 'toy'" in err and "Traceback" not in err and str(spec) not in err, err


def test_counts_are_the_real_launches_and_removals(service, run_cli, tmp_path):
    spec, out, day1 = _planned(service, run_cli, tmp_path)
    doc = yaml.safe_load(spec.read_text())
    doc["models"][0]["name"] = "toy2"  # a renamed model: all new units launch, all old ones go
    doc["models"][0]["demand"]["rate_rps"] = 16
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(yaml.safe_dump(doc))
    (tmp_path / "profiles.csv").write_text((tmp_path / "profiles.csv").read_text().replace("toy,", "toy2,"))
    code, d = _replan_json(run_cli, renamed, out, day1)
    assert code == 10 and d["summary"].startswith("forced move: +2/-1 instance(s)"), d["summary"]
    assert (d["decision"]["instances_added"], d["decision"]["instances_removed"]) == (2, 1)
    assert d["this_run_instances"] == {"added": 2, "removed": 1}


def test_a_capped_run_says_what_it_does_apart_from_the_change(service, run_cli, tmp_path):
    spec, out, day1 = _planned(service, run_cli, tmp_path)
    doc = yaml.safe_load(spec.read_text())
    doc["models"][0]["demand"]["rate_rps"] = 28  # three instances of 10 req/s
    spec.write_text(yaml.safe_dump(doc))
    code, d = _replan_json(run_cli, spec, out, day1, "--max-changes", "1")
    assert code == 10 and d["summary"].startswith("forced move: +2/-0 instance(s)"), d["summary"]
    assert "this run would make +1/-0" in d["summary"] and d["decision"]["instances_added"] == 2
    # the edit is named among the triggers (replan audit Q4: only "the running fleet no longer meets")
    assert any(t.startswith("demand of toy: ") and t.endswith("-> 28 req/s (the spec, since the running plan)")
               for t in d["decision"]["triggers"]), d["decision"]["triggers"]
    assert d["this_run_instances"] == {"added": 1, "removed": 0} and len(d["this_run"]) == 1
    # what this run leaves until the next: what runs and one of the two instances the change adds
    was, will = (d["decision"]["cost_usd_per_hour"][k] for k in ("running_now", "new"))
    assert f"leaving ${was + (will - was) / 2:.2f}/h until the next run" in d["summary"], (d["summary"], was, will)


def test_a_deployment_moved_with_its_spec_is_told_how_to_take_it_over(fake_pulumi, cloud_env, service, run_cli,
                                                                      tmp_path):
    """The service id hashes the spec's absolute path: spec and out dir moved together are refused (the
    id is the old path's), and the hint named the failing command itself (replan audit B6); it now
    says the deployment was applied from this spec at another path, and how to record the new one."""
    import shutil

    spec, out, day1 = _planned(service, run_cli, tmp_path)
    assert run_cli("apply", str(out), "--yes")[0] == 0
    moved = shutil.copytree(tmp_path, tmp_path.parent / (tmp_path.name + "-moved"), symlinks=True)
    new_spec, new_out = moved / spec.relative_to(tmp_path), moved / out.relative_to(tmp_path)
    code, _, err = run_cli("replan", str(new_spec), "--state", str(new_out), "--feeds",
                           str(moved / day1.relative_to(tmp_path)))
    assert code == 2 and "another spec file" in err, err
    assert "applied from this spec at another path" in err and f"hetinfra apply {new_out} --force" in err, err
    # what the hint says works: plan here (the service id of this path), then take the deployment over
    assert f"hetinfra plan {new_spec} --state {new_out} --out {new_out}" in err, err
    assert run_cli("plan", str(new_spec), "--state", str(new_out), "--out", str(new_out), "--feeds",
                   str(moved / day1.relative_to(tmp_path)), "--no-baselines")[0] == 0
    assert run_cli("apply", str(new_out), "--yes", "--force")[0] == 0
    code, _, err = run_cli("replan", str(new_spec), "--state", str(new_out), "--feeds",
                           str(moved / day1.relative_to(tmp_path)))
    assert code in (0, 10), err


@pytest.mark.parametrize("deployed", [False, True])
def test_a_broken_running_plan_json_says_to_pass_the_running_out_dir(deployed, fake_pulumi, cloud_env, service, run_cli,
                                                                     tmp_path):
    """OUT's plan.json is the running plan a re-plan starts from: one that is not JSON is exit 2 at its
    line with the hint of --state (pass the out dir of the plan that runs), not the hint of a plan
    about to be made (`hetinfra plan SPEC --out DIR` first), which replan read once its read of
    OUT/plan.json moved ahead of the planner's (the stop-59 replan audit's script, scenario 6)."""
    spec, out, day1 = _planned(service, run_cli, tmp_path)
    if deployed:  # beside a state.json the owner check passes over it; the re-plan's own read refuses it
        assert run_cli("apply", str(out), "--yes")[0] == 0
    text = (out / "plan.json").read_text()
    (out / "plan.json").write_text(text[: len(text) // 2])
    code, _, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1))
    assert code == 2 and "plan.json" in err and "is not valid JSON" in err, err
    assert "pass the --out directory of the plan that is running" in err and "hetinfra plan SPEC" not in err, err
