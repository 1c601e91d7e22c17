"""hetinfra.sim.lora (issue 38, point 4): requests carry their adapter, batches pay the derate of their
distinct adapters, an engine with fewer slots than adapters swaps them LRU at a load cost."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.perf.lora import slowdown
from hetinfra.sim.clock import run_replicas
from hetinfra.sim.lora import LoraEngine, LoraReplica, LoraRequest, LoraVLLM
from hetinfra.sim.replica import Replica, ReplicaConfig


class Flat:
    """Every step 10 ms + 0.01 ms per prefill token."""

    def __init__(self, kv_tokens=1e6):
        self.mbt, self.kv_tokens, self.pp = 2048, kv_tokens, 1

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        return 0.01 + 1e-5 * prefill_tokens


def serve(reqs, slots=4, load_s=0.05, gpu="H100", rank=16, max_num_seqs=64):
    eng = LoraEngine(Flat(), gpu, rank, slots, load_s)
    rep = Replica(eng, ReplicaConfig(max_num_seqs=max_num_seqs, policy=LoraVLLM()))
    run_replicas([rep], reqs)
    return eng


def test_base_requests_pay_nothing_and_one_adapter_pays_its_slowdown():
    base = [LoraRequest(0, 0.0, 100, 50)]
    tuned = [LoraRequest(0, 0.0, 100, 50, "a")]
    serve(base, load_s=0.0)
    serve(tuned, load_s=0.0)
    ratio = (tuned[0].finish - tuned[0].arrival) / (base[0].finish - base[0].arrival)
    assert ratio == pytest.approx(slowdown("H100", 16, 1), rel=1e-6)


def test_more_distinct_adapters_in_a_batch_run_slower():
    one = [LoraRequest(i, 0.0, 50, 40, "a") for i in range(4)]
    four = [LoraRequest(i, 0.0, 50, 40, f"a{i}") for i in range(4)]
    e1, e4 = serve(one, load_s=0.0), serve(four, load_s=0.0)
    assert e1.max_distinct == 1 and e4.max_distinct == 4
    assert max(r.finish for r in four) > max(r.finish for r in one)


def test_fewer_slots_than_adapters_swap_lru_at_a_load_cost():
    reqs = [LoraRequest(i, i * 1.0, 20, 5, ["a", "b", "c"][i % 3]) for i in range(9)]
    eng = serve(reqs, slots=2, load_s=0.2)
    assert eng.loads == 9  # a b c a b c ...: the LRU always evicts the next one needed
    roomy = serve([LoraRequest(r.rid, r.arrival, 20, 5, r.adapter) for r in reqs], slots=3, load_s=0.2)
    assert roomy.loads == 3
    assert min(r.first - r.arrival for r in reqs) >= 0.2  # every first token waited for a load


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 10_000))
def test_a_batch_never_holds_more_adapters_than_slots_and_every_request_finishes(slots, adapters, seed):
    rng = random.Random(seed)
    reqs = [LoraRequest(i, i * 0.01, rng.randint(5, 200), rng.randint(1, 30),
                        rng.choice([None] + [f"a{j}" for j in range(adapters)])) for i in range(60)]
    eng = serve(reqs, slots=slots, load_s=0.01)
    assert eng.max_distinct <= slots and len(eng.resident) <= slots
    assert all(r.finish >= r.first >= r.arrival for r in reqs)


def test_an_engine_without_slots_is_refused():
    with pytest.raises(ValueError):
        LoraEngine(Flat(), "H100", 16, 0, 0.0)


class Checked(LoraVLLM):
    """LoraVLLM that compares, at every scheduling call, the replica's counted adapters with a walk of
    its running batch."""

    def schedule(self, rep, t):
        walked = {}
        for r in rep.running.values():
            if r.adapter is not None:
                walked[r.adapter] = walked.get(r.adapter, 0) + 1
        assert rep.adapters_running == walked
        super().schedule(rep, t)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 10_000))
def test_a_lora_replica_counts_the_adapters_of_its_running_batch_through_preemptions(slots, adapters, seed):
    """LoraReplica keeps adapter counts as requests are admitted, preempted (a small KV cache forces
    preemptions) and finished: they equal a walk of the running batch at every scheduling call, and
    the run is the plain Replica's (which walks the batch) to the last timestamp."""
    rng = random.Random(seed)
    shape = [(i * 0.005, rng.randint(5, 300), rng.randint(1, 60),
              rng.choice([None] + [f"a{j}" for j in range(adapters)])) for i in range(80)]
    runs = []
    for make, policy in ((Replica, LoraVLLM), (LoraReplica, Checked)):
        reqs = [LoraRequest(i, *row) for i, row in enumerate(shape)]
        eng = LoraEngine(Flat(kv_tokens=1200), "H100", 16, slots, 0.01)
        rep = make(eng, ReplicaConfig(max_num_seqs=32, policy=policy()))
        run_replicas([rep], reqs)
        runs.append([(r.first, r.finish, r.preempted) for r in reqs])
    assert runs[0] == runs[1]
    assert rep.adapters_running == {}
