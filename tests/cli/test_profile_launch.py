"""`hetinfra profile OUT --launch` against a stand-in `sky` that records what it was asked to launch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from tests.conftest import install_stand_in

REPO = Path(__file__).resolve().parents[2]
STAND_IN = """
import json, os, sys
with open(os.environ["FAKE_SKY_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def test_profile_launch_writes_benchmark_tasks_and_launches_them(tmp_path, monkeypatch, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-baselines",
                           "--no-verify")
    assert code == 0, err
    exe, calls = install_stand_in(tmp_path, monkeypatch, "sky", STAND_IN, "FAKE_SKY_LOG")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    code, stdout, err = run_cli("profile", str(out), "--launch", "--all")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert "estimated cost: $" in stdout
    launched = calls()
    assert len(launched) == len(plan["allocations"]) >= 1
    for argv, a in zip(launched, plan["allocations"]):
        assert argv[:3] == ["launch", "--yes", "-c"] and argv[-1].endswith(f"{a['deployment_unit']}.yaml")
        task = yaml.safe_load(Path(argv[-1]).read_text())
        assert task["resources"]["instance_type"] == a["instance_type"]
        assert task["resources"]["image_id"] == f"docker:vllm/vllm-openai:v{plan['deploy']['vllm_version']}"
        assert f"--tensor-parallel-size {a['tp']}" in task["run"] and "--load-format dummy" in task["run"]
        assert "vllm bench serve" in task["run"] and "--metric-percentiles 99" in task["run"]
        assert f"--max-model-len {a['max_model_len']}" in task["run"]
    assert "profile-import" in (out / "profile" / "collect.sh").read_text()


def test_profile_launch_without_sky_is_a_provider_error(tmp_path, monkeypatch, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-baselines",
                           "--no-verify")
    assert code == 0, err
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = run_cli("profile", str(out), "--launch", "--all")
    assert code == 4 and "sky" in err


def test_profile_launch_of_a_lora_unit_runs_and_benchmarks_its_adapters(tmp_path, monkeypatch, run_cli):
    """Issue 38: a unit with adapters is measured as it runs: the engine's LoRA flags from compile.engine,
    and each benchmark request naming one of its adapters."""
    from tests.plan.test_adapter_plan import SPEC

    (tmp_path / "s.yaml").write_text(SPEC)
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(out), "--no-baselines", "--no-verify")
    assert code == 0, err
    exe, calls = install_stand_in(tmp_path, monkeypatch, "sky", STAND_IN, "FAKE_SKY_LOG")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    code, _, err = run_cli("profile", str(out), "--launch", "--all")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    for argv, a in zip(calls(), plan["allocations"]):
        run = yaml.safe_load(Path(argv[-1]).read_text())["run"]
        names = [h["name"] for h in (a.get("adapters") or {}).get("held", [])]
        assert ("--enable-lora" in run) == bool(names)
        for name in names:
            assert f"{name}=org/{name}" in run and f"--lora-modules {' '.join(names)}" in run
