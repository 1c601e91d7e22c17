"""`hetinfra plan` of a deploy.target kubernetes spec writes the manifests as text: it imports neither
the Kubernetes client nor Pulumi (a fresh interpreter, so nothing another test loaded counts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def test_plan_with_target_kubernetes_imports_no_client(tmp_path):
    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["deploy"] = {"target": "kubernetes"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    code = ("import sys\nfrom click.testing import CliRunner\nfrom hetinfra.cli import cli\n"
            f"r = CliRunner().invoke(cli, ['plan', '{tmp_path / 'spec.yaml'}', '--out', '{tmp_path / 'out'}', "
            "'--no-verify', '--no-baselines'])\n"
            "assert r.exit_code == 0, r.output\n"
            "print([m for m in ('kubernetes', 'pulumi', 'pulumi_kubernetes', 'sky') if m in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out" / "kubernetes" / "aws-us-east-1" / "kustomization.yaml").exists()
