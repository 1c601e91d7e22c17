"""Every example in services/ planned once per session with deploy.target kubernetes (and
deploy.autoscale, so the scalers are generated too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
SERVICES = sorted((REPO / "services").glob("*.yaml"))


@pytest.fixture(scope="session")
def kube_planned(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    from click.testing import CliRunner

    from hetinfra.cli import cli

    out = {}
    for spec in SERVICES:
        d = tmp_path_factory.mktemp(f"kube-{spec.stem}")
        doc = yaml.safe_load(spec.read_text())
        doc.setdefault("deploy", {}).update(target="kubernetes", autoscale=True)
        # the estimates' middle: the fleets these tests were written for (--no-verify applies
        # planning.confidence; under safe mixed-pipeline.yaml picks a p5 + g6e pipeline, see the report)
        doc.setdefault("planning", {})["confidence"] = "expected"
        (d / "spec.yaml").write_text(yaml.safe_dump(doc))
        res = CliRunner().invoke(cli, ["plan", str(d / "spec.yaml"), "--out", str(d / "out"), "--no-baselines",
                                       "--no-verify"])
        assert res.exit_code == 0, res.output
        out[spec.stem] = (d / "out", json.loads((d / "out" / "plan.json").read_text()))
    return out
