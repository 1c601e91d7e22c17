"""Disagreement is uncertainty (issue 35): where a second source's rate for a template's layout lies
outside the template's interval, the interval widens to cover it, the template is marked in plan.json
(templates[].confidence.widened_by / other_rate_factor), and planning.confidence: safe plans the
pessimistic of the two figures."""

from __future__ import annotations

import copy
import time

import pytest
import yaml

from hetinfra.perf.e2e_checks import E2E_SOURCE, layout_factors
from hetinfra.perf.model import PerformanceModel
from hetinfra.plan.inputs import resolve
from hetinfra.plan.templates import build_library
from hetinfra.spec.load import load_spec
from hetinfra.plan.library import Template, TemplateUnit
from hetinfra.plan.planner import start_factors

# Llama-2-70B fp8 on one H200: the MLPerf v5.0 run sustained 0.84x the built-in figure
# (hetinfra.perf.published.MLPERF), below the H200 regimes' intervals (low ends 0.88-0.91).
SPEC = {"name": "wide", "models": [{
    "name": "big", "model": "llama-2-70b", "source": "meta-llama/Llama-2-70b-chat-hf", "precision": "fp8",
    "slo": {"ttft_ms": 2000, "tpot_ms": 30},
    "demand": {"rate_rps": 1.0, "sizes": {"classes": [
        {"name": "a", "input_tokens": 250, "output_tokens": 250, "share": 1}]}}}],
    "infrastructure": {"clouds": ["aws"], "gpus": ["H200"]}}


def _library(tmp_path, spec=SPEC):
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    spec, text, locate = load_spec(path)
    inputs = resolve(spec, path, text, None, locate)
    return build_library(inputs, inputs.models[0], PerformanceModel(inputs.profiles))


def test_a_layout_whose_published_runs_disagree_is_widened_and_marked(tmp_path):
    factor = layout_factors()[("llama-2-70b", "H200", 1, "fp8")].factor
    assert factor < 0.88
    lib = _library(tmp_path)
    tp1 = [t for t in lib.templates if t.gpu == "H200" and t.tp == 1 and t.pp == 1]
    assert tp1, [t.id for t in lib.templates]
    for t in tp1:
        assert t.disagreement == (E2E_SOURCE, pytest.approx(factor))
        assert t.interval[0] <= factor <= t.interval[2] and "widened" in t.interval_basis
        assert start_factors([TemplateUnit("u", t, "r1", False, 1.0, 141, 8, 64, True)], "safe")[t.id] == \
            pytest.approx(factor)
    # layouts no published run measures are left as they were
    assert all(t.disagreement is None for t in lib.templates if t.tp != 1)


def test_runs_of_other_request_sizes_are_not_a_second_source(tmp_path):
    """The MLPerf run's requests are 222 / 298 tokens: 2000-token prompts are not its setting."""
    spec = copy.deepcopy(SPEC)
    spec["models"][0]["demand"]["sizes"]["classes"][0].update(input_tokens=2000, output_tokens=250)
    assert all(t.disagreement is None for t in _library(tmp_path, spec).templates)


def test_plan_json_marks_the_widened_template(tmp_path, plan_json):
    plan = plan_json(tmp_path, SPEC, "--no-baselines")
    marked = {t["id"]: t["confidence"] for t in plan["templates"] if t["confidence"]["widened_by"]}
    unmarked = [t for t in plan["templates"] if not t["confidence"]["widened_by"]]
    assert all(c["other_rate_factor"] > 0 and "widened" in c["interval_basis"] for c in marked.values())
    assert all(t["confidence"]["other_rate_factor"] is None for t in unmarked)
    assert marked or all(t["tp"] != 1 for t in plan["templates"])


def _unit(disagreement, level="calibrated"):
    t = Template("t", "m", "lab", "x", "H100", 1, 1, 1, 1, {"c": 1.0}, {"c": "estimator-v3"},
                 confidence=(level, "why"), interval=(0.87, 1.0, 1.46), disagreement=disagreement)
    return TemplateUnit("u", t, "r1", False, 1.0, 80, 8, 64, True)


@pytest.mark.parametrize("disagreement,safe,expected", [
    (("published vLLM runs", 0.8), 0.8, 1.0),  # the other source is the pessimistic one
    (("the built-in estimator", 1.7), 1.0, 1.0),  # this estimate is the pessimistic one
    (None, 1.0, 1.0),
])
def test_safe_plans_the_pessimistic_of_the_two_figures(disagreement, safe, expected):
    units = [_unit(disagreement)]
    assert start_factors(units, "safe").get("t", 1.0) == pytest.approx(safe)
    assert start_factors(units, "expected").get("t", 1.0) == pytest.approx(expected)


def test_the_published_factors_cost_nothing_per_plan():
    layout_factors.cache_clear()
    t0 = time.perf_counter()
    layout_factors()
    assert time.perf_counter() - t0 < 2.0  # once per process (lru_cache); ~0.1 s on a quiet machine


def test_under_the_kernel_backend_the_built_in_estimator_is_the_second_source(monkeypatch):
    import dataclasses

    from hetinfra.catalog.models import MODELS
    from hetinfra.perf import model as perf_model
    from hetinfra.perf.calibration import CALIBRATION
    from hetinfra.perf.confidence import confidence_detail, rate_interval
    from hetinfra.perf.profiles import ProfileTable
    from hetinfra.spec.demand import RequestClass

    slow = dataclasses.replace(CALIBRATION, by_gpu=(), eta_bw=0.45, mfu_decode=0.3, mfu_prefill=0.3)
    monkeypatch.setattr(perf_model, "kernel_calibration", lambda *a, **k: slow)
    ctx = perf_model.ModelContext(("m",), MODELS["llama-3.1-8b"], "bf16", 2000.0, 50.0, estimator="aiconfigurator")
    cls = RequestClass(name="c", input_tokens=500, output_tokens=200, rate_rps=1.0, share=1.0)
    r = perf_model.PerformanceModel(ProfileTable([])).rate(ctx, "L40S", 1, 1, cls)
    assert r.source.endswith(perf_model.KERNELS_SUFFIX) and r.other[1] == "the built-in estimator"
    assert r.max_rps > 0 and r.other[0] > 1.5  # the built-in constants are much faster than the stand-in kernels
    ri = rate_interval(confidence_detail("L40S", 1, 1, r.batch), r.other)
    assert ri.widened_by == "the built-in estimator" and ri.high >= r.other[0]
