r"""Throughput-optimal placement of one model on a node combination (Coral's offline ILP, solved exactly).

Coral (../shared/seeds/coral.txt, Sec. 4.2) places a model of L layers on a node set N with K
stages by an ILP: binary x[k,l] (stage k holds l layers), y[n,k] (node n serves stage k),

    max T   s.t.  sum_l x[k,l] = 1,  sum_k y[n,k] = 1,  sum_k sum_l l x[k,l] = L,
                  T <= sum_{n,l} T[n,l] x[k,l] y[n,k]          (for every stage k)

where T[n,l] is node n's throughput holding l layers under the per-stage latency budget. vLLM
cannot run data parallelism inside a pipeline stage (vllm.md s1.4 item 7, vLLM issue #27778), so
hetinfra fixes one node per stage (K = |N|). With that, the ILP is solved exactly without a MIP:

* only which node is first and which is last matters (the first stage holds the embedding, the
  last the LM head; middle stages are interchangeable), so the distinct (first, last) choices are
  enumerated, middle nodes in a fixed order;
* for a fixed order the problem is max_l min_k T[k, l_k] with sum_k l_k = L, l_k >= 1 and every
  T[k, .] nonincreasing: the optimum T* is the largest table value t with
  sum_k #{l : T[k,l] >= t} >= L (binary search over the table's values); the split then takes
  l_k = #{l : T[k,l] >= T*} and removes surplus layers one at a time from the currently slowest
  stage, which keeps every stage at >= T* and levels the stages above it.

``tests/test_placement.py`` checks this against Coral's ILP written in Pyomo and solved by HiGHS.
Here T[n,l] is ``hetinfra.perf.pipeline.stage_batch_limit``: the largest micro-batch the stage
carries under the TPOT SLO and its KV memory; the pipeline's rate is proportional to its minimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

#: limit(node, stages, first, last, layers) -> T[n, l] (>= 0; 0 = cannot hold those layers)
StageLimit = Callable[[str, int, bool, bool, int], float]


@dataclass(frozen=True)
class Placement:
    """Nodes in pipeline order, layers per stage, and the bottleneck stage's throughput figure."""

    nodes: tuple[str, ...]
    layers: tuple[int, ...]
    value: float  # min over stages of T[stage node, stage layers]


def stage_orders(nodes: Sequence[str]) -> list[tuple[str, ...]]:
    """Distinct pipeline orders that can differ in throughput: each (first, last) choice once,
    middle nodes sorted."""
    if len(nodes) == 1:
        return [tuple(nodes)]
    out = set()
    for i, first in enumerate(nodes):
        for j, last in enumerate(nodes):
            if i != j:
                middle = sorted(n for k, n in enumerate(nodes) if k not in (i, j))
                out.add((first, *middle, last))
    return sorted(out)


def _table(node: str, k: int, stages: int, max_layers: int, limit: StageLimit) -> list[float]:
    """T[node at position k, l] for l = 1..max_layers, made nonincreasing (a safeguard: the
    performance model is monotone by construction), stopping at the first 0."""
    out: list[float] = []
    for l in range(1, max_layers + 1):
        v = limit(node, stages, k == 0, k == stages - 1, l)
        if out and v > out[-1]:
            v = out[-1]
        if v <= 0:
            break
        out.append(v)
    return out


def split_layers(tables: list[list[float]], total: int) -> tuple[tuple[int, ...], float] | None:
    """Max-min split of ``total`` layers over stages with nonincreasing per-stage tables
    (``tables[k][l-1]`` = T at l layers); None when no split gives every stage >= 1 layer."""
    if any(not t for t in tables) or sum(len(t) for t in tables) < total:
        return None
    values = sorted({v for t in tables for v in t})

    def counts(v: float) -> list[int]:
        out = []
        for t in tables:  # t is nonincreasing: count of entries >= v by bisection
            lo, hi = 0, len(t)
            while lo < hi:
                mid = (lo + hi) // 2
                if t[mid] >= v:
                    lo = mid + 1
                else:
                    hi = mid
            out.append(lo)
        return out

    lo, hi = 0, len(values) - 1  # values[lo] is feasible (every entry counted), find the largest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        c = counts(values[mid])
        if min(c) >= 1 and sum(c) >= total:
            lo = mid
        else:
            hi = mid - 1
    layers = counts(values[lo])
    while sum(layers) > total:  # drop a layer from the slowest stage that can spare one
        k = min((k for k in range(len(layers)) if layers[k] > 1),
                key=lambda k: (tables[k][layers[k] - 1], -layers[k], k))
        layers[k] -= 1
    value = min(t[n - 1] for t, n in zip(tables, layers))
    return tuple(layers), value


def best_placement(nodes: Sequence[str], total_layers: int, limit: StageLimit) -> Placement | None:
    """Throughput-optimal placement of ``total_layers`` layers on ``nodes`` (one stage per node);
    ties go to the first order in ``stage_orders``. None when the nodes cannot hold the model."""
    k = len(nodes)
    if k > total_layers:
        return None
    best: Placement | None = None
    for order in stage_orders(nodes):
        tables = [_table(n, i, k, total_layers - k + 1, limit) for i, n in enumerate(order)]
        found = split_layers(tables, total_layers)
        if found and (best is None or found[1] > best.value * (1 + 1e-12)):
            best = Placement(order, found[0], found[1])
    return best
