"""Replications and their judgement (hetinfra.sim.replications)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.sim import WorkloadConfig
from hetinfra.sim.minimal import without_one_replica
from hetinfra.sim.plan_sim import simulate_plan
from hetinfra.sim.bounds import t_bound
from hetinfra.sim.replications import PURPOSES, judge, seeds_for, simulate_replications
from hetinfra.spec.load import load_spec
from tests.plan.golden_plans import REPO, filled_golden

CONFIG = WorkloadConfig(requests=400, load=1.1)


def test_seed_sets_are_disjoint_and_never_a_hand_typed_seed():
    seen: dict[int, tuple] = {}
    for base in range(0, 40):
        for purpose in PURPOSES:
            seeds = seeds_for(base, purpose, 50)
            assert seeds == seeds_for(base, purpose, 50)  # deterministic
            assert seeds[:7] == seeds_for(base, purpose, 7)  # more replications extend, never reshuffle
            for s in seeds:
                assert s >= 1000 and s not in seen, (s, base, purpose, seen.get(s))
                seen[s] = (base, purpose)
    with pytest.raises(InvalidInputError):
        seeds_for(0, "tune", 3)
    with pytest.raises(InvalidInputError):
        seeds_for(-1, "decide", 3)


@pytest.fixture(scope="module")
def europe():
    path = REPO / "services" / "europe.yaml"  # two models, one with a class split over two units
    return filled_golden("europe"), load_spec(path)[0], Path(path)


def test_replications_are_separate_simulations_and_the_memo_changes_nothing(europe):
    doc, spec, path = europe
    uid = doc["allocations"][0]["unit"]  # a replica more there, to remove (the golden plan may have none to spare)
    doc = {**doc, "allocations": [dict(a, count=a["count"] + 1) if a["unit"] == uid else a for a in doc["allocations"]]}
    seeds = seeds_for(0, "decide", 3)
    fresh = [simulate_plan(doc, spec, path, replace(CONFIG, seed=s), detail=False) for s in seeds]
    memo: dict = {}
    assert simulate_replications(doc, spec, path, CONFIG, seeds, memo=memo) == fresh
    assert simulate_replications(doc, spec, path, CONFIG, seeds, memo=memo) == fresh  # all from the memo
    # a removal through the shared memo (the trim's check) equals its fresh simulation at every seed
    fewer = without_one_replica(doc, uid)
    again = simulate_replications(fewer, spec, path, CONFIG, seeds, memo=memo)
    assert again == [simulate_plan(fewer, spec, path, replace(CONFIG, seed=s), detail=False) for s in seeds]
    assert len({s["models"][0]["ttft_ms"]["p99"] for s in fresh}) == 3  # the seeds do differ


def test_a_view_is_validated_once_per_parse_cache(europe, monkeypatch):
    """The caller's parse cache (one judgement of one view) validates the view at its first call
    only, and the simulations are those of separate calls (a cache that is not read fails this)."""
    from hetinfra.document.simulation import SimPlan

    doc, spec, path = europe
    parses = []
    real = SimPlan.of.__func__

    def counted(cls, plan, *args):
        parses.append(isinstance(plan, dict))
        return real(cls, plan, *args)

    monkeypatch.setattr(SimPlan, "of", classmethod(counted))
    seeds = seeds_for(0, "decide", 3)
    cache: dict = {}
    got = simulate_replications(doc, spec, path, CONFIG, seeds[:1], parsed=cache) + \
        simulate_replications(doc, spec, path, CONFIG, seeds[1:], parsed=cache)
    assert parses.count(True) == 1
    assert got == [simulate_plan(doc, spec, path, replace(CONFIG, seed=s), detail=False) for s in seeds]


def _sim(seed: int, p99_tpot: float, attained: float = 1.0, stable: bool = True) -> dict:
    """A synthetic simulation of one model with one unit: p99 TTFT 500 ms, p99 TPOT as given."""
    slo = {"ttft_ms": 1000.0, "tpot_ms": 80.0, "percentile": "p99", "attainment": 0.95}
    ratio = max(0.5, p99_tpot / 80.0, 0.95 / max(attained, 1e-6))
    block = {"count": 2000, "ttft_ms": {"p99": 500.0}, "tpot_ms": {"p99": p99_tpot},
             "objective": {"met": ratio <= 1 and stable, "ratio": ratio if stable else max(ratio, 1.5),
                           "attainment": attained}}
    unit = {"unit": "u1", "model": "m", **block, "stability": {"stable": stable}}
    return {"seed": seed, "met": block["objective"]["met"], "models": [{"model": "m", "slo": slo, **block,
                                                                         "met": block["objective"]["met"],
                                                                         "stable": stable}],
            "units": [unit]}


def _judged(values, **kw) -> dict:
    return judge([_sim(1000 + k, v, **kw) for k, v in enumerate(values)])["models"][0]


def test_a_model_clearly_inside_is_met_clearly_outside_missed_and_near_the_edge_undecided():
    inside = _judged([60.0, 61.5, 59.0, 62.0])
    assert inside["met"] and inside["decision"] == "met" and inside["bound"]["tpot_ms"] < 80
    assert inside["objective"] == {**inside["objective"], "met": True, "ratio": inside["ratio_bound"]}
    outside = _judged([95.0, 97.0, 99.0, 96.0])
    assert not outside["met"] and outside["decision"] == "missed" and outside["objective"]["ratio"] > 1
    # every replication meets, the mean is inside, but the 95% bound is not: a point estimate would pass it
    edge = _judged([78.7, 80.1, 79.2, 80.4, 79.0])
    assert max(edge["estimate"]["tpot_ms"], 78.7) < 80 < edge["bound"]["tpot_ms"]
    assert not edge["met"] and edge["decision"] == "undecided"


def test_attainment_has_a_binomial_bound():
    # the replications' attainments are all 0.951 against 0.95: the t part has no spread, the
    # Clopper-Pearson bound on 4 x 2000 requests is about 0.947, under the target
    j = _judged([50.0, 51.0, 52.0, 50.5], attained=0.951)
    assert j["bound"]["attainment"] < 0.95 < j["estimate"]["attainment"] and not j["met"]


def test_a_unit_is_judged_on_its_attainment_only_where_its_objective_has_one():
    """A unit's attainment bound is computed only for an objective with an attainment (its bounds are
    not reported): one with 0.951 attained against 0.95 still misses on the binomial bound (a planted
    skip of it meets), and without an attainment objective its verdict is its latencies'."""
    unit = judge([_sim(1000 + k, v, attained=0.951) for k, v in enumerate([50.0, 51.0, 52.0, 50.5])])["units"][0]
    assert unit["decision"] != "met" and unit["objective"]["ratios"]["attainment"] > 1
    sims = [_sim(1000 + k, v, attained=0.951) for k, v in enumerate([50.0, 51.0, 52.0, 50.5])]
    for s in sims:
        s["models"][0]["slo"] = {**s["models"][0]["slo"], "attainment": None}
    j = judge(sims)
    assert j["units"][0]["decision"] == "met" and "attainment" not in j["units"][0]["objective"]["ratios"]
    assert j["models"][0]["bound"]["attainment"] < 0.95  # the model's bound is still reported


