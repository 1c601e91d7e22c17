"""The cliff probe (hetinfra.plan.cliff): a model the confirmation met under pressure is run at 5% more
load on its first confirm seeds, and is not met where a run there collapses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.plan import cliff, replicated
from hetinfra.sim import replications
from tests.plan.test_replicated import RATIOS, VIEW, _pressed_confirm, spent_at


def _run(model: str, ratio: float | None, stable: bool = True) -> dict:
    return {"models": [{"model": model, "met": ratio is not None and ratio <= 1.0 and stable, "stable": stable,
                        "objective": {"ratio": ratio}}]}


@pytest.mark.parametrize("bound, ratios, collapsed", [
    (0.48, [0.46, 1.33, 0.47], True),     # o08-llama-2-7b's kind: clean at the promise, a cascade 5% past it
    (0.96, [0.97, 1.02, 0.98], False),    # services/batch.yaml's kind: at its edge on a smooth slope
    (0.70, [0.72, 0.75, 0.74], False),    # far from any cliff
    (0.60, [0.61, None, 0.62], True),     # a unit whose queue stops draining
])
def test_a_probe_collapses_only_past_its_objective_and_well_past_its_bound(bound, ratios, collapsed):
    runs = [_run("m", r, stable=r is not None) for r in ratios]
    record = cliff.probe({"ratio_bound": bound}, runs, "m", 1.26, [7, 8, 9])
    assert record == {"load": 1.26, "seeds": [7, 8, 9], "run_ratios": ratios, "collapsed": collapsed}


def _judged(bounds: dict) -> dict:
    """A confirmation entry whose per-statistic bounds (over their objectives) are ``bounds``."""
    return {"ratio_bound": max(bounds.values()), "objective": {"ratios": bounds}}


def _run_by_stat(model: str, ratios: dict) -> dict:
    worst = max(ratios.values())
    return {"models": [{"model": model, "met": worst <= 1.0, "stable": True,
                        "objective": {"ratio": worst, "ratios": ratios}}]}


@pytest.mark.parametrize("ratios, collapsed", [
    # bench_scale.py --mix other --seed 8, o29-qwen3-30b-a3b's probe run at 1.26 (seed 1046): TTFT 3.5x its
    # own bound, under 1.5x the model's largest (TPOT's); 1 of 10 audit runs at 1.2 then missed TTFT by 15.4%
    ({"ttft": 1.2556, "tpot": 0.898}, True),
    ({"ttft": 0.4834, "tpot": 0.8761}, False),  # its other probe runs: met
    ({"ttft": 0.41, "tpot": 1.05}, False),      # TPOT at its edge on a smooth slope: a few per cent past
    ({"ttft": 0.52, "tpot": 1.30}, True),       # TPOT well past its own bound
])
def test_a_probe_judges_each_statistic_against_its_own_bound(ratios, collapsed):
    record = cliff.probe(_judged({"ttft": 0.354, "tpot": 0.844}), [_run_by_stat("m", ratios)], "m", 1.26, [1046])
    assert record["collapsed"] is collapsed
    assert record["run_ratios"] == [max(ratios.values())]


_RATIO = st.floats(0.01, 3.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(bounds=st.fixed_dictionaries({"ttft": _RATIO, "tpot": _RATIO}),
       run=st.fixed_dictionaries({"ttft": _RATIO, "tpot": _RATIO}))
def test_the_per_statistic_rule_flags_what_the_largest_bound_flagged_and_a_statistic_past_its_own(bounds, run):
    """Never laxer than the rule on the model's largest bound (each statistic's bound is at most it), and
    a run past its objective on a statistic by more than CLIFF_JUMP x that statistic's bound collapses."""
    entry, worst = _judged(bounds), max(run.values())
    record = cliff.probe(entry, [_run_by_stat("m", run)], "m", 1.26, [1])
    old = worst > 1.0 and worst > cliff.CLIFF_JUMP * entry["ratio_bound"]
    own = any(r > max(1.0, cliff.CLIFF_JUMP * bounds[k]) for k, r in run.items())
    assert record["collapsed"] == own
    assert record["collapsed"] or not old


