"""The simulator's clock: each replica's current window of steps, and the event loop over replicas.

* :class:`Window`: what a replica is doing now: ``k`` steps from ``start``, step j lasting
  ``d0 + a*j`` (a pure-decode window of several steps, or one mixed step with its prompt chunks),
  ending at ``busy_until`` (None: idle). ``version`` changes whenever ``busy_until`` does, so the
  event loop can drop its stale entries instead of searching its heap.
* :class:`EventLoop`: the replicas of one or more pools, their windows completed in time order and
  requests entering between them. A window ending at t completes only after the requests arriving
  at t have entered (vLLM drains its input queue before it schedules). A route
  (``hetinfra.sim.pools``) may hand a request that finished in one pool to another, arriving after a
  delay; without one, pools are independent and a request's one pass is its whole life.

The loop over one pool without a route is what ``hetinfra.sim.core`` runs compiled (its ``until``
and ``simulate``), for the default scheduler policy and KV allocator only.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from typing import Callable

__all__ = ["Window", "EventLoop", "run", "run_replicas"]


class Window:
    """A replica's current window of steps (see the module docstring)."""

    __slots__ = ("start", "d0", "a", "k", "chunks", "used0", "busy_until", "version")

    def __init__(self):
        self.start = self.d0 = self.a = 0.0
        self.k = 0
        self.chunks = None  # None: a pure-decode window; else [(request, prompt tokens computed)]
        self.used0 = 0  # KV blocks held when a pure-decode window starts (its KV area is a trapezoid)
        self.busy_until: float | None = None
        self.version = 0

    def span(self, k: int) -> float:
        """How long the window's first k steps last."""
        return k * self.d0 + self.a * k * (k - 1) * 0.5

    def open(self, t: float, d0: float, a: float, k: int, chunks, until: float) -> None:
        self.start, self.d0, self.a, self.k, self.chunks = t, d0, a, k, chunks
        self.busy_until = until
        self.version += 1

    def wake(self, t: float) -> None:
        """An empty window ending at t: the replica schedules once every arrival at t is queued."""
        self.open(t, 0.0, 0.0, 0, [], t)

    def idle(self) -> None:
        self.k = 0
        self.busy_until = None
        self.version += 1

    def cut(self, t: float) -> None:
        """End the window at the step in progress at t (an arrival the scheduler sees next)."""
        if self.k > 1:
            j = self.steps_until(t - self.start)
            if j < self.k:
                self.k = j
                self.busy_until = self.start + self.span(j)
                self.version += 1

    def steps_until(self, h: float) -> int:
        """Smallest j >= 1 whose first j steps end at or after h (from the window start)."""
        d0, a = self.d0, self.a
        if h <= d0:
            return 1
        if a > 0:
            b = d0 - 0.5 * a
            j = max(1, int(math.ceil((-b + math.sqrt(b * b + 2.0 * a * h)) / a)))
        else:
            j = max(1, int(math.ceil(h / d0)))
        while j > 1 and self.span(j - 1) >= h:
            j -= 1
        while self.span(j) < h:
            j += 1
        return j


class EventLoop:
    """Replicas of ``pools`` (a list of replica lists) in time order. ``route`` (None: independent
    pools) is asked, for each request that finishes in a pool, where it goes next: its
    ``next(pool, request)`` returns (pool, the request's next leg, arrival time) or None."""

    def __init__(self, pools: list[list], route=None):
        self.replicas = [r for p in pools for r in p]
        self.ranges, self.pool_of = [], []
        for k, p in enumerate(pools):
            self.ranges.append((len(self.pool_of), len(p)))
            self.pool_of += [k] * len(p)
        self.route = route
        self.heap: list[tuple[float, int, int]] = []  # (busy_until, replica, version)
        self.pending: list[tuple[float, int, int, object]] = []  # handed on: (arrival, seq, pool, request)
        self._seq = 0

    def enter(self, pool: int, req, t: float) -> None:
        """``req`` arrives at ``pool`` at t: to its replica with the fewest outstanding requests (the
        first of them), whose window it may wake or cut."""
        off, n = self.ranges[pool]
        reps = self.replicas
        i, best = 0, reps[off].outstanding
        for j in range(1, n):
            o = reps[off + j].outstanding
            if o < best:
                i, best = j, o
        r = reps[off + i]
        r.check_fits(req)
        req.replica = i
        win = r.win
        ver = win.version
        r.add(req, t)
        if win.version != ver and win.busy_until is not None:
            heappush(self.heap, (win.busy_until, off + i, win.version))

    def until(self, t: float) -> None:
        """Complete every window ending strictly before t, and admit every handed-on request arriving
        strictly before t (before the windows that end at its arrival)."""
        heap, pending, reps, route = self.heap, self.pending, self.replicas, self.route
        while True:
            if pending and pending[0][0] < t and (not heap or pending[0][0] <= heap[0][0]):
                at, _, pool, req = heappop(pending)
                self.enter(pool, req, at)
                continue
            if not heap or heap[0][0] >= t:
                return
            _, i, ver = heappop(heap)
            r = reps[i]
            win = r.win
            if ver != win.version:
                continue  # stale: the window was cut or replaced
            if route is None:
                r.complete()
            else:
                done = len(r.done)
                r.complete()
                self._hand_on(i, r.done[done:])
            if win.busy_until is not None:
                heappush(heap, (win.busy_until, i, win.version))

    def _hand_on(self, i: int, finished: list) -> None:
        for req in finished:
            nxt = self.route.next(self.pool_of[i], req)
            if nxt is not None:
                pool, leg, at = nxt
                self._seq += 1
                heappush(self.pending, (at, self._seq, pool, leg))


def run(pools: list[list], requests: list, route=None, progress: Callable[[int], None] | None = None) -> None:
    """Replay ``requests`` (sorted by arrival) on ``pools`` in time order until all have finished:
    each enters the pool ``route.enter`` names (pool 0 without a route) at its replica with the
    fewest outstanding requests, and a route hands it on as :class:`EventLoop` says."""
    loop = EventLoop(pools, route)
    tick = 0
    for req in requests:
        t = req.arrival
        loop.until(t)
        if route is None:
            loop.enter(0, req, t)
        else:
            loop.enter(*route.enter(req), t)
        tick += 1
        if progress is not None and tick == 1000:
            progress(tick)
            tick = 0
    loop.until(math.inf)
    if progress is not None and tick:
        progress(tick)


def run_replicas(replicas: list, requests: list, progress: Callable[[int], None] | None = None) -> None:
    """Replay ``requests`` (sorted by arrival) on ``replicas`` (one pool, no route) in time order,
    each to the replica with the fewest outstanding requests, until all have finished. The reference
    statement of the loop that hetinfra.sim.core runs compiled (hetinfra.sim.columns.simulate_unit
    picks which)."""
    run([replicas], requests, None, progress)
