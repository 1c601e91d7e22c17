"""hetinfra.sim.columns.mean_sum: a latency block's mean is exactly the exact sum's."""

from __future__ import annotations

import numpy as np

from hetinfra.sim import columns, core
from hetinfra.sim.stats import summarize


def test_the_mean_is_the_exact_sums_on_any_column():
    """Over columns of many sizes and scales (latencies from microseconds to minutes), the summary
    with numpy's sum where it is safe equals the one with the exact sum, bit for bit."""
    rng = np.random.default_rng(33)
    for _ in range(150):
        n = int(rng.integers(1, 30_000))
        x = rng.lognormal(mean=float(rng.uniform(-9, 4)), sigma=float(rng.uniform(0.1, 3)), size=n)
        assert summarize(x, presorted=True, total=columns.mean_sum)["mean"] == \
            summarize(x, presorted=True, total=core.fsum)["mean"]


def test_a_mean_at_a_rounding_boundary_takes_the_exact_sum_and_no_other_does(monkeypatch):
    """A mean within numpy's error of a rounding boundary (1.0005 ms, which no double holds exactly)
    is computed from the exact sum; a mean far from one is not (always taking numpy's sum, or always
    the exact one, fails this)."""
    calls = []
    real = core.fsum
    monkeypatch.setattr(core, "fsum", lambda v: calls.append(len(v)) or real(v))
    at = np.full(1000, 1.0005e-3)
    assert columns.mean_sum(at) == real(at) and calls == [1000]
    calls.clear()
    columns.mean_sum(np.full(1000, 1.0002e-3))
    assert calls == []


def test_a_units_requests_are_in_id_order_and_its_measured_ones_are_its_last():
    """draw._route hands each unit its request ids in ascending order, so unit_entry.measured_columns
    may take the measured requests (id >= the warm-up) as the columns' tail: the same values, in the
    same order, as a mask over the ids takes (a unit given its ids out of order fails the first check)."""
    from hetinfra.sim.columns import Draw, UnitRequests
    from hetinfra.sim.draw import _route
    from hetinfra.sim.unit_entry import measured_columns

    rng = np.random.default_rng(7)
    n = 5000
    draw = Draw(rng.integers(0, 3, n), rng.integers(1, 900, n), rng.integers(1, 300, n), None, rng.random(n))

    class Routing:  # three units by the pick, some class-2 requests unrouted
        def route(self, cls, where, pick):
            unit = np.minimum((pick * 3).astype(np.int64), 2)
            return np.where((cls == 2) & (pick > 0.9), -1, unit), np.zeros(n, dtype=np.int64)

    by_unit, _unrouted, _origin = _route(draw, Routing(), 3)
    arrival = np.cumsum(rng.exponential(0.01, n))
    for rids in by_unit.values():
        assert (np.diff(rids) > 0).all()
        reqs = UnitRequests.of(draw, arrival, rids)
        reqs.first, reqs.finish = reqs.arrival + 0.1, reqs.arrival + 1.0
        reqs.preempted = rng.integers(0, 2, len(rids))
        for warm in (0, 1234, n):
            mask = reqs.rid >= warm
            want = (reqs.arrival[mask], reqs.first[mask], reqs.finish[mask], reqs.output[mask], reqs.preempted[mask],
                    reqs.cls[mask])
            assert all(np.array_equal(a, b) for a, b in zip(measured_columns(reqs, warm), want, strict=True))


def test_a_latency_block_reads_tpot_of_multi_token_requests_only_with_or_without_one_token_ones():
    """columns.block on requests that all have several output tokens, and on the same with some of one
    token (no TPOT, meeting any TPOT bound): the TPOT summary and the attainment are the per-request
    reading's, bit for bit."""
    from hetinfra.sim.stats import Objective

    rng = np.random.default_rng(11)
    n = 3000
    arrival = np.cumsum(rng.exponential(0.01, n))
    first = arrival + rng.exponential(0.3, n)
    finish = first + rng.exponential(2.0, n)
    obj = Objective(400.0, 30.0, "p90", 0.9)
    for output in (rng.integers(2, 400, n), np.where(rng.random(n) < 0.2, 1, rng.integers(2, 400, n))):
        got = columns.block(arrival, first, finish, output, np.zeros(n, dtype=np.int64), obj, 10.0)
        tpots = [(f - s) / (o - 1) for s, f, o in zip(first.tolist(), finish.tolist(), output.tolist()) if o > 1]
        met = sum((s - a) * 1e3 <= obj.ttft_ms and (o == 1 or (f - s) / (o - 1) * 1e3 <= obj.tpot_ms)
                  for a, s, f, o in zip(arrival.tolist(), first.tolist(), finish.tolist(), output.tolist()))
        assert got["tpot_ms"] == summarize(np.array(tpots), total=core.fsum)
        assert got["objective"]["attainment"] == round(met / n, 5) and 0 < met < n
