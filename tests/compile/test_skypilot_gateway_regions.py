"""With routing by origin the SkyPilot gateway task is launched once per region: HETINFRA_REGION
(given at launch) becomes `hetinfra gateway --region`, so each gateway serves its region's row."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from hetinfra.compile.skypilot_gateway import gateway_task_config
from hetinfra.document import Plan
from tests.plan.golden_plans import filled_golden
from tests.plan.test_origins import EU, atlantic


@pytest.fixture(scope="module")
def regional_plan(tmp_path_factory):
    from click.testing import CliRunner

    from hetinfra.cli import cli

    d = tmp_path_factory.mktemp("gwr")
    spec = atlantic(eu_residency="continent")
    spec["deploy"] = {"gateway": {"enabled": True}}
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(cli, ["plan", str(d / "s.yaml"), "--out", str(d / "out"), "--no-baselines", "--no-verify"])
    assert res.exit_code == 0, res.output
    return d / "out", json.loads((d / "out" / "plan.json").read_text())


def test_regional_gateway_task_loads_with_skypilot(regional_plan, sky_offline):
    sky, _ = sky_offline
    out, plan = regional_plan
    path = out / "skypilot" / f"{plan['service']}-gateway.yaml"
    launched = sky.Task.from_yaml_config(yaml.safe_load(path.read_text()), env_overrides=[("HETINFRA_REGION", EU)])
    assert launched.envs["HETINFRA_REGION"] == EU


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_run_script_passes_the_region(regional_plan, tmp_path):
    _, plan = regional_plan
    cfg = gateway_task_config(Plan.parse(plan))  # gateway_task_config takes the model
    binary = tmp_path / "hetinfra-venv" / "bin" / "hetinfra"
    binary.parent.mkdir(parents=True)
    binary.write_text('#!/bin/bash\nfor a in "$@"; do echo "$a"; done\n')
    binary.chmod(0o755)
    (tmp_path / "run.sh").write_text(cfg["run"])
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", **cfg["envs"], "HETINFRA_ENDPOINTS": "a=http://10.0.0.1:1",
           "HETINFRA_REGION": EU}
    r = subprocess.run(["bash", str(tmp_path / "run.sh")], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    args = r.stdout.split("\n")
    assert args[args.index("--region") + 1] == EU


def test_plan_without_origins_keeps_the_single_gateway_task():
    cfg = gateway_task_config(Plan.parse(filled_golden("chat")))
    assert "HETINFRA_REGION" not in cfg["envs"] and "--region" not in cfg["run"]
