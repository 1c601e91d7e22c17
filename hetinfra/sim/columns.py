"""A plan's simulated requests as columns (numpy arrays), from the draw to the statistics.

Why columns: verification simulates 20,000 requests per model and check; as one Python object per
request, making them, routing them and reading their latencies back cost more than the compiled
replica loop (hetinfra.sim.core) that serves them. Every figure is computed from the same float
operations in the same order as the per-request code it replaces (elementwise IEEE arithmetic, sums
with math.fsum, order statistics from sorted values), so the numbers are bit-identical.

* :class:`Draw`: a model's requests before routing, which do not depend on its rate: class, sizes and
  the two uniforms that pick its origin and unit (``draw._sample`` draws them);
* :class:`UnitRequests`: one unit's requests, with what the simulation fills in;
* :func:`simulate_unit`: the unit's replicas serve them (the core, else the Python reference loop);
* :func:`simulate_pools`: pools joined by a route serve them (``hetinfra.sim.pools``; Python);
* :func:`block`: the latency block of simulation.json for a set of requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetinfra.sim import core
from hetinfra.sim.clock import run
from hetinfra.sim.replica import Replica, Request
from hetinfra.sim.stats import evaluate, order_ranks, summarize

__all__ = ["Draw", "UnitRequests", "block", "simulate_pools", "simulate_unit", "cdf"]


@dataclass(frozen=True)
class Draw:
    """A model's requests in request-id order, before routing: class index, input and output tokens,
    the uniform that picks the origin (None: one origin) and the one that picks the unit."""

    cls: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    where: np.ndarray | None
    pick: np.ndarray


@dataclass
class UnitRequests:
    """One unit's requests in arrival order, which is the order of their ids (``rid``, ascending: a
    model's arrivals rise with the id, and :meth:`of` takes a unit's ids in order); ``first``,
    ``finish`` (s, the client's view once the network time is added), ``replica`` and ``preempted``
    are filled by :func:`simulate_unit`."""

    rid: np.ndarray
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cls: np.ndarray
    first: np.ndarray | None = None
    finish: np.ndarray | None = None
    replica: np.ndarray | None = None
    preempted: np.ndarray | None = None

    @classmethod
    def of(cls, draw: Draw, arrival: np.ndarray, rids: np.ndarray) -> UnitRequests:
        """The requests ``rids`` (ascending) of ``draw``, arriving at ``arrival`` (by request id)."""
        return cls(rids, arrival[rids], draw.prompt[rids], draw.output[rids], draw.cls[rids])

    def __len__(self) -> int:
        return len(self.rid)


def simulate_unit(replicas: list[Replica], reqs: UnitRequests, progress=None) -> None:
    """Serve ``reqs`` on ``replicas`` (fresh): the compiled core when it runs this engine, else the
    Python reference loop (``replica.run_replicas``); both fill the same columns, bit for bit."""
    out = core.run_arrays(replicas, reqs.arrival, reqs.prompt, reqs.output, progress)
    if out is None:
        simulate_pools([replicas], reqs, None, progress)
    else:
        reqs.first, reqs.finish, reqs.replica, reqs.preempted = out


def simulate_pools(pools: list[list[Replica]], reqs: UnitRequests, route=None, progress=None) -> None:
    """Serve ``reqs`` on ``pools`` joined by ``route`` (``hetinfra.sim.pools``; None: one pool) on the
    Python loop, filling the same columns as :func:`simulate_unit` (the client's view: the route's
    first and last token, the replica of the last pool, the preemptions of every pool)."""
    objs = [Request(*r) for r in zip(reqs.rid.tolist(), reqs.arrival.tolist(), reqs.prompt.tolist(),
                                     reqs.output.tolist())]
    run(pools, objs, route, progress)
    reqs.first = np.array([r.first for r in objs], dtype=float)
    reqs.finish = np.array([r.finish for r in objs], dtype=float)
    reqs.replica = np.array([r.replica for r in objs], dtype=np.int64)
    reqs.preempted = np.array([r.preempted for r in objs], dtype=np.int64)


def block(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, output: np.ndarray, preempted: np.ndarray,
          obj, span: float) -> dict:
    """simulation.json's latency block of these requests: counts, TTFT and TPOT summaries, throughput
    over ``span`` seconds, preempted requests, and the objective ``obj`` evaluated."""
    ttft = first - arrival
    multi = output > 1
    ok = ttft * 1e3 <= obj.ttft_ms
    # as nearly always, every request has a TPOT: a whole slice reads the columns without masked copies
    rows = slice(None) if multi.all() else multi
    tpot = (finish[rows] - first[rows]) / (output[rows] - 1)
    ok[rows] &= tpot * 1e3 <= obj.tpot_ms  # a 1-token request has no TPOT and meets any bound
    n = len(arrival)
    att = int(ok.sum()) / n if n else None
    # partitioned, not sorted: summarize reads only its order_ranks (the same values, in linear time)
    s_ttft, s_tpot = (summarize(np.partition(x, order_ranks(len(x))) if len(x) else x, presorted=True,
                                total=mean_sum) for x in (ttft, tpot))
    return {"count": n, "ttft_ms": s_ttft, "tpot_ms": s_tpot, "throughput_rps": throughput(n, span),
            "preempted_requests": int((preempted > 0).sum()),
            "objective": evaluate(obj, s_ttft, s_tpot, att)}


#: twice float64's machine epsilon: MEAN_SUM_SLACK x n x sum(|x|) bounds numpy's summation error on n values
MEAN_SUM_SLACK = 2.0 * float(np.finfo(np.float64).eps)


def mean_sum(values: np.ndarray) -> float:
    """A sum of the float64 column ``values`` from which :func:`hetinfra.sim.stats.summarize`'s mean,
    ``round(1e3 * sum / n, 3)``, is exactly the one of their exact sum (``core.fsum``, CPython's
    math.fsum): numpy's sum where its error cannot move that rounded mean, else the exact sum.

    Why it is exact: any summation order errs by at most (n - 1) x u x sum(|x|) (u: the unit
    roundoff, half the epsilon), so the exact sum lies in [s - b, s + b] with b = MEAN_SUM_SLACK x n x
    sum(|x|) (twice that bound and more, covering the roundoff of b and of the bracket itself). The
    mean's rounding, x -> round(1e3 * x / n, 3), is non-decreasing in x (each step is correctly
    rounded), so where both ends of the bracket round to one value the exact sum rounds to it too,
    and so does s. Only a mean within about 1e-12 of a rounding boundary takes the exact sum (the
    exact sum cost as much as the rest of a latency block)."""
    n = len(values)
    total = float(np.sum(values))
    if n and math.isfinite(total):
        slack = MEAN_SUM_SLACK * n * float(np.sum(np.abs(values)))
        if math.isfinite(slack) and round(1e3 * (total - slack) / n, 3) == round(1e3 * (total + slack) / n, 3):
            return total
    return core.fsum(values)


def throughput(n: int, span: float) -> float | None:
    """A latency block's ``throughput_rps``: ``n`` requests over ``span`` seconds."""
    return round(n / span, 5) if span > 0 else None


def respanned(latency: dict, n: int, span: float) -> dict:
    """``latency`` (a :func:`block` of ``n`` requests) as the block of the same requests over another
    ``span``, copied: only the throughput depends on it (a model served by one unit is that unit's block)."""
    return {k: throughput(n, span) if k == "throughput_rps" else _copied(v) for k, v in latency.items()}


def _copied(value):
    return {k: _copied(v) for k, v in value.items()} if isinstance(value, dict) else value


def cdf(values: np.ndarray, points: int = 101) -> list[list[float]]:
    """[ms, cumulative fraction] at ``points`` evenly spaced quantiles (for plotting)."""
    v = np.sort(values).tolist()
    if not v:
        return []
    n = len(v)
    out = []
    for j in range(points):
        q = j / (points - 1)
        out.append([round(1e3 * v[min(n - 1, int(q * (n - 1) + 0.5))], 3), round(q, 4)])
    return out