def test_an_unstable_unit_fails_its_model_whatever_its_percentiles():
    sims = [_sim(1000 + k, v, stable=k != 2) for k, v in enumerate([50.0, 51.0, 50.5, 49.0])]
    j = judge(sims)
    model, unit = j["models"][0], j["units"][0]
    assert not j["met"] and not model["met"] and model["decision"] == "missed" and not model["stable"]
    assert not unit["objective"]["met"] and unit["objective"]["ratio"] >= 1.5 and not unit["stability"]["stable"]
    assert model["objective"]["ratio"] >= 1.5  # the model's ratio says how badly, as its unit's does


def test_one_replication_gives_no_bound():
    j = _judged([50.0])
    assert j["decision"] == "undecided" and not j["met"] and j["bound"]["tpot_ms"] is None


def test_the_judgement_reads_like_one_simulation(europe):
    doc, spec, path = europe
    sims = simulate_replications(doc, spec, path, CONFIG, seeds_for(0, "confirm", 3))
    j = judge(sims)
    assert j["seeds"] == seeds_for(0, "confirm", 3) and j["replications"] == 3
    assert [m["model"] for m in j["models"]] == [m["model"] for m in sims[0]["models"]]
    assert [u["unit"] for u in j["units"]] == [u["unit"] for u in sims[0]["units"]]
    for m in j["models"]:
        assert set(m["objective"]) >= {"met", "ratio"} and m["decision"] in ("met", "missed", "undecided")
        assert m["bound"]["tpot_ms"] >= m["estimate"]["tpot_ms"]
    for u in j["units"]:
        assert u["count"] == sum(next(x for x in s["units"] if x["unit"] == u["unit"])["count"] for s in sims)
        assert set(u["objective"]) >= {"met", "ratio"}


def test_no_request_attained_is_a_finite_miss_in_strict_json():
    """A planted fault: an attainment of 0 made the miss ratio infinite, which strict JSON refuses."""
    from hetinfra.fileio import dumps_strict
    from hetinfra.sim.stats import Objective, evaluate

    one = evaluate(Objective(100.0, 10.0, "p99", 0.9), {"p99": 500.0}, {"p99": 50.0}, 0.0)
    assert not one["met"] and one["ratio"] >= 1e5
    j = judge([_sim(1000 + k, 90.0, attained=0.0) for k in range(3)])
    assert not j["met"] and j["models"][0]["objective"]["ratio"] >= 1e5
    dumps_strict(one), dumps_strict(j)


def test_a_model_that_missed_by_40_percent_on_one_of_seven_is_not_met():
    """The bound is on one more run, not on the mean (bench_scale.py's independent fleet, m14-phi-4:
    seven p99s of 420-4,214 ms against 3,000 had a bound on the mean of 2,384 and met; the audit's
    fresh seeds then missed on 4 of 10). Here the TPOT p99s are the same shape against 80 ms."""
    values = [11.2, 11.9, 39.4, 34.5, 112.4, 12.2, 13.9]  # one run misses by 40%
    j = _judged(values)
    assert not j["met"] and j["decision"] == "undecided" and j["bound"]["tpot_ms"] > 80
    mean_bound = t_bound(values, 0.95, upper=True)[1]
    assert mean_bound < 80  # what the bound on the mean said: met
    # a unit's verdict (the credit rounds' headroom) still bounds the mean
    unit = judge([_sim(1000 + k, v) for k, v in enumerate(values)])["units"][0]
    assert unit["objective"]["ratio"] == pytest.approx(max(mean_bound / 80, 0.5, 0.95 / 1.0), abs=1e-3)
