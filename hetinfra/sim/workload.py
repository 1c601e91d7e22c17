"""Synthetic request streams for a plan: arrival times, and request sizes inside each class's bucket.

* Arrivals: per model a renewal process at ``rate x load`` requests/s. Inter-arrival times are
  gamma distributed with coefficient of variation ``burst_cv`` (shape 1/cv^2, mean 1/rate):
  cv = 1 is a Poisson process (exponential gaps), cv > 1 is bursty (clumps of arrivals and long
  lulls at the same mean rate), cv < 1 is smoother than Poisson.
* Sizes: a request's class is drawn by the class shares; its (input, output) tokens are drawn
  INSIDE that class's bucket, because the planner sizes every class at its bucket's upper edges
  and the simulator must see the real spread:
  - histogram: uniform integers in (lo, hi] of the bucket's input and output edges (at least 1);
  - dataset: a uniformly drawn CSV row of the bucket (the same bucketing and ``outside`` rule as
    ``hetinfra.spec.demand``);
  - explicit ``classes``: the class's fixed sizes.
* Determinism: everything comes from ``random.Random`` objects seeded from (seed, model name);
  no global random state, no clock, no dependence on dict or set order.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetinfra.errors import InvalidInputError
from hetinfra.spec.adapters import base_class
from hetinfra.spec.demand import dataset_rows
from hetinfra.spec.models import DatasetSizes, ModelSpec
from hetinfra.spec.planning import MAX_BURST_CV, MAX_LOAD, MIN_BURST_CV, MIN_LOAD

__all__ = ["MAX_LOAD", "MAX_REQUESTS", "MIN_LOAD", "WorkloadConfig", "SizeRule", "below", "class_sizes", "arrival_gaps", "arrival_times", "model_rng"]

#: the most requests per model one simulation holds: about 250 bytes per request and model stay
#: in memory (the draw, the arrivals and each unit's columns; measured 245 B at 500,000 on one
#: model), so 2,000,000 is about 0.5 GB per model
MAX_REQUESTS = 2_000_000


@dataclass(frozen=True)
class WorkloadConfig:
    """How much traffic to replay: ``requests`` per model, ``load`` x the
    plan's demand, gamma inter-arrivals of coefficient of variation ``burst_cv`` (1 = Poisson)."""

    requests: int = 20000
    load: float = 1.0
    burst_cv: float = 1.0
    seed: int = 0
    warmup_fraction: float = 0.1  # the first 10% of each model's requests are left out of the statistics
    #: a run at one of these seeds carries each unit's and model's batch means (hetinfra.sim.batches);
    #: None: every verification run (``detail=False``) does. The confirmation's judge passes None (its
    #: shares and attainments floor their spread with them: hetinfra.sim.batches.run_spread), an early
    #: search judge its screening seed (it accepts on them), another search judge none, and
    #: `simulate --replications` its seeds
    batch_means: tuple[int, ...] | None = None

    def __post_init__(self):
        if not isinstance(self.requests, int) or self.requests <= 0:
            raise InvalidInputError(f"requests must be a positive integer (got {self.requests!r})")
        if self.requests > MAX_REQUESTS:
            raise InvalidInputError(f"requests {self.requests} is more than the {MAX_REQUESTS:,} per model a simulation "
                                    "holds (about 250 bytes of memory per request and model)",
                                    hint="simulate fewer requests, or run several seeds (simulate --replications)")
        if not MIN_LOAD <= self.load <= MAX_LOAD:
            raise InvalidInputError(f"load must be in [{MIN_LOAD:g}, {MAX_LOAD:g}] (got {self.load!r})",
                                    hint="1.0 replays the planned demand")
        if not MIN_BURST_CV <= self.burst_cv <= MAX_BURST_CV:
            raise InvalidInputError(f"burst_cv must be in [{MIN_BURST_CV:g}, {MAX_BURST_CV:g}] (got {self.burst_cv!r})",
                                    hint="1.0 is Poisson arrivals; > 1 burstier, < 1 more even")
        if not 0 <= self.warmup_fraction < 1:
            raise InvalidInputError(f"warmup_fraction must be in [0, 1) (got {self.warmup_fraction!r})")


def model_rng(seed: int, model: str, stream: str) -> random.Random:
    """An independent, reproducible generator per (seed, model, purpose): str seeds hash with SHA-512."""
    return random.Random(f"hetinfra-sim:{seed}:{model}:{stream}")


def arrival_gaps(rng: random.Random, n: int, burst_cv: float) -> np.ndarray:
    """The rate-free part of n inter-arrival gaps: -log(1 - u) (Poisson), else a gamma(1/cv^2, 1)
    variate. :func:`arrival_times` scales them to a rate as ``random.expovariate`` and
    ``random.gammavariate`` would (gap / rate; gap x 1 / (rate x shape)), bit for bit, so a model's
    gaps are drawn once whatever rates it is simulated at."""
    if burst_cv == 1.0:
        from hetinfra.sim.core import exp_gaps

        gaps = exp_gaps(rng, n)
        return np.array([-math.log(1.0 - rng.random()) for _ in range(n)]) if gaps is None else gaps
    shape = 1.0 / (burst_cv * burst_cv)
    return np.array([rng.gammavariate(shape, 1.0) for _ in range(n)])