def _probed(monkeypatch, at_promise: float, at_probe: float, kv_max: float):
    """A confirmation of one model whose runs read ``at_promise`` of its objective at load 1.2 and
    ``at_probe`` at the probe's load, its units' KV cache ``kv_max`` full: (its entry, the loads run)."""
    monkeypatch.setitem(RATIOS, "clear", [at_promise] * replicated.MAX_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max)
    inner, loads = replications.simulate_replications, []

    def by_load(view, spec, path, config, seeds, **kw):
        loads.append(config.load)
        sims = inner(view, spec, path, config, seeds, **kw)
        if config.load > 1.2:
            for sim in sims:
                for entry in sim["models"] + sim["units"]:
                    entry["objective"] = {**entry["objective"], "ratio": at_probe, "met": at_probe <= 1}
                    entry["tpot_ms"] = {**entry["tpot_ms"], "p99": 100.0 * at_probe}
                for entry in sim["models"]:
                    entry["met"] = at_probe <= 1
        return sims

    monkeypatch.setattr("hetinfra.sim.replications.simulate_replications", by_load)
    [model] = confirm({**VIEW, "models": [{"name": "clear", "rate_rps": 1.0}]})["models"]
    return model, loads


def test_a_pressed_model_that_collapses_at_the_probes_load_is_not_met_and_says_why(monkeypatch):
    model, loads = _probed(monkeypatch, 0.5, 2.0, kv_max=0.96)
    assert loads[-1] == pytest.approx(1.2 * (1 + cliff.CLIFF_MARGIN))
    assert not model["met"] and model["decision"] == "missed" and not model["objective"]["met"]
    assert model["cliff"]["collapsed"] and model["cliff"]["run_ratios"] == [2.0] * cliff.CLIFF_SEEDS
    assert model["replications"] == replicated.MAX_PRESSED  # the judgement at the promised load stands beside it


def test_a_pressed_model_on_a_smooth_slope_is_met_with_its_probe_recorded(monkeypatch):
    model, _ = _probed(monkeypatch, 0.5, 0.55, kv_max=0.96)
    assert model["met"] and model["cliff"] == {"load": pytest.approx(1.26), "seeds": model["seeds"][:cliff.CLIFF_SEEDS],
                                               "run_ratios": [0.55] * cliff.CLIFF_SEEDS, "collapsed": False}


def test_a_model_under_no_pressure_is_never_probed(monkeypatch):
    model, loads = _probed(monkeypatch, 0.5, 2.0, kv_max=0.5)
    assert model["met"] and "cliff" not in model and set(loads) == {1.2}


def test_a_confirmation_whose_only_misses_are_pressure_checks_goes_to_the_padding_not_back_to_the_rounds():
    from hetinfra.plan.kv_pressure import only_pressure_misses, pressure_miss

    fell = {"model": "a", "met": False, "cliff": {"collapsed": True}}
    thrashed = {"model": "d", "met": False, "thrashing": {"met": False}, "cliff": None}
    missed = {"model": "b", "met": False, "thrashing": {"met": True}}
    met = {"model": "c", "met": True, "cliff": {"collapsed": False}}
    assert [pressure_miss(m) for m in (fell, thrashed, missed, met)] == ["cliff", "thrashing", None, None]
    assert only_pressure_misses({"models": [fell, thrashed, met]})
    assert not only_pressure_misses({"models": [fell, missed, met]})  # a plain miss: the rounds resume (a veto)
    assert not only_pressure_misses({"models": [met]})


def test_a_spent_work_budget_skips_the_probe_and_says_so(monkeypatch):
    """The budget stops the probe before it runs: the model keeps its judgement at the promised load, with
    no ``cliff`` record, and the budget names the probe (plan.json work_budget.stopped)."""
    stopped = spent_at(monkeypatch, cliff.CLIFF_CUT)
    model, loads = _probed(monkeypatch, 0.5, 2.0, kv_max=0.96)
    assert model["met"] and "cliff" not in model and set(loads) == {1.2} and stopped == [cliff.CLIFF_CUT]
