"""`hetinfra plan --out` writes per-cloud Pulumi projects that the plain CLI can use, and keeps
what the CLI added (encryption salt, secure config) and the stack state across re-plans."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import hetinfra
from hetinfra.compile.pulumi_project import backend_url
from hetinfra.deploy.pulumi_driver import project_env
from tests.conftest import copied_plan, shared_output

REPO = Path(__file__).resolve().parents[2]


def _plan(run_cli, out: Path, spec: Path = REPO / "services" / "multi-region.yaml") -> dict:
    code, stdout, stderr = run_cli("plan", str(spec), "--out", str(out), "--no-baselines", "--no-verify")
    assert code == 0, stderr + stdout
    assert "Pulumi project(s)" in stdout
    return json.loads((out / "plan.json").read_text())


@pytest.fixture
def planned(shared_plan):
    """``planned(out)``: what ``_plan(run_cli, out)`` of services/multi-region.yaml gives, from the run's
    one plan of it (tests/conftest.py shared_plan) copied into ``out``; returns (plan.json, the folder it
    was planned into)."""
    def copy(out: Path) -> tuple[dict, Path]:
        made = shared_plan(REPO / "services" / "multi-region.yaml", "--no-baselines", "--no-verify")
        assert "Pulumi project(s)" in shared_output(made)
        if out.exists():  # tmp_path itself as the out dir, as _plan takes it
            out.rmdir()
        copied_plan(made, out)
        return json.loads((out / "plan.json").read_text()), made

    return copy


def test_one_project_per_cloud_with_the_plan_config(planned, tmp_path):
    plan, _ = planned(tmp_path)
    clouds = sorted({a["cloud"] for a in plan["allocations"]})
    assert clouds == ["aws", "gcp"]
    assert sorted(p.name for p in (tmp_path / "pulumi").iterdir()) == clouds
    for cloud in clouds:
        d = tmp_path / "pulumi" / cloud
        assert (d / "__main__.py").read_text().splitlines() == ["from hetinfra.stacks.program import main", "main()"]
        project = yaml.safe_load((d / "Pulumi.yaml").read_text())
        assert project["name"] == f"hetinfra-assistants-{cloud}" and project["runtime"]["name"] == "python"
        assert project["backend"]["url"] == "file://./state" and (d / "state").is_dir()
        config = yaml.safe_load((d / "Pulumi.prod.yaml").read_text())["config"]
        assert config["hetinfra:cloud"] == cloud and config["hetinfra:plan"] == "plan.json"
        sub = json.loads((d / "plan.json").read_text())
        assert sub["allocations"] == [a for a in plan["allocations"] if a["cloud"] == cloud]
        reqs = [ln for ln in (d / "requirements.txt").read_text().splitlines() if ln and not ln.startswith("#")]
        assert "pulumi-aws==7.51.1" in reqs and f"hetinfra[pulumi]=={hetinfra.__version__}" in reqs
        text = (d / "Pulumi.prod.yaml").read_text()
        assert "apiKey" not in text and "HF_TOKEN" not in text  # secrets are set with --secret, never here
    assert yaml.safe_load((tmp_path / "pulumi" / "aws" / "Pulumi.prod.yaml").read_text())["config"]["aws:region"] \
        == sorted(a["region"] for a in plan["allocations"] if a["cloud"] == "aws")[0]


def test_replan_keeps_salt_secure_values_and_state(run_cli, planned, tmp_path):
    planned(tmp_path)
    d = tmp_path / "pulumi" / "aws"
    cfg = d / "Pulumi.prod.yaml"
    doc = yaml.safe_load(cfg.read_text())
    doc["encryptionsalt"] = "v1:abc:def"
    doc["config"]["hetinfra:apiKey"] = {"secure": "v1:ciphertext"}
    cfg.write_text(yaml.safe_dump(doc))
    (d / "state" / ".pulumi").mkdir()
    (d / "state" / ".pulumi" / "stack.json").write_text("{}")
    _plan(run_cli, tmp_path)
    again = yaml.safe_load(cfg.read_text())
    assert again["encryptionsalt"] == "v1:abc:def"
    assert again["config"]["hetinfra:apiKey"] == {"secure": "v1:ciphertext"}
    assert (d / "state" / ".pulumi" / "stack.json").read_text() == "{}"


def test_a_cloud_that_leaves_the_plan_keeps_an_empty_project(run_cli, planned, tmp_path):
    planned(tmp_path)
    spec = yaml.safe_load((REPO / "services" / "multi-region.yaml").read_text())
    spec["infrastructure"]["clouds"] = ["aws"]
    spec["infrastructure"].pop("regions", None)
    spec["infrastructure"]["availability"] = [c for c in spec["infrastructure"].get("availability", [])
                                              if c["cloud"] == "aws"]
    spec["models"] = [m for m in spec["models"] if m["name"] == "chat-8b"]
    for m in spec["models"]:
        m["demand"].pop("origins", None)
    spec["planning"]["locality"] = 0
    path = tmp_path / "aws-only.yaml"
    path.write_text(yaml.safe_dump(spec))
    plan = _plan(run_cli, tmp_path, path)
    assert {a["cloud"] for a in plan["allocations"]} == {"aws"}
    gcp = json.loads((tmp_path / "pulumi" / "gcp" / "plan.json").read_text())
    assert gcp["allocations"] == []  # `pulumi up` there removes what the gcp stack still has


def test_projects_hold_no_absolute_path_and_move_with_the_out_dir(planned, tmp_path):
    """Nothing in a project names the out dir it was planned into (or the virtualenv hetinfra runs in):
    a moved or copied out dir keeps its backend inside it, both for plain `pulumi` run from the project
    folder (Pulumi resolves file://./state against the working directory) and for apply/destroy."""
    out = tmp_path / "out"
    _, made = planned(out)
    needles = {str(made), str(made.resolve()), str(made.parent), str(tmp_path), sys.prefix}  # (plan.json keeps inputs.spec_path)
    for f in (out / "pulumi").rglob("*"):
        if f.is_file():
            text = f.read_text()
            assert not [n for n in needles if n in text], f
            if f.name == "Pulumi.yaml":
                assert yaml.safe_load(text)["runtime"] == {"name": "python"}  # no virtualenv path
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    for cloud in ("aws", "gcp"):
        d = moved / "pulumi" / cloud
        url = yaml.safe_load((d / "Pulumi.yaml").read_text())["backend"]["url"]
        # what Pulumi's file backend does with a relative path (filepath.Abs in the working directory)
        here = subprocess.run([sys.executable, "-c", "import os, sys; print(os.path.abspath(sys.argv[1]))",
                               url.removeprefix("file://")], cwd=d, capture_output=True, text=True, check=True)
        assert Path(here.stdout.strip()) == (d / "state").resolve() and (d / "state").is_dir()
        env = project_env(d)
        assert env["PULUMI_BACKEND_URL"] == f"file://{(d / 'state').resolve()}"
        assert env["PULUMI_PYTHON_CMD"] == sys.executable


def test_a_set_backend_url_is_kept(run_cli, tmp_path):
    spec = yaml.safe_load((REPO / "services" / "multi-region.yaml").read_text())
    spec.setdefault("deploy", {})["backend_url"] = "s3://bucket/hetinfra"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    plan = _plan(run_cli, tmp_path / "out", path)
    d = tmp_path / "out" / "pulumi" / "aws"
    assert yaml.safe_load((d / "Pulumi.yaml").read_text())["backend"]["url"] == "s3://bucket/hetinfra"
    assert backend_url(plan, d) == "s3://bucket/hetinfra" == project_env(d)["PULUMI_BACKEND_URL"]