def arrival_times(gaps: np.ndarray, rate: float, burst_cv: float) -> np.ndarray:
    """Arrival times (s) of a renewal process of mean rate ``rate`` from :func:`arrival_gaps`
    (a running sum, in order)."""
    if not rate > 0:
        raise InvalidInputError(f"arrival rate must be > 0 (got {rate!r})")
    if burst_cv == 1.0:
        return np.cumsum(gaps / rate)
    shape = 1.0 / (burst_cv * burst_cv)
    return np.cumsum(gaps * (1.0 / (rate * shape)))


def _edges_of(name: str, hi: int, edges: list[int], what: str, model: str) -> tuple[int, int]:
    for k in range(1, len(edges)):
        if edges[k] == hi:
            return edges[k - 1], hi
    raise InvalidInputError(f"{model}: class {name!r} has {what} {hi}, which is no bucket edge of the spec",
                            hint="the spec changed since the plan was made: re-plan, or pass the spec it was made from")


def below(rng: random.Random, n: int) -> int:
    """A uniform integer in [0, n), n >= 1: ``random``'s own method (``_randbelow_with_getrandbits``,
    what randint and randrange use), stated here so that sizes do not change with a Python release
    and each draw costs one call, not three."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


@dataclass(frozen=True)
class SizeRule:
    """How one plan class's (input, output) tokens are drawn: each side uniform in
    [first, first + n) (n = 0: always ``first``, no draw), or, with ``rows``, one row of those drawn
    uniformly. A spec's fixed classes are both sides with n = 0; a histogram bucket (lo, hi] is
    first = lo + 1, n = hi - lo (random.randint(lo + 1, hi)); a dataset bucket is its rows."""

    input: tuple[int, int] = (1, 0)
    output: tuple[int, int] = (1, 0)
    rows: tuple[tuple[int, int], ...] = ()

    def draw(self, rng: random.Random) -> tuple[int, int]:
        """One request's sizes (the reference of the compiled sampler, hetinfra.sim.core)."""
        if self.rows:
            return self.rows[below(rng, len(self.rows))]
        (fi, ni), (fo, no) = self.input, self.output
        return (fi + below(rng, ni) if ni else fi), (fo + below(rng, no) if no else fo)


def _uniform(lo: int, hi: int) -> tuple[int, int]:
    """(first, n) of a histogram bucket's side (lo, hi]: randint(lo + 1, hi), or always max(hi, 1)."""
    lo = max(lo, 0)
    return (max(hi, 1), 0) if hi <= lo + 1 else (lo + 1, hi - lo)


def _dataset_rows(ds: DatasetSizes, base: Path, model: str) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """CSV rows by bucket, as ``hetinfra.spec.demand`` reads them (sizes at least 1 token)."""
    try:
        rows = dataset_rows(ds, base)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{model}: {exc.message}", hint="dataset.path is relative to the spec file; "
                                                               "pass --spec") from None
    return {k: [(max(i, 1), max(o, 1)) for i, o in v] for k, v in rows.items()}


def class_sizes(model: ModelSpec, base: Path, classes: list) -> list[SizeRule]:
    """One size rule per plan class (``models[].classes`` of plan.json: name, input_tokens,
    output_tokens), from the spec's size distribution. A class the spec cannot produce raises
    InvalidInputError (the plan and the spec disagree)."""
    sizes = model.demand.sizes
    out: list[SizeRule] = []
    if sizes.classes is not None:
        fixed = {c.name: (c.input_tokens, c.output_tokens) for c in sizes.classes}
        for c in classes:
            name = base_class(c.name)  # an adapter's class has its base class's sizes (issue 38)
            if name not in fixed:
                raise InvalidInputError(f"{model.name}: plan class {c.name!r} is not among the spec's classes "
                                        f"({', '.join(sorted(fixed))})", hint="re-plan, or pass the plan's spec with --spec")
            i, o = fixed[name]
            out.append(SizeRule((i, 0), (o, 0)))
        return out
    if sizes.histogram is not None:
        h = sizes.histogram
        for c in classes:
            ilo, ihi = _edges_of(c.name, c.input_tokens, h.input_edges, "input_tokens", model.name)
            olo, ohi = _edges_of(c.name, c.output_tokens, h.output_edges, "output_tokens", model.name)
            out.append(SizeRule(_uniform(ilo, ihi), _uniform(olo, ohi)))
        return out
    ds = sizes.dataset
    rows = _dataset_rows(ds, base, model.name)
    for c in classes:
        _edges_of(c.name, c.input_tokens, ds.input_edges, "input_tokens", model.name)
        _edges_of(c.name, c.output_tokens, ds.output_edges, "output_tokens", model.name)
        key = (ds.input_edges.index(c.input_tokens) - 1, ds.output_edges.index(c.output_tokens) - 1)
        bucket = rows.get(key)
        if not bucket:
            raise InvalidInputError(f"{model.name}: the dataset has no row in bucket {c.name!r} that the plan routes",
                                    hint="the dataset changed since the plan was made: re-plan")
        out.append(SizeRule(rows=tuple(bucket)))
    return out
