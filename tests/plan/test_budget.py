"""One work budget per `hetinfra plan` (hetinfra/plan/budget.py, planning.time_limit_s): a wall-clock
safety stop over templates, solves, verification and baselines that never decides a plan. On a clock
1000x slower the plan is the same; on one far faster the budget runs out, and plan.json and the
summary say what it stopped."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from hetinfra.plan.budget import Budget, current, opened
from hetinfra.plan.pipeline import plan_document
from hetinfra.plan.plan_json import RUN_DEPENDENT_KEYS
from hetinfra.solver import clock


def test_a_budget_stops_once_it_is_spent_and_names_what_it_stopped(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    b = Budget(10.0)
    assert b.check("round 1") and b.solve_limit(30) == pytest.approx(10.0) and b.warning() is None
    now[0] += 11
    assert not b.check("round 2") and not b.check("round 2") and b.left() == 0.0
    assert b.solve_limit(30) == pytest.approx(1e-3)  # a spent budget still lets a solve price its first start
    assert b.stopped == ["round 2"] and "round 2" in b.warning() and "planning.time_limit_s = 10 s" in b.warning()


def test_outside_a_plan_command_solves_get_the_per_solve_limit():
    assert current().time_limit_s is None and current().solve_limit(30) == 30 and current().check("x")
    with opened(Budget(5.0)) as b:
        assert current() is b
    assert current().time_limit_s is None


@pytest.fixture(scope="module")
def linked_spec(tmp_path_factory):
    """Two models and a cap on L4s in their one region, verified briefly."""
    models = [{"name": f"chat-{i}", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
               "slo": {"ttft_ms": 1500, "tpot_ms": 100},
               "demand": {"rate_rps": 3 + 2 * i, "sizes": {"classes": [
                   {"name": "c", "input_tokens": 500, "output_tokens": 200, "share": 1.0}]}}} for i in range(2)]
    spec = {"name": "budget", "models": models,
            "infrastructure": {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["L4", "A10G"],
                               "availability": [{"cloud": "aws", "region": "us-east-1", "gpu": "L4", "max_gpus": 2}]},
            "planning": {"verify": {"requests": 1000}}}
    path = tmp_path_factory.mktemp("budget") / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _plan(path, monkeypatch, speed: float | None) -> dict:
    monkeypatch.setenv("HETINFRA_CACHE_DIR", "off")
    if speed is not None:
        t0 = time.perf_counter()
        monkeypatch.setattr(clock, "now", lambda: t0 + (time.perf_counter() - t0) * speed)
    return plan_document(path)[1].to_dict()


def _same(doc: dict) -> str:
    doc = json.loads(json.dumps(doc))
    for key in RUN_DEPENDENT_KEYS:
        *path, last = key.split(".")
        inner = doc
        for k in path:
            inner = inner[k]
        inner.pop(last, None)
    return json.dumps(doc, sort_keys=True)


def test_a_slower_clock_gives_the_same_plan_and_a_faster_one_says_what_it_stopped(linked_spec, monkeypatch):
    reference = _plan(linked_spec, monkeypatch, None)
    assert "work_budget" not in reference and not reference["solver"]["safety_stop"]
    assert _same(_plan(linked_spec, monkeypatch, 1e-3)) == _same(reference)
    fast = _plan(linked_spec, monkeypatch, 1e5)  # 300 s of budget is 3 ms here: spent on the templates
    stopped = fast["work_budget"]["stopped"]
    assert stopped[0] == "the templates" and fast["work_budget"]["time_limit_s"] == 300
    assert any("work budget" in w and "the templates" in w for w in fast["warnings"])
    assert fast["allocations"]  # stopped safely: a plan, reported
    assert "the single-GPU baselines" in stopped and fast["baselines"] == []  # optional work: skipped, named
    assert reference["baselines"]
