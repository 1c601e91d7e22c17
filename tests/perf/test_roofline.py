"""The roofline (hetinfra.perf.roofline): what physics allows one replica, from the GPU catalog's
figures and the model's architecture; the estimator never claims more."""

from __future__ import annotations

import math

import pytest

from hetinfra.catalog.gpus import GPUS, get_gpu
from hetinfra.catalog.models import MODELS
from hetinfra.perf.estimator import estimate
from hetinfra.perf.roofline import KV_BYTES, roofline


def test_each_ceiling_is_the_catalogs_figure_over_the_work_of_one_request():
    m, h100 = MODELS["llama-3.1-8b"], get_gpu("H100")
    r = roofline(m, h100, 1, 1, "bf16", 1000, 200)
    assert r.compute_rps == pytest.approx(989e12 / (2 * m.active * 1200))
    kv = 2 * m.layers * m.kv_heads * m.head_dim * KV_BYTES
    context = 1000 + 100
    batch = (80e9 - m.params * 2) / (kv * context)
    assert r.memory_rps == pytest.approx(3350e9 / (200 * (m.params * 2 / batch + kv * context)))
    assert r.interconnect_rps == math.inf  # one GPU: no all-reduce
    assert r.rate == min(r.compute_rps, r.memory_rps) and r.bound in ("compute", "memory bandwidth")


def test_tp_over_pcie_is_capped_by_the_link_and_nvlink_is_not():
    m = MODELS["llama-3.1-70b"]
    l40s, h100 = get_gpu("L40S"), get_gpu("H100")
    pcie = roofline(m, l40s, 8, 1, "fp8", 200, 50)
    assert not l40s.nvlink and pcie.bound == "interconnect"
    per_token = m.layers * 2 * m.hidden_size * 2 * 2 * 7 / 8
    assert pcie.interconnect_rps == pytest.approx(32e9 / per_token / 250)
    assert roofline(m, h100, 8, 1, "fp8", 200, 50).interconnect_rps > 10 * pcie.interconnect_rps


def test_longer_requests_and_weights_that_fill_the_gpu_lower_the_ceiling():
    m, l4 = MODELS["llama-3.1-8b"], get_gpu("L4")
    assert roofline(m, l4, 1, 1, "bf16", 2000, 500).rate < roofline(m, l4, 1, 1, "bf16", 500, 200).rate
    assert roofline(MODELS["llama-3.1-70b"], l4, 1, 1, "bf16", 500, 200).memory_rps == 0.0  # 140 GB on 24 GB


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"])
def test_the_estimator_never_claims_more_than_the_roofline(model):
    """A property over the catalog: every estimate (at any SLO) is at most the roofline of the same
    replica and request (on the catalog the estimator reaches at most 0.6 of it)."""
    m = MODELS[model]
    checked = 0
    for gpu in GPUS.values():
        for tp in (1, 2, 4, 8):
            for prec in ("bf16", "fp8"):
                for isl, osl in ((100, 50), (2000, 500), (8000, 300), (250, 1000)):
                    e = estimate(m, gpu, tp=tp, input_tokens=isl, output_tokens=osl, ttft_ms=1e6, tpot_ms=1e6,
                                 precision=prec)
                    if e.max_rps > 0:
                        checked += 1
                        assert e.max_rps <= roofline(m, gpu, tp, 1, prec, isl, osl).rate, (gpu.name, tp, prec, isl, osl)
    assert checked > 50
