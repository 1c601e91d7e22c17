"""The cyclic collector's full passes skip what a test run keeps alive between its modules.

A worker's heap grows to over a million objects (SkyPilot, the Pulumi providers' modules, the test
modules, session fixtures), and CPython's full collection traverses all of it each time the young
objects piling up pass a quarter of it: the simulator's and the solver's millions of short-lived
objects made that 38 full passes, 14.5 s of a 79.5 s serial run of tests/compile, tests/stacks and
tests/deploy (68.5 s CPU). After each module's last test (its module fixtures torn down) the heap is
collected and what survives is frozen (gc.freeze): later passes traverse only what the tests made
since, and the same run took 61.8 s (49.9 s CPU, 5.1 s in the collector). Cycles that die after
their freeze stay until the worker exits (the memory a test run keeps is small beside that of one
verified plan); a test's own objects are collected as before. hetinfra.cli.app.main does the same
for a command's process at its exit (tests/conftest.py imports this hook)."""

from __future__ import annotations

import gc

import pytest


#: a full pass runs after this many passes of the middle generation (CPython's default: 10) and only
#: where the objects that reached the oldest since the last full pass are a quarter of it: with the
#: run's heap frozen, that quarter is small, and a full pass came every 70,000 net allocations
#: (700 x 10 x 10) of a verified plan. At 100, the same serial run spent 1.8 s in them instead of
#: 3.6 (each module's own pass below included), at the same peak memory (690 MB).
FULL_PASS_EVERY = 100

gc.set_threshold(*gc.get_threshold()[:2], FULL_PASS_EVERY)


def last_of_its_module(item, nextitem) -> bool:
    """Whether ``item`` is the last test its worker runs of its module (before another or the end)."""
    return nextitem is None or nextitem.path != item.path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    try:
        return (yield)
    finally:
        if last_of_its_module(item, nextitem):
            gc.collect()
            gc.freeze()
