"""The heterogeneous pipeline estimator (hetinfra.perf.pipeline)."""

from __future__ import annotations

import pytest

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.errors import InvalidInputError
from hetinfra.perf.estimator import estimate
from hetinfra.perf.pipeline import estimate_pipeline, stage_batch_limit

M70 = MODELS["llama-3.1-70b"]
KW = dict(input_tokens=1000, output_tokens=250, ttft_ms=2000, tpot_ms=100)


@pytest.mark.parametrize("gpu", ["A10G", "L40S", "A100"])
def test_identical_stages_equal_the_homogeneous_pipeline(gpu):
    homo = estimate(M70, GPUS[gpu], tp=4, pp=2, **KW)
    pipe = estimate_pipeline(M70, [GPUS[gpu]] * 2, [40, 40], tp=4, **KW)
    assert pipe.feasible == homo.feasible
    assert pipe.max_rps == pytest.approx(homo.max_rps, rel=1e-12)
    assert pipe.tpot_ms == pytest.approx(homo.tpot_ms, rel=1e-12)


def test_slowest_stage_paces_the_pipeline():
    # moving layers from the fast stage (L40S) to the slow one (A10G), past the balanced split (46 / 34
    # with the L40S's kernel-fitted constants), lowers the rate
    gpus = [GPUS["L40S"], GPUS["A10G"]]
    rates = [estimate_pipeline(M70, gpus, [n, 80 - n], tp=4, **KW).max_rps for n in (46, 42, 38)]
    assert rates[0] > rates[1] > rates[2] > 0


def test_kv_capacity_is_the_smallest_stage():
    # a stage too full for one request's KV makes the pipeline infeasible, whatever the other holds
    e = estimate_pipeline(M70, [GPUS["H100"], GPUS["L40S"]], [2, 78], tp=1, input_tokens=500, output_tokens=100,
                          ttft_ms=5000, tpot_ms=500)
    assert not e.feasible and "L40S" in e.reason


def test_stage_batch_limit_is_nonincreasing_in_layers():
    vals = [stage_batch_limit(M70, GPUS["L40S"], tp=4, stages=2, first=True, last=False, layers=n,
                              input_tokens=1000, output_tokens=250, tpot_ms=100) for n in range(1, 81)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))
    assert vals[0] > 0 and vals[-1] == 0.0  # 80 layers do not fit in one 4 x L40S stage of a pipeline


def test_bad_partition_is_a_clear_error():
    with pytest.raises(InvalidInputError, match="sum to"):
        estimate_pipeline(M70, [GPUS["L40S"], GPUS["A10G"]], [40, 30], tp=4, **KW)
