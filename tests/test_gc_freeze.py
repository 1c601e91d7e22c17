"""The collector skips what the run keeps between modules (tests/gc_freeze.py)."""

from __future__ import annotations

import gc
from types import SimpleNamespace as Ns

import pytest

from tests.gc_freeze import FULL_PASS_EVERY, last_of_its_module, pytest_runtest_protocol

A, B = Ns(path="tests/a.py"), Ns(path="tests/b.py")


def _run_hook(item, nextitem) -> None:
    """The hook around a test whose protocol returned True."""
    hook = pytest_runtest_protocol(item, nextitem)
    next(hook)
    with pytest.raises(StopIteration) as done:
        hook.send(True)
    assert done.value.value is True  # the test's own outcome passes through


def test_a_modules_last_test_leaves_the_heap_frozen_and_the_others_do_not():
    gc.unfreeze()
    try:
        _run_hook(A, Ns(path=A.path))
        assert gc.get_freeze_count() == 0
        _run_hook(A, B)
        assert gc.get_freeze_count() > 0
    finally:
        gc.freeze()


def test_only_a_modules_last_test_is_last():
    assert last_of_its_module(A, None) and last_of_its_module(A, B)
    assert not last_of_its_module(A, Ns(path=A.path))


def test_full_passes_wait_for_more_middle_generation_passes():
    assert gc.get_threshold()[2] == FULL_PASS_EVERY > 10
