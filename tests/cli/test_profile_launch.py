"""`hetinfra profile OUT --launch` against a stand-in `sky` that records what it was asked to launch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

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


def _held(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.is_dir() for p in folder.rglob("*")} if folder.exists() else {}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocker=st.sampled_from(["profile is a file", "collect.sh is a folder", "a task is a folder", "disk full"]),
       fail_at=st.integers(0, 1))
def test_property_the_benchmark_tasks_are_written_all_or_none(shared_plan, tmp_path_factory, run_cli, monkeypatch,
                                                              blocker, fail_at):
    """`profile OUT --launch` writes OUT/profile/<unit>.yaml and collect.sh: one by one, a collect.sh
    that could not be written left the tasks before it (a folder there: exit 2, half written), and an
    OUT/profile that is a file was a FileExistsError traceback. Now all or none, exit 2 naming the folder."""
    import errno
    import shutil

    out = tmp_path_factory.mktemp("launch") / "out"
    shutil.copytree(shared_plan(REPO / "services" / "chat.yaml", "--no-baselines", "--no-verify"), out)
    unit = json.loads((out / "plan.json").read_text())["allocations"][0]["deployment_unit"]
    if blocker == "profile is a file":
        (out / "profile").write_text("mine")
    elif blocker != "disk full":
        (out / "profile" / ("collect.sh" if blocker.startswith("collect") else f"{unit}.yaml")).mkdir(parents=True)
    else:
        calls = []

        def fsync(fd):
            calls.append(fd)
            if len(calls) > fail_at:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "fsync", fsync)
    before = _held(out / "profile") if (out / "profile").is_dir() else (out / "profile").exists()
    code, _, err = run_cli("profile", str(out), "--launch", "--all", "--dry-run")
    monkeypatch.undo()
    assert code == 2 and "Traceback" not in err and str(out / "profile") in err, err
    assert (_held(out / "profile") if (out / "profile").is_dir() else (out / "profile").exists()) == before


def test_a_sky_launch_past_its_time_limit_is_stopped_and_a_provider_error(tmp_path, monkeypatch, run_cli):
    """The launch's whole process group is stopped at facts.SKY_LAUNCH_TIMEOUT_S (hetinfra.procs), and the
    command says so in two lines with exit 4: it was a subprocess.TimeoutExpired traceback."""
    from hetinfra import facts

    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-baselines",
                           "--no-verify")
    assert code == 0, err
    exe, _calls = install_stand_in(tmp_path, monkeypatch, "sky", STAND_IN + "import time\ntime.sleep(30)\n",
                                   "FAKE_SKY_LOG")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(facts, "SKY_LAUNCH_TIMEOUT_S", 0.5)
    code, _, err = run_cli("profile", str(out), "--launch", "--all")
    assert code == 4 and "did not finish within 0.5 s" in err and "hint:" in err and "Traceback" not in err
