"""Solves remembered by content within one process (kept apart so ``solver.decompose`` and
``solver.lagrange`` both use it without importing each other)."""

from __future__ import annotations

#: Per-model blocks solved before in this process, by the content of what was solved (verification
#: re-solves with only the missing models' rates changed, ``hetinfra.plan.verify``): a solve that
#: stopped on its node limit or its gap is deterministic, so the same problem gives the same block and
#: the others are reused. Blocks cut by the wall clock are never kept. First in, first out.
MEMO_SIZE = 1024
_memo: dict[str, object] = {}


def memo_key(*parts) -> str:
    """A digest of ``parts``' repr (problems are frozen dataclasses of plain data: repr is their content)."""
    import hashlib

    return hashlib.sha256(repr(parts).encode()).hexdigest()


def memo_get(key: str):
    import copy

    hit = _memo.get(key)
    return copy.deepcopy(hit) if hit is not None else None


def memo_has(key: str) -> bool:
    return key in _memo


def memo_put(key: str, value) -> None:
    import copy

    if len(_memo) >= MEMO_SIZE:
        _memo.pop(next(iter(_memo)))
    _memo[key] = copy.deepcopy(value)


def clear() -> None:
    _memo.clear()
