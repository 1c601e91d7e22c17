"""Latency floors (hetinfra.plan.floors): a layout whose miss does not shrink as its load does passes no derating
step to its model's untried layouts, and those go back to their starting factors; a load's miss still does."""

from __future__ import annotations

import pytest

from hetinfra.plan import floors, rounds

TP1, TP2 = "q||L40S|tp1|pp1|n1", "q||L40S|tp2|pp1|n1"
REGIMES = {"t1": (TP1, "q"), "t2": (TP2, "q")}
DOC = {"allocations": [{"unit": "u1", "template": "t1"}]}


def _sim(ratio: float) -> dict:
    return {"models": [{"model": "q", "met": False}],
            "units": [{"unit": "u1", "count": 1000, "objective": {"met": False, "ratio": ratio}}]}


@pytest.mark.parametrize("misses, floor", [
    ([(0.41, 1.057), (0.377, 1.049), (0.347, 1.037)], True),   # held-out h98's L40S TP1: 1.9% over 15%
    ([(0.82, 1.08), (0.75, 1.05), (0.69, 1.02)], False),       # a load's near miss: 5.6% over 16%
    ([(0.82, 5.4), (0.41, 1.057), (0.377, 1.049)], False),     # a collapse first: not three near misses
    ([(0.41, 1.057), (0.377, 1.049)], False),                  # two points show a slope, not that it stays
    ([(0.41, 1.2), (0.377, 1.19), (0.347, 1.18)], False),      # past FLOOR_NEAR: a miss too far to be a floor's
])
def test_a_floor_is_three_near_misses_that_derating_barely_moves(misses, floor):
    assert floors.at_floor(misses) is floor


def _rounds(ratios: list[float], with_floors: bool) -> list[dict[str, float]]:
    """Each round's factors when TP1 misses at ``ratios`` in turn and TP2 is never simulated."""
    g, ok, bad = {TP1: 0.82, TP2: 0.82}, {}, {}
    record = floors.Floors(initial=dict(g)) if with_floors else None
    out = []
    for ratio in ratios:
        g = rounds.next_factors(_sim(ratio), DOC, g, ok, bad, {}, REGIMES, floors=record)
        out.append(dict(g))
    return out


def test_an_untried_layout_goes_back_to_its_start_once_the_missing_one_is_at_its_floor():
    """h98 shipped missing at $67.00/h: TP2, never simulated, was derated in step with TP1's floor for 12 rounds."""
    at_floor = _rounds([5.4, 1.057, 1.049, 1.037, 1.033], with_floors=True)
    assert at_floor[2][TP2] < 0.82 and at_floor[3][TP2] == 0.82 and at_floor[4][TP2] == 0.82
    assert at_floor[4][TP1] < at_floor[3][TP1] < at_floor[2][TP1]  # TP1 itself is still derated where it misses
    without = _rounds([5.4, 1.057, 1.049, 1.037, 1.033], with_floors=False)
    assert without[4][TP2] < without[3][TP2] < 0.82  # the rule before: in step, round after round


def test_a_loads_miss_keeps_derating_the_untried_layouts():
    steps = _rounds([1.08, 1.05, 1.02], with_floors=True)
    assert steps[0][TP2] > steps[1][TP2] > steps[2][TP2]


def test_the_same_simulation_judged_again_adds_no_point():
    """rounds._past_unchanged steps the factors on one simulation until the plan changes: one point, not three."""
    record = floors.Floors()
    assert not any(record.judged(TP1, f, 1.05, True) for f in (0.5, 0.46, 0.42, 0.39))
    assert record.misses[TP1] == [(0.5, 1.05)] and not record.floored
