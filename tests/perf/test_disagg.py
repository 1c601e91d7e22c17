"""Per-phase rates (hetinfra.perf.disagg): KV bytes from the architecture, a prefill engine under a
TTFT budget, a decode engine under a TPOT objective, from the estimator's step model."""

from __future__ import annotations

import pytest

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import get_model
from hetinfra.perf.disagg import decode_rate, kv_bytes_per_token, prefill_rate, transfer_s
from hetinfra.perf.estimator import build_engine

QWEN, H200 = get_model("qwen3-32b"), get_gpu("H200")


def test_kv_bytes_per_token_from_the_architecture():
    # 2 x layers x KV heads x head dim x 2 bytes: Llama-3-70B 320 KiB, a 4k prompt 1.25 GiB
    assert kv_bytes_per_token(get_model("llama-3.1-70b")) == 320 * 1024
    assert 4096 * kv_bytes_per_token(get_model("llama-3.1-70b")) == 1.25 * 2**30
    assert kv_bytes_per_token(QWEN) == 256 * 1024 and kv_bytes_per_token(QWEN, "fp8") == 128 * 1024
    # 100 Gb/s: 0.11 s for that 4k prompt (the note's arithmetic)
    assert transfer_s(get_model("llama-3.1-70b"), 4096, 100e9 / 8, 0.0) == pytest.approx(0.107, abs=1e-3)


def test_prefill_rate_meets_its_budget_and_grows_with_it():
    rates = [prefill_rate(QWEN, H200, tp=2, input_tokens=4000, budget_ms=b, precision="fp8") for b in (200, 250, 300)]
    assert all(r.feasible for r in rates)
    assert rates[0].rps < rates[1].rps < rates[2].rps
    assert rates[2].tokens_per_s == pytest.approx(rates[2].rps * 4000)
    # the M/D/1 wait at that rate fills exactly the slack the unloaded prefill leaves
    e = build_engine(QWEN, H200, 2, 1, 4000, 1, "fp8", 0.9, 1024, None, None,
                     __import__("hetinfra.perf.calibration", fromlist=["CALIBRATION"]).CALIBRATION)
    step = e.step_s(float(e.mbt), e.mbt * 2000.0, 0.0, 0.0, running_seqs=0.0, admitted_seqs=e.mbt / 4000)
    service = 4000 * step / e.mbt
    rho = rates[2].rps * service
    assert e.prefill(1.0) + rho * service / (2 * (1 - rho)) == pytest.approx(0.3, rel=1e-9)


def test_prefill_refuses_a_budget_below_the_prefill_alone():
    r = prefill_rate(QWEN, H200, tp=1, input_tokens=4000, budget_ms=50, precision="fp8")
    assert not r.feasible and "alone takes" in r.reason


def test_decode_step_meets_tpot_and_the_rate_follows():
    r = decode_rate(QWEN, H200, tp=4, input_tokens=4000, output_tokens=500, tpot_ms=10, precision="fp8")
    assert r.feasible and r.latency_ms <= 10 + 1e-6
    assert r.tokens_per_s == pytest.approx(r.rps * 500)
    # a looser objective serves more; a TPOT no step reaches serves nothing
    looser = decode_rate(QWEN, H200, tp=4, input_tokens=4000, output_tokens=500, tpot_ms=20, precision="fp8")
    assert looser.rps > r.rps
    assert not decode_rate(QWEN, H200, tp=1, input_tokens=4000, output_tokens=500, tpot_ms=10,
                           precision="fp8").feasible
