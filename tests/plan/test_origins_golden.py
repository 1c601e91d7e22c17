"""Specs without origins plan exactly as before routing by origin (issue 25): every example's
plan.json equals the golden file the previous commit wrote (tests/plan/golden/README.md). Examples
with origins keep their fleet; their routing is now per origin (plan.json routing_by_origin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hetinfra.plan.plan_json import RUN_DEPENDENT_KEYS

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = sorted(p.stem.removesuffix(".plan") for p in GOLDEN.glob("*.plan.json"))


def _normalized(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    for dotted in (*RUN_DEPENDENT_KEYS, "inputs.spec_path", "service_id"):
        *path, last = dotted.split(".")
        node = doc
        for key in path:
            node = node[key]
        node.pop(last)
    return doc


def test_every_example_has_a_golden_file():
    assert EXAMPLES == sorted(p.stem for p in (REPO / "services").glob("*.yaml"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_plans_as_before(name, run_cli):
    spec = REPO / "services" / f"{name}.yaml"
    code, out, err = run_cli("plan", str(spec), "--json", "--no-verify")
    assert code == 0, err
    got = _normalized(json.loads(out))
    want = json.loads((GOLDEN / f"{name}.plan.json").read_text())
    has_origins = any(m["demand"].get("origins") for m in yaml.safe_load(spec.read_text())["models"])
    if not has_origins:
        assert "origins" not in got and "routing_by_origin" not in got
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        return
    # with origins: the same fleet at the same cost; the class routing still serves every class in full
    fleet = lambda d: [(a["unit"], a["count"]) for a in d["allocations"]]  # noqa: E731
    assert fleet(got) == fleet(want) and got["cost_usd_per_hour"] == want["cost_usd_per_hour"]
    for model, classes in want["routing"].items():
        for cls, flows in classes.items():
            assert sum(f["rps"] for f in got["routing"][model][cls]) == pytest.approx(sum(f["rps"] for f in flows), abs=1e-4)
