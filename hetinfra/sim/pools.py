"""Pools of replicas and the routes that pass a request from one pool to another.

A plan's units are independent: a request is served by one replica of one unit from its arrival to
its last token, and ``hetinfra.sim.columns.simulate_unit`` runs each unit on its own (in the compiled
core where it can). A **route** joins pools: it names the pool a request enters and, each time
the request finishes in a pool, where it goes next and when it arrives there. The pools then share
one event loop (``hetinfra.sim.clock.EventLoop``, always in Python).

A route is a class with two methods (``enter`` and ``next``, see :class:`Route`); a new one is one
class here (or in a study), nothing in the compiled core. :class:`Disaggregated` is prefill/decode
disaggregation (DistServe, Splitwise; vLLM's ``--kv-transfer-config``):

* the request enters the **prefill pool** as a leg with one output token: its prompt is prefilled
  (queueing, chunking and preemption as in any replica), and it leaves when the prefill's step
  ends;
* its prompt's KV crosses to the **decode pool** in ``KVTransfer.delay_s(prompt)``;
* it arrives there with the prompt's KV but the last token (``computed = prompt - 1``: vLLM
  recomputes the last prompt token to get its logits when every token's KV came from elsewhere):
  admission allocates the prompt's blocks, its first step computes that one token and samples the
  first output token, and it decodes the rest there.

So the client's TTFT = prefill pool (wait + prefill) + transfer + the decode pool's wait and first
step, and its TPOT = (last token - first token) / (output - 1), both on the decode pool.
SIMPLIFICATION: the prefill replica frees the request's blocks when its prefill ends; in vLLM they
are held until the decode side has read them (a transfer's time of KV per request in flight).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetinfra.errors import InvalidInputError
from hetinfra.sim.clock import run
from hetinfra.sim.replica import Request

__all__ = ["KVTransfer", "Route", "Disaggregated", "run_pools"]


@dataclass(frozen=True)
class KVTransfer:
    """The time a prompt's KV cache takes from one pool to the other: a fixed latency plus its bytes
    (``bytes_per_token``: 2 x layers x KV heads x head dim x bytes per value) over the link."""

    latency_s: float = 0.0
    bytes_per_token: float = 0.0
    bandwidth_bytes_s: float = math.inf

    def __post_init__(self):
        if not (self.latency_s >= 0 and self.bytes_per_token >= 0 and self.bandwidth_bytes_s > 0):
            raise InvalidInputError(f"a KV transfer needs latency >= 0, bytes per token >= 0 and bandwidth > 0 "
                                    f"(got {self.latency_s}, {self.bytes_per_token}, {self.bandwidth_bytes_s})")

    def delay_s(self, tokens: int) -> float:
        return self.latency_s + tokens * self.bytes_per_token / self.bandwidth_bytes_s


class Route:
    """Where a request goes. This base is one pool: every request enters pool 0 and is done there."""

    def enter(self, req: Request) -> tuple[int, Request]:
        """(pool, the leg that enters it) for a client's request."""
        return 0, req

    def next(self, pool: int, leg: Request) -> tuple[int, Request, float] | None:
        """After ``leg`` finished in ``pool``: (next pool, its next leg, its arrival time) or None."""
        return None


class Disaggregated(Route):
    """Prefill pool -> KV transfer -> decode pool (see the module docstring). The client's request
    gets the decode leg's ``first``, ``finish`` and ``replica``, and both legs' preemptions."""

    def __init__(self, transfer: KVTransfer, prefill: int = 0, decode: int = 1):
        self.transfer, self.prefill, self.decode = transfer, prefill, decode

    def enter(self, req: Request) -> tuple[int, Request]:
        return self.prefill, Request(req.rid, req.arrival, req.prompt, 1, origin=req)

    def next(self, pool: int, leg: Request) -> tuple[int, Request, float] | None:
        origin = leg.origin
        origin.preempted += leg.preempted
        if pool == self.prefill:
            at = leg.finish + self.transfer.delay_s(leg.prompt)
            return self.decode, Request(leg.rid, at, leg.prompt, origin.output, leg.prompt - 1, origin), at
        origin.first, origin.finish, origin.replica = leg.first, leg.finish, leg.replica
        return None


def run_pools(pools: list[list], requests: list[Request], route: Route, progress=None) -> None:
    """Serve the client's ``requests`` (sorted by arrival) on ``pools`` (lists of replicas) joined by
    ``route``; each request's ``first`` and ``finish`` are what its route sets."""
    run(pools, requests, route, progress)
