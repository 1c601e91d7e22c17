"""vLLM V0's prefill-first scheduler without chunked prefill (hetinfra.sim.policy.VLLMv0): a step
prefills or decodes, never both; admissions come first and hold the decodes back; prompts go whole
within the token budget; admission leaves the block manager's watermark free."""

from __future__ import annotations

import pytest

from hetinfra.sim.policy import VLLMv0, VLLMv1
from hetinfra.sim.replica import Request

from tests.sim import test_policy


class Recording(test_policy.Recording):
    """test_policy's engine, also recording each step's (prefill tokens, decoding sequences)."""

    def __init__(self, mbt=512, kv_tokens=1e6):
        super().__init__(mbt, kv_tokens)
        self.steps = []

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        self.steps.append((prefill_tokens, decode_seqs))
        return super().step_s(prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs)


def _serve(policy, reqs, engine=None):
    return test_policy._serve(policy, reqs, engine or Recording())


def _staggered():
    return [Request(i, 0.013 * i, 100 + 37 * i, 20 + 3 * i) for i in range(12)]


def test_a_step_prefills_or_decodes_never_both():
    """The V1 default mixes prompt chunks into decode steps (the planted fault: this test fails on it)."""
    _, v0 = _serve(VLLMv0(), _staggered())
    assert v0.steps and not any(p > 0 and d > 0 for p, d in v0.steps)
    _, v1 = _serve(VLLMv1(), _staggered())
    assert any(p > 0 and d > 0 for p, d in v1.steps)


def test_an_admission_holds_the_decodes_back_one_step():
    """A decodes alone; B arrives during A's decode: V0 runs B's prefill alone (A gets no token in it),
    so A finishes one prefill step later than its decode steps alone would take."""
    a, b = Request(0, 0.0, 100, 10), Request(1, 0.035, 200, 5)
    _serve(VLLMv0(), [a, b])
    prefill_a, prefill_b, step = 0.01 + 1e-4 * 100, 0.01 + 1e-4 * 200, 0.01
    assert a.first == pytest.approx(prefill_a)
    assert a.finish == pytest.approx(prefill_a + 9 * step + prefill_b)
    for r in (a, b):
        assert r.g == r.output


def test_prompts_go_whole_within_the_budget_and_every_request_finishes():
    """Two 400-token prompts and a 512-token budget: two prefill steps of 400 (V1 chunks 512 + 288)."""
    reqs = [Request(0, 0.0, 400, 3), Request(1, 0.0, 400, 3)]
    _, eng = _serve(VLLMv0(), reqs)
    assert [p for p, _ in eng.steps if p] == [400, 400]
    assert all(r.g == r.output and r.finish > r.first for r in reqs)


def test_admission_leaves_the_watermark_free():
    """100 blocks of 16 tokens, a 1% watermark: a request needing all 100 blocks waits while another runs."""
    eng = Recording(mbt=4096, kv_tokens=1600)
    small, big = Request(0, 0.0, 16, 40), Request(1, 0.0, 1580, 2)
    rep, _ = _serve(VLLMv0(), [small, big], engine=eng)
    assert big.first > small.finish  # admitted only once the small one had left
    assert rep.preemptions == 0


def test_kv_pressure_preempts_the_last_admitted_and_everything_finishes():
    eng = Recording(mbt=2048, kv_tokens=16 * 60)
    reqs = [Request(i, 0.0, 100, 200) for i in range(6)]
    rep, _ = _serve(VLLMv0(), reqs, engine=eng)
    assert rep.preemptions > 0
    assert all(r.g == r.output for r in reqs) and rep.kv.used == 0
