"""Plausibility warnings: a profile rate beyond the GPU's memory bandwidth, and a plan that serves
nothing, are said (exit 0 with a warning), never a silent 0-GPU plan."""

from __future__ import annotations

import copy

from hetinfra.plan.plausible import bandwidth_bound_rps, serves_nothing
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


def test_a_plausible_profile_gives_no_warning(tmp_path, plan_json):
    (tmp_path / "profile.csv").write_text(HEADER + "llama-3.1-8b,L4,1,1,200,100,2000,120,6\n")
    doc = plan_json(tmp_path, copy.deepcopy(SPEC))
    assert not any("beyond what" in w or "serves nothing" in w for w in doc["warnings"])


def test_serves_nothing_speaks_only_for_zero_gpus():
    from types import SimpleNamespace

    inputs = SimpleNamespace(models=[SimpleNamespace(classes=[SimpleNamespace(rate_rps=0.5)])])
    assert "serves nothing" in serves_nothing(inputs, 0)[0]
    assert serves_nothing(inputs, 1) == []
