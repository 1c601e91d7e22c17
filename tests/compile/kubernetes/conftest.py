"""Every example in services/ planned once per session with deploy.target kubernetes (and
deploy.autoscale, so the scalers are generated too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import made_once, run_shared_dir

REPO = Path(__file__).resolve().parents[3]
SERVICES = sorted((REPO / "services").glob("*.yaml"))


@pytest.fixture(scope="session")
def kube_planned(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """name -> (out dir, plan.json); planned once per test run, by whichever xdist worker asks first."""
    root = run_shared_dir(tmp_path_factory) / "kube-examples"
    with made_once(root) as first:
        if first:
            for spec in SERVICES:
                _plan_kubernetes(spec, root / spec.stem)
    return {spec.stem: (root / spec.stem / "out", json.loads((root / spec.stem / "out" / "plan.json").read_text()))
            for spec in SERVICES}


def _plan_kubernetes(spec: Path, d: Path) -> None:
    from click.testing import CliRunner

    from hetinfra.cli import cli

    d.mkdir()
    doc = yaml.safe_load(spec.read_text())
    doc.setdefault("deploy", {}).update(target="kubernetes", autoscale=True)
    # the estimates' middle: the fleets these tests were written for (--no-verify applies
    # planning.confidence; under safe mixed-pipeline.yaml picks a p5 + g6e pipeline, see the report)
    doc.setdefault("planning", {})["confidence"] = "expected"
    (d / "spec.yaml").write_text(yaml.safe_dump(doc))
    res = CliRunner().invoke(cli, ["plan", str(d / "spec.yaml"), "--out", str(d / "out"), "--no-baselines",
                                   "--no-verify"])
    assert res.exit_code == 0, res.output
