"""Pools joined by a route (hetinfra.sim.pools): prefill pool -> KV transfer -> decode pool, checked
by hand on one request, and the route's plumbing on one pool changes nothing."""

from __future__ import annotations

import random

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.sim.clock import run_replicas
from hetinfra.sim.pools import Disaggregated, KVTransfer, Route, run_pools
from hetinfra.sim.replica import Replica, Request

from tests.sim.test_core import ENGINES


class Linear:
    """A step lasts base + per_token x prefill tokens + per_seq x decoding sequences."""

    def __init__(self, base, per_token, per_seq, kv_tokens=1e6):
        self.base, self.per_token, self.per_seq = base, per_token, per_seq
        self.mbt, self.kv_tokens, self.pp = 2048, kv_tokens, 1

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        return self.base + self.per_token * prefill_tokens + self.per_seq * decode_seqs


def test_ttft_is_prefill_plus_transfer_plus_the_first_decode_step():
    """100-token prompt, 5 output tokens, arriving at 1 s:
    prefill pool: one step of 10 ms + 100 x 1 ms = 110 ms, done at 1.110 s;
    transfer: 50 ms + 100 tokens x 1,000 B / 1 MB/s = 150 ms, arrives at 1.260 s;
    decode pool: its first step computes the prompt's last token (5 ms + 1 x 0.5 ms = 5.5 ms) and
    samples the first output token at 1.2655 s; four decode steps of 5 ms + 2 ms = 7 ms each.
    TTFT = 110 + 150 + 5.5 = 265.5 ms; TPOT = 7 ms (the decode pool's only)."""
    prefill = [Replica(Linear(0.010, 0.001, 0.004))]
    decode = [Replica(Linear(0.005, 0.0005, 0.002))]
    req = Request(0, 1.0, 100, 5)
    run_pools([prefill, decode], [req], Disaggregated(KVTransfer(0.05, 1000.0, 1e6)))
    assert req.first - req.arrival == pytest.approx(0.110 + 0.150 + 0.0055, abs=1e-12)
    assert (req.finish - req.first) / (req.output - 1) == pytest.approx(0.007, abs=1e-12)
    leg_p, leg_d = prefill[0].done[0], decode[0].done[0]
    assert (leg_p.output, leg_p.finish) == (1, pytest.approx(1.110, abs=1e-12))
    assert leg_d.arrival == pytest.approx(1.260, abs=1e-12) and leg_d.origin is req
    assert decode[0].kv_max == 7  # ceil(104 / 16): the prompt's blocks, allocated on the decode side
    assert prefill[0].steps == 1 and decode[0].steps == 5


def test_every_request_crosses_both_pools_and_its_tpot_is_the_decode_pools():
    """Many requests, two replicas a pool, a small decode KV cache (preemptions): each request's TTFT
    covers its prefill and the transfer, its TPOT spans its decode leg only, all blocks come back."""
    rng = random.Random(3)
    t, reqs = 0.0, []
    for i in range(400):
        t += rng.expovariate(30.0)
        reqs.append(Request(i, t, rng.randint(1, 1500), rng.randint(1, 200)))
    transfer = KVTransfer(0.002, 131072.0, 25e9)
    prefill = [Replica(ENGINES["dense"]) for _ in range(2)]
    decode = [Replica(Linear(0.02, 1e-5, 1e-4, kv_tokens=8000.0)) for _ in range(2)]
    run_pools([prefill, decode], reqs, Disaggregated(transfer))
    legs_p = {r.rid: r for rep in prefill for r in rep.done}
    legs_d = {r.rid: r for rep in decode for r in rep.done}
    assert len(legs_p) == len(legs_d) == len(reqs)
    assert sum(rep.preemptions for rep in decode) > 0
    for r in reqs:
        p, d = legs_p[r.rid], legs_d[r.rid]
        assert d.arrival == p.finish + transfer.delay_s(r.prompt)
        assert r.first == d.first > d.arrival and r.finish == d.finish
        assert r.preempted == p.preempted + d.preempted
    assert all(rep.used == 0 and not rep.running for rep in prefill + decode)


def test_the_one_pool_route_is_the_plain_loop_bit_for_bit():
    rng = random.Random(5)
    t, rows = 0.0, []
    for i in range(300):
        t += rng.expovariate(20.0) if rng.random() > 0.2 else 0.0
        rows.append((i, t, rng.randint(1, 3000), rng.randint(1, 300)))
    plain, routed = [Request(*r) for r in rows], [Request(*r) for r in rows]
    reps_a, reps_b = [Replica(ENGINES["moe"]) for _ in range(3)], [Replica(ENGINES["moe"]) for _ in range(3)]
    run_replicas(reps_a, plain)
    run_pools([reps_b], routed, Route())
    assert [(r.first, r.finish, r.replica) for r in plain] == [(r.first, r.finish, r.replica) for r in routed]


def test_a_transfer_without_bandwidth_is_refused():
    with pytest.raises(InvalidInputError, match="bandwidth > 0"):
        KVTransfer(0.0, 1.0, 0.0)


def test_columns_on_pools_give_the_clients_view():
    """hetinfra.sim.columns.simulate_pools fills a unit's columns with each request's route-level
    first and last token: the hand-checked request above, as a column."""
    import numpy as np

    from hetinfra.sim.columns import UnitRequests, simulate_pools

    reqs = UnitRequests(np.array([0]), np.array([1.0]), np.array([100]), np.array([5]), np.array([0]))
    pools = [[Replica(Linear(0.010, 0.001, 0.004))], [Replica(Linear(0.005, 0.0005, 0.002))]]
    simulate_pools(pools, reqs, Disaggregated(KVTransfer(0.05, 1000.0, 1e6)))
    assert reqs.first[0] - reqs.arrival[0] == pytest.approx(0.2655, abs=1e-12)
    assert reqs.finish[0] - reqs.first[0] == pytest.approx(4 * 0.007, abs=1e-12)
    assert (reqs.replica[0], reqs.preempted[0]) == (0, 0)
