"""Router weights follow the plan's routing exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def planned(shared_plan):
    """`hetinfra plan services/multi-region.yaml --out D --no-baselines --no-verify`: the run's one plan of
    it (tests/conftest.py shared_plan, which tests/compile/test_pulumi_project.py reads too), read only."""
    d = shared_plan(REPO / "services" / "multi-region.yaml", "--no-baselines", "--no-verify")
    return json.loads((d / "plan.json").read_text()), json.loads((d / "router" / "weights.json").read_text())


def test_class_weights_are_the_plan_routing(planned):
    plan, weights = planned
    names = {a["unit"]: a["deployment_unit"] for a in plan["allocations"]}
    assert weights["router_version"] == 1 and set(weights["models"]) == {m["name"] for m in plan["models"]}
    for model, per_class in plan["routing"].items():
        for cls, flows in per_class.items():
            w = weights["models"][model]["classes"][cls]["weights"]
            served = sum(f["rps"] for f in flows)
            assert w == {names[f["unit"]]: pytest.approx(f["rps"] / served, abs=1e-6) for f in flows}
            assert sum(w.values()) == pytest.approx(1.0, abs=1e-5)


def test_endpoint_shares_and_per_gpu_targets(planned):
    plan, weights = planned
    for model, entry in weights["models"].items():
        eps = entry["endpoints"]
        assert set(eps) == {a["deployment_unit"] for a in plan["allocations"] if a["model"] == model}
        assert sum(e["share"] for e in eps.values()) == pytest.approx(1.0, abs=1e-5)
        for gpu, q in entry["target_qps_per_gpu"].items():
            assert q == min(e["target_qps_per_replica"] for e in eps.values() if e["gpu"] == gpu)
    for a in plan["allocations"]:
        # A replica's target is its planned load divided by its utilisation, less the headroom.
        if a["utilization"]:
            expect = a["routed_rps"] / (a["count"] * a["utilization"]) * (1 - plan["solver"]["headroom"])
            assert a["target_qps_per_replica"] == pytest.approx(expect, rel=2e-3)


def test_autoscale_uses_the_target_in_skypilot(run_cli, tmp_path):
    import yaml

    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["deploy"] = {"autoscale": True, "port": 8080}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, out, err = run_cli("plan", str(path), "--out", str(tmp_path / "o"), "--no-baselines", "--no-verify")
    assert code == 0, err
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    for a in plan["allocations"]:
        task = yaml.safe_load((tmp_path / "o" / a["skypilot_task"]).read_text())
        assert task["service"]["replica_policy"] == {"min_replicas": a["count"], "max_replicas": max(2 * a["count"], a["count"] + 1),
                                                     "target_qps_per_replica": a["target_qps_per_replica"]}
        assert task["resources"]["ports"] == 8080 and "--port 8080" in task["run"]
