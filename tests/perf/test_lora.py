"""LoRA's price on an engine: slot memory from the architecture, the derate, cold load (issue 38, point 2)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf import lora
from hetinfra.perf.estimator import estimate

L8B = MODELS["llama-3.1-8b"]


def test_slot_size_matches_the_published_llama3_8b_figures():
    # pd-lora.md D: ~84 MB at rank 16, ~336 MB at rank 64 (all 7 projections, fp16)
    assert lora.slot_bytes(L8B, 16) / 1e6 == pytest.approx(83.9, abs=0.2)
    assert lora.slot_bytes(L8B, 64) / 1e6 == pytest.approx(335.5, abs=0.5)
    assert lora.mlp_width(L8B) == pytest.approx(14336, rel=1e-3)  # config.json intermediate_size


def test_slowdown_reproduces_its_sources():
    assert lora.slowdown("A100-80GB", 8, 1) == pytest.approx(11.45 / 7.60)  # PR #11267
    assert lora.slowdown("A100", 8, 1) == pytest.approx(2.0)  # issue #10062: -50%
    assert lora.slowdown("A100-80GB", 256, 1) == pytest.approx(4.0)  # issue #14435: 4x at rank 256


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(GPUS)), st.sampled_from([8, 16, 32, 64, 128, 256]), st.integers(1, 64),
       st.integers(1, 64))
def test_slowdown_grows_with_rank_and_distinct_adapters(gpu, rank, k, extra):
    m = lora.slowdown(gpu, rank, k)
    assert m > 1
    assert lora.slowdown(gpu, rank * 2, k) > m and lora.slowdown(gpu, rank, k + extra) > m


@pytest.mark.parametrize("slots", [1, 8, 32])
def test_an_adapter_engine_serves_less_than_the_base_and_meets_the_same_objectives(slots):
    kw = dict(tp=1, input_tokens=1000, output_tokens=200, ttft_ms=2000, tpot_ms=100)
    base = estimate(L8B, GPUS["H100"], **kw)
    with_lora = lora.lora_estimate(L8B, GPUS["H100"], slots=slots, rank=16, **kw)
    assert with_lora.feasible and 0 < with_lora.max_rps < base.max_rps
    assert with_lora.tpot_ms <= 100 + 1e-6 and with_lora.ttft_ms <= 2000 + 1e-6
    assert with_lora.max_rps <= base.max_rps / lora.slowdown("H100", 16, slots) + 1e-9


def test_slots_come_out_of_the_kv_cache():
    from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION
    gpu = lora.with_slot_memory(GPUS["L4"], L8B, 32, 64, 1, 1, GPU_MEMORY_UTILIZATION)
    taken = (GPUS["L4"].memory_gb - gpu.memory_gb) * GPU_MEMORY_UTILIZATION
    assert taken == pytest.approx(32 * lora.slot_bytes_per_gpu(L8B, 64, 1, 1) / 1e9)
    # so many slots that the KV cache cannot hold one request: infeasible, as vLLM would refuse to start
    est = lora.lora_estimate(L8B, GPUS["L4"], tp=1, input_tokens=1000, output_tokens=200, ttft_ms=5000,
                             tpot_ms=200, slots=64, rank=64)
    assert not est.feasible


def test_zero_slots_is_the_base_estimate():
    kw = dict(tp=1, input_tokens=500, output_tokens=100, ttft_ms=1000, tpot_ms=80)
    assert lora.lora_estimate(L8B, GPUS["L4"], slots=0, rank=16, **kw) == estimate(L8B, GPUS["L4"], **kw)


def test_cold_load_is_a_copy_in_memory_and_seconds_from_storage():
    warm, cold = lora.cold_load_ms(L8B, 16), lora.cold_load_ms(L8B, 16, in_host_memory=False)
    assert 1 < warm < 20 and cold >= lora.STORAGE_LOAD_MS


def test_lora_cost_reports_memory_and_derate_per_gpu():
    c = lora.lora_cost(L8B, "H100", slots=4, rank=16, tp=2, pp=1)
    assert c.derate == pytest.approx(1 / c.slowdown) and c.slot_memory_gb == pytest.approx(
        4 * lora.slot_bytes(L8B, 16) * 0.75 / 1e9)
    assert dataclasses.asdict(c)["slots"] == 4
