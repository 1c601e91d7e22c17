"""Plausibility warnings: a profile rate beyond the GPU's memory bandwidth, and a plan that serves
nothing, are said (exit 0 with a warning), never a silent 0-GPU plan."""

from __future__ import annotations

import copy

import pytest

from hetinfra.perf.roofline import bandwidth_bound_rps
from hetinfra.plan.plausible import serves_nothing
from tests.cli.test_invalid_specs import GOOD

SPEC = {**GOOD, "profiles": ["profile.csv"]}
HEADER = "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\n"


def test_the_bound_is_generous_for_real_rates():
    # 16 GB of weights on an L4 (300 GB/s), 100 output tokens: real engines do ~10 req/s
    assert 100 < bandwidth_bound_rps(16.0, 300.0, 100) < 1e4


def test_a_profile_claiming_1e8_rps_is_flagged_and_the_empty_plan_said(tmp_path, plan_json):
    (tmp_path / "profile.csv").write_text(HEADER + "llama-3.1-8b,L4,1,1,200,100,2000,120,1e8\n")
    doc = plan_json(tmp_path, copy.deepcopy(SPEC))
    text = "\n".join(doc["warnings"])
    assert "max_rps 1e+08 is beyond what L4 can serve" in text and "profile.csv:2" in text
    gpus = sum(a["gpus_per_instance"] * a["instances"] for a in doc["allocations"])
    assert gpus > 0 or "serves nothing" in text  # never a silent 0-GPU plan


@pytest.mark.parametrize("max_rps", ["1e8", "1e9"])  # 1e9: the most a profile row may say (profiles.py)
def test_a_rate_past_the_bound_is_planned_at_it_beside_gpus_that_have_none(tmp_path, plan_json, max_rps):
    """One class of three measured on L40S at an absurd rate, the others estimated on every GPU: the
    ILP read capacity coefficients of 1e-8 beside ones of 0.1 and HiGHS answered a plan that loaded
    an L4 unit 22x past its replicas (the solver's re-check refused it, exit 1). The row is planned at
    its bound, so the plan solves, and the warning says so."""
    from hetinfra.perf.model import PerformanceModel  # noqa: F401  (the bound is applied there)

    (tmp_path / "profile.csv").write_text(HEADER + f"llama-3.1-8b,L40S,1,1,2000,1000,2000,120,{max_rps}\n")
    spec = copy.deepcopy(SPEC)
    spec["infrastructure"] = {"clouds": ["aws", "gcp"], "gpus": ["L4", "L40S", "A10G"]}
    spec["models"][0]["demand"] = {"rate_rps": 12, "sizes": {"classes": [
        {"name": "short", "input_tokens": 200, "output_tokens": 100, "share": 0.5},
        {"name": "mid", "input_tokens": 1000, "output_tokens": 500, "share": 0.3},
        {"name": "long", "input_tokens": 2000, "output_tokens": 1000, "share": 0.2}]}}
    doc = plan_json(tmp_path, spec, "--no-baselines")
    assert any("is beyond what L40S can serve" in w and "planned at that class's bound" in w for w in doc["warnings"])
    assert all(a["utilization"] <= 1.0 + 1e-6 for a in doc["allocations"])


def test_a_plausible_profile_gives_no_warning(tmp_path, plan_json):
    (tmp_path / "profile.csv").write_text(HEADER + "llama-3.1-8b,L4,1,1,200,100,2000,120,6\n")
    doc = plan_json(tmp_path, copy.deepcopy(SPEC))
    assert not any("beyond what" in w or "serves nothing" in w for w in doc["warnings"])


def test_serves_nothing_speaks_only_for_zero_gpus():
    from types import SimpleNamespace

    inputs = SimpleNamespace(models=[SimpleNamespace(classes=[SimpleNamespace(rate_rps=0.5)])])
    assert "serves nothing" in serves_nothing(inputs, 0)[0]
    assert serves_nothing(inputs, 1) == []


def test_profile_rows_that_match_nothing_are_named_by_line(tmp_path, plan_json):
    """A row whose model, GPU or layout nothing of the spec has is never read: a warning at its line
    (a typo in a model name otherwise falls back to the estimator unnoticed). The spec allows only
    AWS L4 (instances of 1, 4 and 8 GPUs; Llama 3.1 8B has 32 heads and 32 layers)."""
    rows = ["llama-3.1-8b,L4,1,1,200,100,2000,120,6",  # used
            "chat-8b,L4,8,1,200,100,2000,120,30",  # the service name: used
            "llama-3.1-70b,L4,1,1,200,100,2000,120,6",  # another model
            "llama-3.1-8b,H100,1,1,200,100,2000,120,6",  # a GPU the spec does not allow
            "llama-3.1-8b,L4,3,1,200,100,2000,120,6",  # tp 3: not a power of two
            "llama-3.1-8b,L4,16,1,200,100,2000,120,6",  # tp 16: no L4 instance has 16 GPUs
            "llama-3.1-8b,L4,1,33,200,100,2000,120,6"]  # pp 33 > 32 layers
    (tmp_path / "profile.csv").write_text(HEADER + "\n".join(rows) + "\n")
    doc = plan_json(tmp_path, copy.deepcopy(SPEC))
    unmatched = [w for w in doc["warnings"] if "matches nothing" in w]
    assert [w.split(":")[1] for w in unmatched] == ["4", "5", "6", "7", "8"]
    assert "model 'llama-3.1-70b' is none of the spec's models (chat-8b" in unmatched[0]
    assert "no offer the spec allows has GPU 'H100'" in unmatched[1]
    assert all("is no layout planned on L4 (instances of 1, 4, 8 GPUs" in w for w in unmatched[2:])


def test_many_unmatched_rows_are_named_up_to_a_few_then_counted(tmp_path, plan_json):
    from hetinfra.plan.plausible import SHOWN_UNMATCHED

    rows = [f"ghost-{k},L4,1,1,200,100,2000,120,6" for k in range(SHOWN_UNMATCHED + 3)]
    (tmp_path / "profile.csv").write_text(HEADER + "\n".join(rows) + "\n")
    doc = plan_json(tmp_path, copy.deepcopy(SPEC))
    unmatched = [w for w in doc["warnings"] if "match" in w and "nothing" in w]
    assert len(unmatched) == SHOWN_UNMATCHED + 1 and unmatched[-1].startswith("3 more profile row(s)")
