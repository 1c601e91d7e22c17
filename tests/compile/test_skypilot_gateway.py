"""The SkyPilot path's gateway task: `hetinfra plan` writes skypilot/<service>-gateway.yaml when
deploy.gateway.enabled, SkyPilot's own parser loads and validates it, and its run script turns
HETINFRA_ENDPOINTS into `hetinfra gateway --endpoint` flags (checked with a stub binary)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import made_once, run_shared_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gw_out(tmp_path_factory):
    """chat.yaml with the gateway enabled, planned once per test run (by whichever xdist worker asks first)."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    d = run_shared_dir(tmp_path_factory) / "gateway-chat"
    with made_once(d) as first:
        if first:
            spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
            spec.setdefault("deploy", {})["gateway"] = {"enabled": True, "port": 8443, "package": "hetinfra==0.1.0"}
            (d / "chat.yaml").write_text(yaml.safe_dump(spec))
            res = CliRunner().invoke(cli, ["plan", str(d / "chat.yaml"), "--out", str(d / "out"), "--no-baselines"])
            assert res.exit_code == 0, res.output
    out = d / "out"
    return out, json.loads((out / "plan.json").read_text())


def test_plan_writes_the_gateway_task_only_when_enabled(gw_out, example_plans):
    out, plan = gw_out
    units = sorted(Path(a["skypilot_task"]).name for a in plan["allocations"] if a["skypilot_task"])
    assert sorted(p.name for p in (out / "skypilot").iterdir()) == sorted(units + [f"{plan['service']}-gateway.yaml"])
    without = example_plans["chat"][0]  # the README's plan of chat.yaml (no gateway), shared by the run
    assert not [p for p in (without / "skypilot").iterdir() if p.name.endswith("-gateway.yaml")]


def test_gateway_task_loads_with_skypilot(gw_out, sky_offline):
    sky, _ = sky_offline
    out, plan = gw_out
    path = out / "skypilot" / f"{plan['service']}-gateway.yaml"
    task = sky.Task.from_yaml(str(path))
    # (task.validate() needs enabled clouds: the task leaves the CPU VM to SkyPilot's optimizer)
    assert task.name == f"{plan['service']}-gateway" and task.service is None  # a plain task: sky launch
    (res,) = list(task.resources)
    assert res.accelerators is None and res.ports == ["8443"] and res.cpus == "2+"
    assert task.envs["HETINFRA_PACKAGE"] == "hetinfra==0.1.0" and task.envs["GATEWAY_PORT"] == "8443"
    assert task.secrets == {}  # references only
    assert sorted(r.name for r in task._managed_secret_refs) == ["HETINFRA_API_KEY", "VLLM_API_KEY"]
    # the embedded plan is the plan (the gateway's routing weights and classes)
    embedded = task.setup.split("<<'HETINFRA_PLAN'\n", 1)[1].split("\nHETINFRA_PLAN", 1)[0]
    assert json.loads(embedded) == plan
    # endpoints come at launch
    launched = sky.Task.from_yaml_config(yaml.safe_load(path.read_text()),
                                         env_overrides=[("HETINFRA_ENDPOINTS", "u=http://1.2.3.4:30001")])
    assert launched.envs["HETINFRA_ENDPOINTS"] == "u=http://1.2.3.4:30001"
    header = path.read_text().split("\nname:", 1)[0]
    for a in plan["allocations"]:
        assert f"sky serve status {a['deployment_unit']} --endpoint" in header


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_gateway_run_script_passes_every_endpoint(gw_out, tmp_path):
    from hetinfra.compile.skypilot_gateway import gateway_task_config
    from hetinfra.document import Plan

    _, plan = gw_out
    cfg = gateway_task_config(Plan.parse(plan))  # gateway_task_config takes the model
    home = tmp_path / "home"
    binary = home / "hetinfra-venv" / "bin" / "hetinfra"
    binary.parent.mkdir(parents=True)
    binary.write_text('#!/bin/bash\nfor a in "$@"; do echo "$a"; done\n')
    binary.chmod(0o755)
    script = tmp_path / "run.sh"
    script.write_text(cfg["run"])
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", **cfg["envs"],
           "HETINFRA_ENDPOINTS": "a=http://10.0.0.1:30001 b=http://10.0.0.2:30002/v1"}
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    args = r.stdout.split("\n")
    assert args[:2] == ["gateway", f"{home}/hetinfra/plan.json"]
    assert ["--port", "8443"] == args[args.index("--port"):args.index("--port") + 2]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--endpoint"] == ["a=http://10.0.0.1:30001",
                                                                             "b=http://10.0.0.2:30002/v1"]
    env["HETINFRA_ENDPOINTS"] = ""
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "HETINFRA_ENDPOINTS is empty" in r.stderr
