"""The confidence bounds without scipy (hetinfra.sim.bounds), against published tables."""

from __future__ import annotations

import math

import pytest

from hetinfra.sim.bounds import betainc, clopper_pearson, prediction_bound, t_bound, t_quantile


@pytest.mark.parametrize("p, df, table", [  # Student t tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2)
    (0.95, 1, 6.314), (0.95, 2, 2.920), (0.95, 4, 2.132), (0.95, 9, 1.833), (0.95, 19, 1.729),
    (0.95, 30, 1.697), (0.975, 1, 12.706), (0.975, 5, 2.571), (0.975, 10, 2.228), (0.99, 3, 4.541),
    (0.99, 20, 2.528), (0.95, math.inf, 1.645)])
def test_t_quantiles_match_the_tables(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=1e-3)


def test_incomplete_beta_known_values_and_symmetry():
    assert betainc(0.3, 2, 5) == pytest.approx(0.579825, abs=1e-9)  # I_0.3(2, 5), a polynomial
    assert betainc(0.5, 3, 3) == pytest.approx(0.5, abs=1e-12)
    for x, a, b in ((0.2, 0.5, 7.0), (0.9, 30.0, 2.5), (0.01, 900.0, 3.0)):
        assert betainc(x, a, b) + betainc(1 - x, b, a) == pytest.approx(1.0, abs=1e-10)


def test_clopper_pearson_closed_forms():
    # x = 0: the upper bound solves (1 - p)^n = alpha; x = n: the lower bound solves p^n = alpha
    assert clopper_pearson(0, 10, 0.95, upper=True) == pytest.approx(1 - 0.05 ** 0.1, abs=1e-9)
    assert clopper_pearson(10, 10, 0.95, upper=False) == pytest.approx(0.05 ** 0.1, abs=1e-9)
    assert clopper_pearson(0, 10, 0.95, upper=False) == 0.0
    low = clopper_pearson(89_000, 90_000, 0.95, upper=False)  # large n: close to the normal bound
    p = 89_000 / 90_000
    assert low == pytest.approx(p - 1.645 * math.sqrt(p * (1 - p) / 90_000), abs=2e-4) and low < p


def test_t_bound_is_the_mean_plus_the_half_width():
    mean, up = t_bound([1.0, 2.0, 3.0], 0.95, upper=True)
    assert mean == 2.0 and up == pytest.approx(2.0 + 2.920 * 1.0 / math.sqrt(3), abs=1e-3)
    assert t_bound([5.0], 0.95, upper=True) is None


def test_clopper_pearson_solves_its_defining_equation_as_bisection_does():
    """The bound is found by safeguarded Newton steps (hetinfra.sim.bounds._newton_beta): on drawn
    counts it is the root bisection finds, and I_p(x, n - x + 1) = 1 - confidence there (a stop
    before convergence, or a bracket kept on the wrong side, fails this)."""
    import random

    from hetinfra.sim.bounds import bisect_root

    rng = random.Random(5)
    for _ in range(200):
        n = rng.choice((3, 40, 900, 20_000, 300_000))
        x, conf = rng.randint(1, n), rng.choice((0.9, 0.95, 0.99))
        a, b = x, n - x + 1
        low = clopper_pearson.__wrapped__(x, n, conf, False)
        assert low == pytest.approx(bisect_root(lambda p: betainc(p, a, b) - (1 - conf), 0.0, 1.0), abs=1e-12)
        assert betainc(low, a, b) == pytest.approx(1 - conf, abs=1e-9)


def test_the_prediction_bound_covers_one_more_run_not_the_mean():
    values = [1.0, 2.0, 3.0]
    mean, up = prediction_bound(values, 0.95, upper=True)
    assert mean == 2.0 and up == pytest.approx(2.0 + t_quantile(0.95, 2) * 1.0 * math.sqrt(1 + 1 / 3))
    assert up > t_bound(values, 0.95, upper=True)[1]
    assert prediction_bound(values, 0.95, upper=False)[1] == pytest.approx(4.0 - up)
    assert prediction_bound([5.0], 0.95, upper=True) is None


def test_the_prediction_bound_holds_its_coverage_on_normal_samples():
    """Under normal replications, one more run lands under the bound in 95% of trials (its definition)."""
    import random

    rng = random.Random(7)
    for n in (2, 4, 7):
        hits = 0
        for _ in range(4000):
            xs = [rng.gauss(0.0, 1.0) for _ in range(n + 1)]
            hits += xs[-1] <= prediction_bound(xs[:-1], 0.95, upper=True)[1]
        assert 0.935 <= hits / 4000 <= 0.965, (n, hits)


def test_the_prediction_bound_is_never_inside_the_worst_run_seen():
    """A bimodal sample (a preemption cascade in one run of 13, bench_scale.py --shared's
    m13-mistral-7b): the normal-theory bound falls under the run that missed; the bound is that run.
    On normal samples the rule changes nothing (the t bound is above the maximum there)."""
    ttfts = [750.0] * 12 + [3146.0]
    mean, up = prediction_bound(ttfts, 0.95, upper=True)
    assert up == 3146.0 and mean == pytest.approx(sum(ttfts) / 13)
    assert prediction_bound([1 - v / 4000 for v in ttfts], 0.95, upper=False)[1] == pytest.approx(1 - 3146.0 / 4000)
    values = [1.0, 2.0, 3.0]
    assert prediction_bound(values, 0.95, upper=True)[1] > max(values)
