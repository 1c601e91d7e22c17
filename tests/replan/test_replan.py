"""`hetinfra replan`: thresholds, forced moves, make-before-break, the lock and resume after a kill."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pathlib import Path

from tests.conftest import QuietHandler, loopback_server

HETINFRA = str(Path(sys.executable).with_name("hetinfra"))


def _digest(text):  # the stand-in's resource ids (tests/deploy/fake_pulumi.py)
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _deploy(run_cli, spec, offers, out):
    code, _, err = run_cli("plan", str(spec), "--feeds", str(offers), "--out", str(out), "--no-baselines")
    assert code == 0, err
    code, _, err = run_cli("apply", str(out), "--yes")
    assert code == 0, err
    return {a["instance_type"]: a["count"] for a in json.loads((out / "state.json").read_text())["allocations"]}


def _running(out):
    return {a["instance_type"]: a["count"] for a in json.loads((out / "state.json").read_text())["allocations"]}


def test_small_price_change_gives_no_action(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    assert _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out) == {"g5.xlarge": 1}
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers("day2", 1.02, 0.98)))
    assert code == 0
    assert stdout.startswith("replan: no change worth making") and len(stdout.strip().splitlines()) == 1
    log = (out / "replan.log").read_text()
    assert "g5.xlarge" in log and "$1/h -> $1.02/h (+2.0%)" in log
    assert _running(out) == {"g5.xlarge": 1}


def test_large_price_change_proposes_then_applies_make_before_break(fake_pulumi, fake_cloud, cloud_env, service,
                                                                    run_cli, tmp_path, healthy_server, monkeypatch):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    day2 = offers("day2", 3.00, 0.80)
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2))
    assert code == 10
    assert "change: +1/-1 instance(s), $3.00/h -> $0.80/h (savings $2.20/h)" in stdout
    log = (out / "replan.log").read_text()
    lines = [" ".join(line.split()) for line in log.splitlines()]
    assert "- aws/us-east-1 g5.xlarge (A10G) 1 -> 0 instance(s)" in lines
    assert "+ aws/us-east-1 g6.xlarge (L4) 0 -> 1 instance(s)" in lines
    assert "g5.xlarge in aws/us-east-1: $1/h -> $3/h (+200.0%)" in log
    assert _running(out) == {"g5.xlarge": 1}  # proposed only
    proposed = json.loads((out / "proposed" / "plan.json").read_text())
    assert {a["instance_type"] for a in proposed["allocations"]} == {"g6.xlarge"}

    base, hits = healthy_server
    monkeypatch.setenv("FAKE_PULUMI_ENDPOINT", base)
    ups_before = sum(1 for c in fake_pulumi() if "up" in c["argv"][:2])
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply")
    assert code == 11, err + stdout
    assert stdout.startswith("replan: applied change: +1/-1")
    # Two pulumi ups: first both units (make), then only the new one (break), health checked in between:
    # on AWS by the new unit's load balancer target group (the cloud's own signal; the port is closed here).
    ups = [c for c in fake_pulumi() if "up" in c["argv"][:2]][ups_before:]
    assert len(ups) == 2
    checked = [c["params"]["TargetGroupArn"] for c in fake_cloud.calls if c["action"] == "DescribeTargetHealth"]
    assert len(checked) == 1 and checked[0].endswith(f"/{_digest('toy-aws-us-east-1-g6-xlarge' + 'tg')}")
    assert not hits  # no direct poll: ingress_cidrs and management_cidrs are empty
    assert _running(out) == {"g6.xlarge": 1}
    journal = json.loads((out / "replan.json").read_text())
    assert [(s["name"], s["status"]) for s in journal["stages"]] == [("make", "done"), ("break", "done")]
    assert journal["status"] == "done"


def test_losing_availability_forces_a_move_without_savings(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers("day2", None, 1.20)),
                              "--min-savings-pct", "50")
    assert code == 10 and stdout.startswith("replan: forced move: +1/-1")
    assert "g5.xlarge in aws/us-east-1 is no longer offered" in (out / "replan.log").read_text()


def test_unhealthy_new_capacity_keeps_the_old(fake_pulumi, cloud_env, service, run_cli, tmp_path, monkeypatch):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    monkeypatch.setenv("FAKE_CLOUD_TARGET_HEALTH", "unhealthy")  # the new unit's load balancer check fails
    code, _, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers("day2", 3.0, 0.8)),
                           "--apply", "--health-timeout-s", "0")
    assert code == 4 and "not healthy" in err and "old capacity was kept" in err
    assert _running(out) == {"g5.xlarge": 1, "g6.xlarge": 1}  # made, not broken


def test_two_runs_at_once_one_acts_the_other_exits_75(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from hetinfra.replan.safe import replan_lock\n"
        f"with replan_lock(Path({str(out)!r})):\n    print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers("d2", 3.0, 0.8)))
        assert code == 75 and "another replan is running" in err and f"pid {holder.pid}" in err
        assert not (out / "proposed").exists()
    finally:
        holder.kill()
        holder.wait()
    code, _, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(offers("d2", 3.0, 0.8)))
    assert code == 10  # the lock died with its process


def test_a_run_killed_between_steps_is_completed_by_the_next(fake_pulumi, fake_cloud, cloud_env, service, run_cli,
                                                             tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    day2 = offers("day2", 3.0, 0.8)
    env = dict(os.environ, FAKE_CLOUD_TARGET_HEALTH="initial")  # the new unit never passes its check
    proc = subprocess.Popen([HETINFRA, "replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply",
                             "--health-timeout-s", "600"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until the make stage is applied and the run waits for health
        j = out / "replan.json"
        if j.exists() and json.loads(j.read_text())["stages"][0]["status"] == "running" and \
                json.loads((out / "state.json").read_text())["operation"]["status"] == "done" and \
                _running(out) == {"g5.xlarge": 1, "g6.xlarge": 1}:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError(proc.communicate())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((out / "replan.json").read_text())["status"] == "running"  # left half-way

    fake_cloud.set_health("toy-aws-us-east-1-g6-xlarge", target="healthy")
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2))
    assert code == 10 and "stopped half-way" in stdout and "--apply to complete" in stdout
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply")
    assert code == 11, err
    assert "completed the interrupted replan" in stdout
    assert _running(out) == {"g6.xlarge": 1}
    assert json.loads((out / "replan.json").read_text())["status"] == "done"
    assert json.loads((out / "plan.json").read_text())["allocations"][0]["instance_type"] == "g6.xlarge"


def test_max_changes_adds_first_and_continues_next_run(fake_pulumi, cloud_env, service, run_cli, tmp_path,
                                                       healthy_server, monkeypatch):
    spec, offers = service
    out = tmp_path / "out"
    _deploy(run_cli, spec, offers("day1", 1.00, 1.20), out)
    base, _ = healthy_server
    monkeypatch.setenv("FAKE_PULUMI_ENDPOINT", base)
    day2 = offers("day2", 3.0, 0.8)
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply",
                                "--max-changes", "1")
    assert code == 11, err
    assert "the next run continues" in stdout
    assert _running(out) == {"g5.xlarge": 1, "g6.xlarge": 1}  # added, nothing removed yet
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day2), "--apply",
                                "--max-changes", "1", "--min-savings-pct", "0", "--min-savings-usd-h", "0")
    assert code == 11, err
    assert _running(out) == {"g6.xlarge": 1}


def test_demand_log_raises_the_planned_rate_and_forces_capacity(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    _deploy(run_cli, spec, day1, out)
    # 10 minutes at 15 req/s (more than one 10 req/s instance), all of class c's size.
    rows = ["timestamp,model,input_tokens,output_tokens,region"]
    t0 = 1_790_000_000
    for i in range(600 * 15):
        rows.append(f"{t0 + i / 15:.3f},toy,480,190,us-east-1")
    log = tmp_path / "requests.csv"
    log.write_text("\n".join(rows) + "\n")
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--demand-log", str(log),
                              "--min-history-h", "0.1")
    assert code == 10 and stdout.startswith("replan: forced move: +1/-0")
    text = (out / "replan.log").read_text()
    assert "demand of toy: 8 -> 16.5 req/s" in text  # recent peak 15 req/s + 10% buffer
    assert "recent-peak" in text  # under two days of data: no seasonal model, and the log says so


def test_a_short_demand_history_is_not_trusted(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    """10 minutes of traffic (the default needs 24 h): the declared demand is planned, nothing moves."""
    spec, offers = service
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    _deploy(run_cli, spec, day1, out)
    path = _gateway_log(tmp_path)
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--demand-from", str(path))
    assert code == 0, stdout + err
    text = (out / "replan.log").read_text()
    assert "less than the 24 h of history needed" in text and "planning the declared demand" in text
    assert "demand of toy" not in text  # no demand trigger
    # ... and the outcome says so, not only replan.log (replan audit Q1: it read "nothing differs" alone)
    assert "; demand log: toy planned at its declared demand (the log covers 0." in stdout, stdout
    assert "of the 24 h needed: --min-history-h)" in stdout, stdout


def test_a_caps_file_that_takes_the_running_gpu_away_forces_a_move(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    spec, offers = service
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    _deploy(run_cli, spec, day1, out)
    caps = tmp_path / "caps.csv"
    caps.write_text("cloud,region,gpu,max_gpus\naws,us-east-1,A10G,0\n")
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--caps", str(caps))
    assert code == 10 and stdout.startswith("replan: forced move: +1/-1")
    assert "A10G in aws/us-east-1: 1 GPUs run but only 0 are available now" in (out / "replan.log").read_text()


def _gateway_log(tmp_path):
    """The same 15 req/s as above, written by the gateway's rotating demand log (rotations included)."""
    from hetinfra.gateway.demand import DemandLog

    path = tmp_path / "gw" / "demand.csv"
    log = DemandLog(path, region="us-east-1", max_bytes=100_000, keep=20)
    t0 = 1_790_000_000
    for i in range(600 * 15):
        log.record("toy", 480, 190, "c", 150, 200, when=t0 + i / 15)
    log.close()
    assert path.with_name("demand.csv.1").exists()  # it did rotate
    return path


@pytest.mark.parametrize("via", ["file", "url"])
def test_demand_from_the_gateway_log(via, fake_pulumi, cloud_env, service, run_cli, tmp_path):
    from hetinfra.gateway.demand import read_all

    spec, offers = service
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    _deploy(run_cli, spec, day1, out)
    path = _gateway_log(tmp_path)
    with contextlib.ExitStack() as stack:
        if via == "url":
            body = read_all(path).encode()

            class Handler(QuietHandler):
                def do_GET(self):  # noqa: N802
                    ok = self.headers.get("Authorization") == "Bearer k1"
                    self.send_response(200 if ok else 401)
                    self.end_headers()
                    self.wfile.write(body if ok else b"{}")

            _, base = stack.enter_context(loopback_server(Handler))
            source = f"{base}/admin/demand.csv"
            os.environ["HETINFRA_API_KEY"] = "ops:k1"
            stack.callback(os.environ.pop, "HETINFRA_API_KEY", None)
        else:
            source = str(path)
        code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1),
                                  "--demand-from", source, "--min-history-h", "0.1")
    assert code == 10 and stdout.startswith("replan: forced move: +1/-0")
    assert "demand of toy: 8 -> 16.5 req/s" in (out / "replan.log").read_text()
