"""The simulation memo verification keeps (``hetinfra.sim.plan_sim``, ``hetinfra.sim.draw``), bounded in bytes.

What it holds: each unit-run's measured requests and simulation.json entry, each model's entry, and
per model and workload its drawn requests, their routing and its rate-free arrival gaps, each under a
key that holds everything its computation reads (the seed and the run length among them). Kept for
a whole verification without a bound, the unit-runs' arrays grew with every round and trim candidate:
a 32-model fleet peaked at 4.8 GB and services/chat.yaml at 5,000 req/s at 7.6 GB.

Why forgetting cannot change a result: every value is exactly what a fresh computation of its key
gives (everything is seeded; the key is exact: ``plan_sim._unit_key``, ``plan_sim._memo_keys``), and
the memo's only use is to skip that computation. A key it no longer holds is computed again, to the
same value, by the path a first simulation takes (tests/sim/test_sim_memo_bound.py compares). So :class:`Memo`
forgets, least recently used first, the entries that hold arrays once they hold more than
``limit`` bytes; forgetting costs only the time to simulate, draw or route again. Entries without
arrays (a model's entry: a few small dicts) are kept: they are what lets a trim candidate skip every
model it does not touch.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

__all__ = ["MEMO_BYTES", "Memo", "array_bytes"]

#: the arrays a verification's memo holds at most: the working set of the search and confirmation
#: (each unit of the plan judged, at each seed of both judges, plus its models' draws) is far smaller
#: on the benchmark fleets, so the trim's reuse is kept; what goes are the unit-runs of plans left behind
MEMO_BYTES = 512 * 2**20


def array_bytes(value, seen: set[int] | None = None) -> int:
    """Bytes of the numpy arrays ``value`` holds (through tuples, lists, dicts and dataclasses), each
    array once. An array that is a view counts its own bytes only: the memo's values own theirs
    (``unit_entry.kept`` copies its columns), so this is what forgetting the value frees at most. An
    array two entries hold counts in each (a routing entry holds its draw: ``draw.routed``), so the
    memo's count is never below the memory it holds."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(array_bytes(v, seen) for v in value)
    if isinstance(value, dict):
        return sum(array_bytes(v, seen) for v in value.values())
    fields = getattr(value, "__dataclass_fields__", None)
    return sum(array_bytes(getattr(value, f), seen) for f in fields) if fields else 0


_MISSING = object()


class Memo:
    """A dict of the simulator's memo entries (the operations plan_sim and draw use: ``get``, ``[] =``;
    ``in`` and ``[]`` too) whose entries with arrays are forgotten, least recently read or written
    first, past ``limit`` bytes (default :data:`MEMO_BYTES`; see the module docstring). ``held``: the
    bytes of arrays it holds now. Replications share one memo from several threads
    (``replications.simulate_replications``): each operation holds a lock, and a reader asks with
    one ``get``, as an entry seen by ``in`` may be forgotten before it is read."""

    def __init__(self, limit: int | None = None):
        self.limit = int(MEMO_BYTES if limit is None else limit)
        self.held = 0
        self._values: dict = {}
        self._sized: OrderedDict = OrderedDict()  # key -> bytes, least recently used first
        self._lock = threading.Lock()

    def __contains__(self, key) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, key):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        with self._lock:
            value = self._values.get(key, _MISSING)
            if value is _MISSING:
                return default
            if key in self._sized:
                self._sized.move_to_end(key)
            return value

    def __setitem__(self, key, value) -> None:
        size = array_bytes(value)
        with self._lock:
            self.held -= self._sized.pop(key, 0)
            self._values[key] = value
            if size:
                self._sized[key] = size
                self.held += size
            while self.held > self.limit:  # the entry just written goes last, and only if it alone is over
                old, freed = self._sized.popitem(last=False)
                del self._values[old]
                self.held -= freed
