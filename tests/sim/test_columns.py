"""hetinfra.sim.columns.mean_sum: a latency block's mean is exactly the exact sum's."""

from __future__ import annotations

import numpy as np

from hetinfra.sim import columns, core
from hetinfra.sim.stats import summarize


def test_the_mean_is_the_exact_sums_on_any_column():
    """Over columns of many sizes and scales (latencies from microseconds to minutes), the summary
    with numpy's sum where it is safe equals the one with the exact sum, bit for bit."""
    rng = np.random.default_rng(33)
    for _ in range(150):
        n = int(rng.integers(1, 30_000))
        x = rng.lognormal(mean=float(rng.uniform(-9, 4)), sigma=float(rng.uniform(0.1, 3)), size=n)
        assert summarize(x, presorted=True, total=columns.mean_sum)["mean"] == \
            summarize(x, presorted=True, total=core.fsum)["mean"]


def test_a_mean_at_a_rounding_boundary_takes_the_exact_sum_and_no_other_does(monkeypatch):
    """A mean within numpy's error of a rounding boundary (1.0005 ms, which no double holds exactly)
    is computed from the exact sum; a mean far from one is not (always taking numpy's sum, or always
    the exact one, fails this)."""
    calls = []
    real = core.fsum
    monkeypatch.setattr(core, "fsum", lambda v: calls.append(len(v)) or real(v))
    at = np.full(1000, 1.0005e-3)
    assert columns.mean_sum(at) == real(at) and calls == [1000]
    calls.clear()
    columns.mean_sum(np.full(1000, 1.0002e-3))
    assert calls == []
