"""Solves remembered by content within one process (kept apart so ``solver.decompose`` and
``solver.lagrange`` both use it without importing each other)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")

#: Per-model blocks solved before in this process, by the content of what was solved (verification
#: re-solves with only the missing models' rates changed, ``hetinfra.plan.verify``): a solve that
#: stopped on its node limit or its gap is deterministic, so the same problem gives the same block and
#: the others are reused. Blocks cut by the wall clock are never kept. First in, first out.
#: One memo per thread: what a thread's solves find depends only on that thread's own sequence of
#: solves (``start`` is not in the key, so a hit may answer with a block another start found), never on
#: how another thread's solves (the baselines, ``hetinfra.plan.pipeline``) interleave with it or evict
#: its entries. The threads of ``solver.ahead`` never touch the memo: their caller does, in order.
MEMO_SIZE = 1024
_local = threading.local()


def _memo() -> dict[str, object]:
    memo = getattr(_local, "memo", None)
    if memo is None:
        memo = _local.memo = {}
    return memo


def memo_key(*parts) -> str:
    """A digest of ``parts``' repr (problems are frozen dataclasses of plain data: repr is their content)."""
    import hashlib

    return hashlib.sha256(repr(parts).encode()).hexdigest()


def memo_get(key: str):
    import copy

    hit = _memo().get(key)
    return copy.deepcopy(hit) if hit is not None else None


def memo_has(key: str) -> bool:
    return key in _memo()


def memo_put(key: str, value) -> None:
    import copy

    memo = _memo()
    if len(memo) >= MEMO_SIZE:
        memo.pop(next(iter(memo)))
    memo[key] = copy.deepcopy(value)


def recall(key: str, compute: Callable[[], T], ready: Future | None, keep: Callable[[T], bool]) -> T:
    """The remembered value of ``key``, else ``ready``'s (a future of ``compute`` started ahead,
    ``solver.ahead``) or ``compute()``'s, remembered where ``keep`` says so (not what the wall clock
    cut)."""
    hit = memo_get(key)
    if hit is not None:
        return hit
    got = ready.result() if ready is not None else compute()
    if keep(got):
        memo_put(key, got)
    return got


def clear() -> None:
    """Forget this thread's solves."""
    _memo().clear()
