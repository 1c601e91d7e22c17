"""`replan` against live replicas of self-healing groups: a preempted spot VM the group replaces by
itself is left to it; a group that stays short (no spot capacity) is moved elsewhere; capacity the
group lost (its size lowered outside Pulumi) is restored with `pulumi up`; the new capacity's health
is read from the cloud's own signal (GCE autohealer health, Azure's health extension) on loopback."""

from __future__ import annotations

import datetime as dt
import json

import yaml

from tests.conftest import write_offers
from tests.replan.conftest import toy_spec

GCP_UNIT = "toy-gcp-us-central1-g2-standard-4-spot"
GCP_OTHER = "toy-gcp-us-east4-g2-standard-4-spot"
G2 = {"cloud": "gcp", "region": "us-central1", "instance_type": "g2-standard-4", "gpu": "L4", "gpu_count": 1,
      "gpu_memory_gb": 24, "vcpus": 4, "memory_gb": 16, "price_per_hour": 0.70, "spot_price_per_hour": 0.28}
AZ_UNIT = "toy-azure-eastus-standard-nv36ads-a10-v5-spot"
NV36 = {"cloud": "azure", "region": "eastus", "instance_type": "Standard_NV36ads_A10_v5", "gpu": "A10", "gpu_count": 1,
        "gpu_memory_gb": 24, "vcpus": 36, "memory_gb": 440, "price_per_hour": 3.20, "spot_price_per_hour": 0.80}
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHetinfraTestKeyOnly user@host"


def _deploy(run_cli, tmp_path, clouds: list[str], rows: list[dict], deploy: dict, rate_rps: float = 8):
    spec = toy_spec(tmp_path, infrastructure={"clouds": clouds, "spot": True}, deploy=deploy)
    doc = yaml.safe_load(spec.read_text())
    doc["models"][0]["demand"]["rate_rps"] = rate_rps
    spec.write_text(yaml.safe_dump(doc))
    offers = tmp_path / "offers.csv"
    write_offers(offers, rows)
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(spec), "--feeds", str(offers), "--out", str(out), "--no-baselines")
    assert code == 0, err
    code, _, err = run_cli("apply", str(out), "--yes")
    assert code == 0, err
    return spec, offers, out


def _running(out) -> dict[str, int]:
    return {a["deployment_unit"]: a["count"] for a in json.loads((out / "state.json").read_text())["allocations"]}


def _ups(fake_pulumi) -> int:
    return sum(1 for c in fake_pulumi() if "up" in c["argv"][:2])


def test_a_mig_replacing_a_preempted_vm_is_left_alone_until_it_stalls(fake_pulumi, fake_cloud, cloud_env, run_cli,
                                                                       tmp_path):
    east = dict(G2, region="us-east4", spot_price_per_hour=0.31)  # the next best: same GPU, another region
    spec, offers, out = _deploy(run_cli, tmp_path, ["gcp"], [G2, east], {})
    assert _running(out) == {GCP_UNIT: 1}
    fake_cloud.preempt(GCP_UNIT, capacity=False)  # GCE took the spot VM; its MIG cannot get another

    code, text, _ = run_cli("status", str(out))
    assert code == 0 and "live: 0 of 1 replica(s); $0.00/h running (planned $0.28/h)" in text
    assert f"drift: {GCP_UNIT}: 0 of 1 replica(s) live; 1 instance(s) missing that the group is replacing" in text
    # the group heals itself: no move, no `pulumi up` (it would change nothing)
    ups = _ups(fake_pulumi)
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply")
    assert code == 0 and "nothing differs" in stdout, stdout
    assert f"live: {GCP_UNIT}: 0 of 1 replica(s) live; the group is replacing 1 instance(s) by itself" in \
        (out / "replan.log").read_text()
    assert _ups(fake_pulumi) == ups

    # 40 minutes later (the earlier reads are back-dated: every read since found the group short)
    state = json.loads((out / "state.json").read_text())
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=40)
    state["live"]["units"][GCP_UNIT]["short_since"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    (out / "state.json").write_text(json.dumps(state))
    code, text, _ = run_cli("status", str(out))
    assert f"1 instance(s) the group has been replacing since {since:%Y-%m-%dT%H:%M:%SZ} (no capacity?)" in text

    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers))
    # the stalled replica runs nowhere: the move adds one elsewhere, and the apply drops the stalled group
    assert code == 10 and stdout.startswith("replan: forced move: +1/-0 instance(s)"), stdout + err
    log = (out / "replan.log").read_text()
    assert f"{GCP_UNIT}: its groups have lacked 1 instance(s) since" in log
    assert "L4 in gcp/us-central1 capped at the 0 GPU(s) running there (a group stalled)" in log
    assert {a["deployment_unit"] for a in json.loads((out / "proposed" / "plan.json").read_text())["allocations"]} \
        == {GCP_OTHER}

    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply")
    assert code == 11, err + stdout
    assert _running(out) == {GCP_OTHER: 1} and fake_cloud.records(GCP_UNIT) == {}  # the stalled MIG is gone
    # the new unit's health came from its MIG's autohealer (the vLLM port is closed to this host)
    new_mig = next(iter(fake_cloud.records(GCP_OTHER).values()))
    assert any(c["action"] == "listManagedInstances" and c["path"].endswith(f"/{new_mig['name']}/listManagedInstances")
               for c in fake_cloud.calls)
    code, text, _ = run_cli("status", str(out))
    assert "live: 1 of 1 replica(s)" in text and "drift:" not in text


