"""Scheduler policies (hetinfra.sim.policy): a variant of vLLM V1 is one override in Python, runs on
the Python loop (the compiled core states the default only), and changes what the steps carry."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hetinfra.sim import core
from hetinfra.sim.clock import run_replicas
from hetinfra.sim.policy import VLLMv1
from hetinfra.sim.replica import Replica, ReplicaConfig, Request

from tests.sim.test_core import ENGINES


class ShortestPromptFirst(VLLMv1):
    """Admit the waiting request with the shortest (re)prefill first (ties: the earliest id)."""

    name = "shortest-prompt-first"

    def next_admission(self, waiting):
        return min(waiting, key=lambda r: (r.prompt + r.g, r.rid))


class WholePrompts(VLLMv1):
    """FCFS without chunked prefill: a (re)prefill is scheduled whole or not in this step."""

    name = "fcfs-no-chunking"

    def chunk(self, req, need, budget):
        return need if need <= budget else 0


class SameAsDefault(VLLMv1):
    """The default under another name: runs on the Python loop, and must give the core's results."""


class Recording:
    """Every step lasts 10 ms + 0.1 ms per prefill token; records each step's prefill tokens."""

    def __init__(self, mbt=512, kv_tokens=1e6):
        self.mbt, self.kv_tokens, self.pp, self.prefills = mbt, kv_tokens, 1, []

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        self.prefills.append(prefill_tokens)
        return 0.01 + 1e-4 * prefill_tokens


def _serve(policy, reqs, engine=None, max_num_seqs=256):
    engine = engine or Recording()
    replica = Replica(engine, ReplicaConfig(max_num_seqs=max_num_seqs, policy=policy))
    run_replicas([replica], reqs)
    return replica, engine


def test_shortest_prompt_first_admits_by_prompt_length():
    """One sequence at a time, four requests queued at once: FCFS serves them in id order, the
    variant by prompt length."""
    prompts = [300, 10, 100, 50]
    for policy, order in ((VLLMv1(), [0, 1, 2, 3]), (ShortestPromptFirst(), [1, 3, 2, 0])):
        reqs = [Request(i, 0.0, p, 3) for i, p in enumerate(prompts)]
        _serve(policy, reqs, max_num_seqs=1)
        assert sorted(range(4), key=lambda i: reqs[i].first) == order


def test_without_chunking_a_prompt_is_one_step():
    """Two 400-token prompts, a 512-token budget: chunked prefill fills the first step (400 + 112),
    whole prompts run 400 then 400."""
    for policy, steps in ((VLLMv1(), [512, 288]), (WholePrompts(), [400, 400])):
        _, engine = _serve(policy, [Request(0, 0.0, 400, 1), Request(1, 0.0, 400, 1)])
        assert [p for p in engine.prefills if p] == steps


def test_a_variant_runs_in_python_and_the_default_stated_twice_matches_the_core():
    """The core refuses any policy but the default (so it never runs a policy it does not state), and
    the Python statement of the default, under another class, gives the core's results bit for bit."""
    engine = ENGINES["dense"]
    rng = random.Random(7)
    t, rows = 0.0, []
    for i in range(300):
        t += rng.expovariate(40.0)
        rows.append((i, t, rng.randint(1, 2000), rng.randint(1, 300)))
    arrival, prompt, output = (np.array([r[k] for r in rows]) for k in (1, 2, 3))
    for policy in (ShortestPromptFirst(), WholePrompts(), SameAsDefault()):
        assert core.run_arrays([Replica(engine, ReplicaConfig(policy=policy))], arrival, prompt, output) is None
    if not core.available():
        pytest.skip("the compiled core is not built")
    first, finish, _, _ = core.run_arrays([Replica(engine)], arrival, prompt, output)
    reqs = [Request(*r) for r in rows]
    run_replicas([Replica(engine, ReplicaConfig(policy=SameAsDefault()))], reqs)
    assert [r.first for r in reqs] == first.tolist() and [r.finish for r in reqs] == finish.tolist()
    spf = [Request(*r) for r in rows]
    run_replicas([Replica(engine, ReplicaConfig(policy=ShortestPromptFirst()))], spf)
    assert [r.first for r in spf] != first.tolist()  # the variant does change the schedule
