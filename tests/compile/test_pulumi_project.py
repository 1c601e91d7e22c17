"""`hetinfra plan --out` writes per-cloud Pulumi projects that the plain CLI can use, and keeps
what the CLI added (encryption salt, secure config) and the stack state across re-plans."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _plan(run_cli, out: Path, spec: Path = REPO / "services" / "multi-region.yaml") -> dict:
    code, stdout, stderr = run_cli("plan", str(spec), "--out", str(out), "--no-baselines", "--no-verify")
    assert code == 0, stderr + stdout
    assert "Pulumi project(s)" in stdout
    return json.loads((out / "plan.json").read_text())


def test_one_project_per_cloud_with_the_plan_config(run_cli, tmp_path):
    plan = _plan(run_cli, tmp_path)
    clouds = sorted({a["cloud"] for a in plan["allocations"]})
    assert clouds == ["aws", "gcp"]
    assert sorted(p.name for p in (tmp_path / "pulumi").iterdir()) == clouds
    for cloud in clouds:
        d = tmp_path / "pulumi" / cloud
        assert (d / "__main__.py").read_text().splitlines() == ["from hetinfra.stacks.program import main", "main()"]
        project = yaml.safe_load((d / "Pulumi.yaml").read_text())
        assert project["name"] == f"hetinfra-assistants-{cloud}" and project["runtime"]["name"] == "python"
        assert project["backend"]["url"] == f"file://{(d / 'state').resolve()}" and (d / "state").is_dir()
        config = yaml.safe_load((d / "Pulumi.prod.yaml").read_text())["config"]
        assert config["hetinfra:cloud"] == cloud and config["hetinfra:plan"] == "plan.json"
        sub = json.loads((d / "plan.json").read_text())
        assert sub["allocations"] == [a for a in plan["allocations"] if a["cloud"] == cloud]
        assert "pulumi-aws==7.51.1" in (d / "requirements.txt").read_text()
        text = (d / "Pulumi.prod.yaml").read_text()
        assert "apiKey" not in text and "HF_TOKEN" not in text  # secrets are set with --secret, never here
    assert yaml.safe_load((tmp_path / "pulumi" / "aws" / "Pulumi.prod.yaml").read_text())["config"]["aws:region"] \
        == sorted(a["region"] for a in plan["allocations"] if a["cloud"] == "aws")[0]


def test_replan_keeps_salt_secure_values_and_state(run_cli, tmp_path):
    _plan(run_cli, tmp_path)
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


def test_a_cloud_that_leaves_the_plan_keeps_an_empty_project(run_cli, tmp_path):
    _plan(run_cli, tmp_path)
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
