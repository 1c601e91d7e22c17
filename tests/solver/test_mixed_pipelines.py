"""(b) A mixed-GPU pipeline beats every homogeneous template on cost for a large model.

Llama-3.1-70B in bf16 (141 GB of weights), one request class (500 in / 100 out), TTFT 3 s,
TPOT 200 ms, 0.05 req/s: any one replica that meets the SLOs serves the demand, so the optimum is
the cheapest feasible replica. Offers (aws, region test-1): h1 = 1 x H100 80 GB at $4/h,
l1 = 1 x L40S 48 GB at $1.5/h; at most 4 nodes per template.

* H100 alone: 80 GB < 141 GB; the 2-node pipeline fits: $8/h.
* L40S alone: 3 nodes cannot hold the weights (48.3 GB per GPU > 42.9 GB usable); 4 nodes fit but
  four stages of L40S take 218 ms per decode step > 200 ms. Infeasible.
* Mixed: H100 + L40S (128 GB) is too small; H100 + 2 x L40S fits with an uneven split (more layers
  on the H100; which stage holds the embedding or the LM head is the placement's choice), one step
  takes well under 200 ms: $7/h. H100 + 3 L40S ($8.5) and 2 H100 + L40S ($9.5)
  cost more. So the plan is one H100 + L40S + L40S pipeline at $7/h, 12.5% below H100 only.
"""

from __future__ import annotations

import pytest

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.estimator import estimate
from tests.conftest import write_offers

SLO = {"ttft_ms": 3000, "tpot_ms": 200}


def _spec(tmp_path, mixed: bool) -> dict:
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "aws", "region": "test-1", "instance_type": "h1", "gpu": "H100", "gpu_count": 1,
         "gpu_memory_gb": 80, "vcpus": 16, "memory_gb": 128, "price_per_hour": 4.0},
        {"cloud": "aws", "region": "test-1", "instance_type": "l1", "gpu": "L40S", "gpu_count": 1,
         "gpu_memory_gb": 48, "vcpus": 8, "memory_gb": 64, "price_per_hour": 1.5}])
    return {"name": "big", "offers": ["offers.csv"],
            "models": [{"name": "big-70b", "model": "llama-3.1-70b", "source": "meta-llama/Llama-3.1-70B-Instruct",
                        "slo": dict(SLO), "demand": {"rate_rps": 0.05, "sizes": {"classes": [
                            {"name": "c", "input_tokens": 500, "output_tokens": 100, "share": 1}]}}}],
            "infrastructure": {"clouds": ["aws"], "regions": ["test-1"]},
            "planning": {"mip_gap": 0, "allow_mixed_pipelines": mixed}}


def test_the_homogeneous_alternatives_are_as_the_docstring_says():
    m = MODELS["llama-3.1-70b"]
    kw = dict(input_tokens=500, output_tokens=100, **SLO)
    assert estimate(m, GPUS["H100"], tp=1, pp=2, **kw).feasible
    assert estimate(m, GPUS["L40S"], tp=1, pp=3, **kw).binding == "weights"
    four = estimate(m, GPUS["L40S"], tp=1, pp=4, **kw)
    assert four.binding == "tpot" and four.min_tpot_ms > SLO["tpot_ms"]


def test_mixed_pipeline_beats_every_homogeneous_template(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path, mixed=True), "--out", str(tmp_path / "out"))
    [a] = plan["allocations"]
    assert a["count"] == 1 and a["pp"] == 3 and a["tp"] == 1 and a["experimental"] is True
    assert sorted(s["instance_type"] for s in a["stages"]) == ["h1", "l1", "l1"]
    layers = [s["layers"] for s in a["stages"]]
    h100 = next(k for k, s in enumerate(a["stages"]) if s["gpu"] == "H100")
    assert sum(layers) == 80 and layers[h100] == max(layers) > min(layers)  # the H100 carries the most layers
    assert a["layer_partition"] == layers
    assert plan["cost_usd_per_hour"] == pytest.approx(7.0)
    [t] = plan["templates"]
    assert t["placement"]["experimental"] is True and t["placement"]["layers_per_stage"] == layers
    assert [n["gpu"] for n in t["placement"]["stage_nodes"]] == [s["gpu"] for s in a["stages"]]
    # Mélange's single-GPU-type baselines: H100 only costs $8; L40S only cannot serve
    base = {b["gpu"]: b for b in plan["baselines"]}
    assert base["H100"]["cost_usd_per_hour"] == pytest.approx(8.0)
    assert "L40S" not in base or not base["L40S"]["feasible"]
    # a SkyPilot task has one accelerator type: the mixed unit is Pulumi-only
    assert a["skypilot_task"] is None
    assert not list((tmp_path / "out" / "skypilot").glob("*.yaml"))
    assert (tmp_path / "out" / "pulumi" / "aws" / "Pulumi.yaml").exists()


def test_without_the_flag_the_plan_is_homogeneous(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path, mixed=False))
    [a] = plan["allocations"]
    assert (a["instance_type"], a["pp"], a["count"], a["experimental"]) == ("h1", 2, 1, False)
    assert plan["cost_usd_per_hour"] == pytest.approx(8.0)