def test_a_scale_set_that_lost_capacity_is_restored_and_checked_through_its_health_extension(
        fake_pulumi, fake_cloud, cloud_env, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ARM_CLIENT_ID", "fake")
    spec, offers, out = _deploy(run_cli, tmp_path, ["azure"], [NV36], {"ssh_public_key": SSH_KEY}, rate_rps=16)
    assert _running(out) == {AZ_UNIT: 2}
    fake_cloud.preempt(AZ_UNIT)  # an evicted spot VM is deleted; the scale set keeps its capacity (Try & Restore)
    code, text, _ = run_cli("status", str(out))
    assert "live: 1 of 2 replica(s)" in text
    assert f"drift: {AZ_UNIT}: 1 of 2 replica(s) live; 1 instance(s) missing that the group is replacing" in text
    vms_calls = [c for c in fake_cloud.calls if c["action"] == "virtualMachines"]
    assert vms_calls and vms_calls[-1]["path"].endswith(f"/virtualMachineScaleSets/{AZ_UNIT}/virtualMachines")
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers))
    assert code == 0, stdout

    fake_cloud.resize(AZ_UNIT, 1)  # the scale set's capacity lowered outside Pulumi: only `pulumi up` restores it
    code, text, _ = run_cli("status", str(out))
    assert f"drift: {AZ_UNIT}: 1 of 2 replica(s) live; 1 instance(s) gone (preempted or deleted)" in text
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers))
    assert code == 10 and stdout.startswith("replan: forced move: +1/-0 instance(s)")
    assert f"{AZ_UNIT}: 1 instance(s) gone (preempted or deleted); 1 replica(s) to restore" in \
        (out / "replan.log").read_text()

    fake_cloud.set_health(AZ_UNIT, health="Unhealthy")  # the restored VM's vLLM does not come up
    before = len(fake_cloud.calls)
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply",
                                "--health-timeout-s", "0")
    assert code == 4 and f"new capacity is not healthy after 0 s: {AZ_UNIT}" in err
    assert any(c["action"] == "virtualMachines" for c in fake_cloud.calls[before:])  # the health extension's view
    assert [r["desired"] for r in fake_cloud.records(AZ_UNIT).values()] == [2]  # `pulumi up` set it back
    fake_cloud.set_health(AZ_UNIT)
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers), "--apply")
    assert code == 11 and "completed the interrupted replan" in stdout, err + stdout
    code, text, _ = run_cli("status", str(out))
    assert "live: 2 of 2 replica(s)" in text and "drift:" not in text
