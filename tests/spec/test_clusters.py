"""deploy.target kubernetes plans only cloud regions that have a cluster (issue 36), or says at plan
time that apply needs one per region when none is declared."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

REPO = Path(__file__).resolve().parents[2]
REGIONS = ["aws/us-east-1", "aws/us-west-2", "aws/eu-west-1", "aws/ap-south-1", "aws/sa-east-1"]


def _spec(tmp_path: Path, clusters: dict) -> Path:
    doc = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    doc["infrastructure"]["clouds"] = ["aws"]
    doc["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": clusters}}
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@settings(max_examples=6, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.sampled_from(REGIONS), min_size=1, max_size=3))
def test_property_every_region_a_kubernetes_plan_uses_has_a_cluster(tmp_path_factory, run_cli, regions):
    path = _spec(tmp_path_factory.mktemp("k"), {r: {"context": f"ctx-{i}"} for i, r in enumerate(sorted(regions))})
    code, out, err = run_cli("plan", str(path), "--json", "--no-verify", "--no-baselines")
    if code == 2:  # no allowed offer in any cluster's region: said at the spec's clusters line
        assert "deploy.kubernetes.clusters" in err and "service.yaml:" in err
        return
    assert code == 0, err
    assert set(json.loads(out)["breakdown"]["by_region"]) <= regions


def test_no_clusters_is_planned_with_a_warning(tmp_path, run_cli):
    code, out, err = run_cli("plan", str(_spec(tmp_path, {})), "--json", "--no-verify", "--no-baselines")
    assert code == 0, err
    assert any("apply needs one cluster per cloud region" in w for w in json.loads(out)["warnings"])
