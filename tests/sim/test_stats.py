"""hetinfra.sim.stats: a column partitioned on order_ranks summarizes exactly as the sorted column."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.sim.columns import block
from hetinfra.sim.stats import Objective, order_ranks, summarize

values = st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False, width=64), min_size=1, max_size=400)


@settings(max_examples=200, deadline=None)
@given(values, st.integers(0, 2**32 - 1))
def test_partitioned_column_summarizes_as_sorted(vals, seed):
    """Any values (ties, a few, many), in any order: the partition on order_ranks gives every
    percentile, the max and the mean bit for bit as the full sort (a rank left out fails)."""
    x = np.random.default_rng(seed).permutation(np.array(vals, dtype=float))
    sorted_ = summarize(np.sort(x), presorted=True)
    parted = summarize(np.partition(x, order_ranks(len(x))), presorted=True)
    assert parted == sorted_ == summarize(vals)


def test_order_ranks_are_the_ranks_percentile_reads():
    assert order_ranks(0) == []
    assert order_ranks(1) == [0]
    # n = 101: p50 at rank 50, p90 at 90, p95 at 95, p99 at 99 (each with the next rank), max at 100
    assert order_ranks(101) == [50, 51, 90, 91, 95, 96, 99, 100]


def test_block_of_shuffled_requests_is_the_block_of_sorted_ones():
    """simulation.json's latency block does not depend on the requests' order (it partitions)."""
    rng = np.random.default_rng(7)
    n = 5000
    arrival = np.sort(rng.uniform(0, 100, n))
    first = arrival + rng.exponential(0.2, n)
    output = rng.integers(1, 300, n)
    finish = first + (output - 1) * rng.uniform(0.01, 0.05, n)
    preempted = (rng.uniform(size=n) < 0.01).astype(np.int64)
    obj = Objective(500.0, 40.0)
    perm = rng.permutation(n)
    a = block(arrival, first, finish, output, preempted, obj, 100.0)
    b = block(arrival[perm], first[perm], finish[perm], output[perm], preempted[perm], obj, 100.0)
    ttft = np.sort(first - arrival)
    assert a == b
    assert a["ttft_ms"] == summarize(ttft.tolist())
    assert a["ttft_ms"]["max"] == round(1e3 * float(ttft[-1]), 3)
