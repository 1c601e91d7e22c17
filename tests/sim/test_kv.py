"""The KV allocator's decode arithmetic (hetinfra.sim.kv) against stepping one token at a time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.sim.kv import KVBlocks


@st.composite
def caches(draw):
    bs = draw(st.sampled_from([1, 2, 16, 32]))
    kv = KVBlocks(10**6, bs)
    xbs = draw(st.lists(st.integers(0, 5000), min_size=0, max_size=30))
    for xb in xbs:
        kv.track(xb)
    return kv, xbs, draw(st.integers(0, 3000))


def _stepped(kv: KVBlocks, xbs: list[int], clock: int, k: int) -> int:
    """Blocks k decode steps allocate, one sequence and one step at a time: a sequence whose next
    token is the first of a block (position xb + clock + j a multiple of the block size) takes one."""
    return sum(1 for j in range(k) for xb in xbs if (xb + clock + j) % kv.bs == 0)


@settings(max_examples=50, deadline=None)
@given(c=caches(), k=st.integers(0, 100))
def test_decode_blocks_count_what_single_steps_allocate(c, k):
    kv, xbs, clock = c
    assert kv.decode_blocks(clock, len(xbs), k) == _stepped(kv, xbs, clock, k)
    assert kv.next_step_blocks(clock) == _stepped(kv, xbs, clock, 1)


@settings(max_examples=50, deadline=None)
@given(c=caches(), free=st.integers(0, 200))
def test_decode_steps_fitting_is_the_longest_run_that_fits(c, free):
    kv, xbs, clock = c
    if not xbs:
        return
    k = kv.decode_steps_fitting(clock, len(xbs), free)
    assert _stepped(kv, xbs, clock, k) <= free < _stepped(kv, xbs, clock, k + 1)
