"""`replan` against live replicas: a preempted spot VM (gone from the cloud, still in Pulumi's
state until a refresh) shows in `status` and makes `replan` restore it, checked for health from the
cron host the way the spec allows (here `deploy.management_cidrs`), or refused when there is none."""

from __future__ import annotations

import json

from tests.conftest import write_offers
from tests.replan.conftest import toy_spec

UNIT = "toy-gcp-us-central1-g2-standard-4-spot"
G2 = {"cloud": "gcp", "region": "us-central1", "instance_type": "g2-standard-4", "gpu": "L4", "gpu_count": 1,
      "gpu_memory_gb": 24, "vcpus": 4, "memory_gb": 16, "price_per_hour": 0.70, "spot_price_per_hour": 0.28}


def _deploy(run_cli, tmp_path, deploy: dict):
    spec = toy_spec(tmp_path, infrastructure={"clouds": ["gcp"], "spot": True}, deploy=deploy)
    offers = tmp_path / "gcp.csv"
    write_offers(offers, [G2])
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(spec), "--feeds", str(offers), "--out", str(out), "--no-baselines")
    assert code == 0, err
    code, stdout, err = run_cli("apply", str(out), "--yes")
    assert code == 0, err
    state = json.loads((out / "state.json").read_text())
    assert [(a["deployment_unit"], a["count"]) for a in state["allocations"]] == [(UNIT, 1)]
    return spec, offers, out, stdout


def test_a_preempted_vm_shows_in_status_and_replan_restores_it(fake_pulumi, fake_cloud, cloud_env, run_cli, tmp_path,
                                                               healthy_server, monkeypatch):
    base, hits = healthy_server
    monkeypatch.setenv("FAKE_PULUMI_ENDPOINT", base)
    spec, offers, out, _ = _deploy(run_cli, tmp_path, {"management_cidrs": ["198.51.100.7/32"]})
    assert len(fake_cloud.records(UNIT)) == 1
    fake_cloud.preempt(UNIT)  # GCE deleted the spot VM; Pulumi's state still lists it
    assert fake_cloud.records(UNIT) == {}

    code, text, _ = run_cli("status", str(out))
    assert code == 0 and "live: 0 of 1 replica(s); $0.00/h running (planned $0.28/h)" in text
    assert f"drift: {UNIT}: 0 of 1 replica(s) live; 1 instance(s) gone (preempted or deleted)" in text

    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers))
    assert code == 10 and stdout.startswith("replan: forced move: +1/-0 instance(s)")
    log = (out / "replan.log").read_text()
    assert f"{UNIT}: 1 instance(s) gone (preempted or deleted); 1 replica(s) to restore" in log
    assert fake_cloud.records(UNIT) == {}  # proposed only

    ups_before = sum(1 for c in fake_pulumi() if "up" in c["argv"][:2])
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply")
    assert code == 11, err + stdout
    ups = [c["argv"] for c in fake_pulumi() if "up" in c["argv"][:2]][ups_before:]
    assert len(ups) == 1 and "--refresh" in ups[0]  # make = the plan again; nothing to break
    assert [r["status"] for r in fake_cloud.records(UNIT).values()] == ["RUNNING"]
    assert any(h.endswith(f"/{UNIT}/r0/health") for h in hits)  # checked from here: management_cidrs admit it
    code, text, _ = run_cli("status", str(out))
    assert "live: 1 of 1 replica(s)" in text and "drift:" not in text
    # the next run finds nothing to do
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers))
    assert code == 0, stdout


def test_replan_refuses_a_change_whose_health_it_cannot_check(fake_pulumi, fake_cloud, cloud_env, run_cli, tmp_path):
    spec, offers, out, stdout = _deploy(run_cli, tmp_path, {})
    # apply warned up front: GCP VMs with no gateway, no management CIDR, no cloud signal read
    assert f"`replan --apply` will refuse to change these units: the health of {UNIT} cannot be checked" in stdout
    fake_cloud.preempt(UNIT)
    ups_before = sum(1 for c in fake_pulumi() if "up" in c["argv"][:2])
    code, _, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply")
    assert code == 2 and f"the health of {UNIT} cannot be checked from this host" in err
    assert "deploy.management_cidrs" in err
    assert sum(1 for c in fake_pulumi() if "up" in c["argv"][:2]) == ups_before  # nothing changed
    assert not (out / "replan.json").exists()
