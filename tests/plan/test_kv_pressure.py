"""hetinfra.plan.kv_pressure.thrashing: a bound on a pressed model's KV thrashing over its replications,
and the confirmation that judges it (hetinfra.plan.replicated._judge_pressed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.facts import MIN_BURST_CV, MAX_BURST_CV
from hetinfra.plan import kv_pressure, replicated, replication_method
from hetinfra.sim import replications
from hetinfra.sim.stability import REPREEMPTION_MAX
from tests.plan.test_replicated import RATIOS, VIEW, _pressed_confirm

#: o13-phi-4's A100 on its 10 audit seeds (bench_scale.py --mix other --seed 1, linked; stop 55):
#: (requests preempted, preemptions), None = no preemption; the sixth run was flagged by the estimate alone
O13 = [(2, 2), (2, 3), None, None, None, (11, 45), None, None, None, None]


def _sims(runs: list, unit: str = "u-m", model: str = "m") -> list[dict]:
    def record(run):
        return {"preempted_requests": run[0], "preemptions": run[1]} if run else {"preemptions": 0}

    return [{"units": [{"unit": unit, "model": model, "count": 100, "stability": record(run)},
                       {"unit": "calm", "model": model, "count": 100, "stability": record(None)}]}
            for run in runs]


@pytest.mark.parametrize("runs, met", [
    (O13, True),                        # a handful of victims a run: no evidence past the limit
    ([(10, 10)] * 13, True),            # services/batch.yaml's kind: each victim preempted once
    ([(10, 60)] * 13, False),           # m = 0.83 a run: 1.8 sd past 0.75 in one, 6.6 over the 13
    ([None] * 13, None),                # never preempted: no record
])
def test_a_pooled_bound_on_re_preemption_sees_what_one_run_cannot(runs, met):
    from hetinfra.sim.stability import repreemption_low

    record = kv_pressure.thrashing(_sims(runs), "m", 0.99)
    if met is None:
        assert record is None
        return
    assert record["unit"] == "u-m" and record["repreemption_max"] == REPREEMPTION_MAX and record["met"] is met
    assert (record["bound"] <= REPREEMPTION_MAX) is met
    if runs[0] == (10, 60):  # a run alone is not flagged: the rule per run needs 5 standard deviations
        assert repreemption_low(10, 60) < REPREEMPTION_MAX


def test_the_thrashing_unit_reads_as_the_worst_for_the_padding():
    units = [{"unit": "u-m", "objective": {"met": True, "ratio": 0.4, "ratios": {"tpot": 0.4}}},
             {"unit": "calm", "objective": {"met": True, "ratio": 0.9, "ratios": {"tpot": 0.9}}}]
    first, calm = kv_pressure.thrashing_first(units, {"unit": "u-m", "bound": 1.2, "repreemption_max": 0.75, "met": False})
    assert first["objective"]["ratio"] == pytest.approx(1.6) and not first["objective"]["met"]
    assert first["objective"]["ratios"]["thrashing"] == pytest.approx(1.6) and calm == units[1]


@pytest.mark.parametrize("figures, met", [([(10, 60), None, (8, 40), (12, 70)] * 4, False),
                                          ([None] * 6 + [(4, 8)] + [None] * 9, True)])
def test_the_confirmation_misses_a_pressed_model_that_thrashes_and_skips_its_probe(monkeypatch, figures, met):
    monkeypatch.setitem(RATIOS, "clear", [0.5] * replicated.MAX_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max=0.96)

    inner, loads, order = replications.simulate_replications, [], {}

    def with_thrashing(view, spec, path, config, seeds, **kw):
        loads.append(config.load)
        sims = inner(view, spec, path, config, seeds, **kw)
        for sim, seed in zip(sims, seeds):  # each seed's figure by the order seeds first ran in
            for u in sim["units"]:
                run = figures[order.setdefault(seed, len(order))]
                u["stability"] = {**u["stability"], "preempted_requests": run[0] if run else 0,
                                  "preemptions": run[1] if run else 0}
        return sims

    monkeypatch.setattr("hetinfra.sim.replications.simulate_replications", with_thrashing)
    [model] = confirm({**VIEW, "models": [{"name": "clear", "rate_rps": 1.0}]})["models"]
    assert model["met"] is met and model["thrashing"]["met"] is met
    if not met:
        assert model["decision"] == "missed" and "cliff" not in model and set(loads) == {1.2}
    else:
        assert "cliff" in model  # the probe runs on a model the thrashing leaves met


@pytest.mark.parametrize("attainment, burst_cv", [(0.999, 1.0), (None, 2.0), (0.999, 8.0), (None, 1.0), (None, 0.5)])
def test_a_model_with_an_attainment_target_or_bursty_arrivals_is_confirmed_as_one_under_pressure(
        monkeypatch, attainment, burst_cv):
    """No KV or seat pressure, runs far inside their objective: a model whose objective has an attainment
    target, or that is verified under arrivals burstier than Poisson (burst_cv > 1), is still confirmed at
    PRESSED_CONFIDENCE, at the plan's longest run, on MAX_PRESSED seeds (runs this far inside stop there,
    under bursts too: the next test runs one near its objective on to MAX_BURST_PRESSED) (a burst lifts one run's statistic past its objective while the others sit inside: the held-out h62,
    mixtral-8x7b at attainment 0.999 under burst_cv 2, was confirmed on 6 clean runs and missed 8 of 60
    audit runs; h62b, the same at p99 without the attainment, was confirmed on 4 and missed one audit run
    in 60 by 4.6%, and its 13 confirm seeds were a calm block where the next three veto it). A Poisson (or
    smoother) model without one stops at START, as before, and its plan's method has no burst clause."""
    from hetinfra.plan.confirm import wanted
    from hetinfra.plan.fidelity import _judgement

    most = kv_pressure.MAX_PRESSED  # far inside: 13 runs settle it, bursty or not (Replicated.beyond_pressed)
    monkeypatch.setitem(RATIOS, "clear", [0.5] * kv_pressure.MAX_BURST_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max=0.5, seats=100, burst_cv=burst_cv)
    view = {**VIEW, "models": [{"name": "clear", "rate_rps": 1.0, "slo": {"attainment": attainment}}]}
    pressed = attainment is not None or burst_cv > 1
    assert kv_pressure.burst_pressed(view, "clear", burst_cv) is pressed
    judged = confirm(view)
    [model] = judged["models"]
    assert model["met"]
    assert (judged["method"] == replication_method.METHOD) is (burst_cv <= 1)
    if not pressed:
        assert model["replications"] == replicated.START and "confidence" not in _judgement(model)
        assert wanted(confirm, view, {"clear": 100}) == {"clear": 100}
    else:
        assert model["replications"] == most and confirm.most == kv_pressure.most_pressed(burst_cv)
        assert not confirm.refreshes(view, model) or burst_cv <= 1  # far inside: it keeps its block after a veto
        assert _judgement(model)["confidence"] == kv_pressure.PRESSED_CONFIDENCE
        assert wanted(confirm, {**view, "models": view["models"] + [{"name": "b", "rate_rps": 1.0}]},
                      {"clear": 100, "b": 400}) == {"clear": 400, "b": 400}
    first = list(confirm.seeds)
    confirm.fresh()  # a block of confirm seeds is the most a judgement runs: a fresh one never reuses a seed
    assert len(confirm.seeds) == len(first) == confirm.most and set(first).isdisjoint(confirm.seeds)


@settings(max_examples=60, deadline=None)
@given(burst_cv=st.floats(MIN_BURST_CV, MAX_BURST_CV), attainment=st.one_of(st.none(), st.floats(0.5, 1.0)))
def test_the_spec_presses_a_model_exactly_when_its_arrivals_are_bursty_or_it_has_an_attainment_target(
        burst_cv, attainment):
    """burst_pressed over the whole burst_cv domain: bursty arrivals (> 1) or an attainment target, nothing
    else; the method names the burst rule exactly where it applies."""
    view = {"models": [{"name": "m", "slo": {"attainment": attainment}}, {"name": "other"}]}
    assert kv_pressure.burst_pressed(view, "m", burst_cv) is (burst_cv > 1 or attainment is not None)
    assert kv_pressure.burst_pressed(view, "other", burst_cv) is (burst_cv > 1)
    assert replication_method.method(burst_cv).startswith(replication_method.METHOD)
    assert (replication_method.method(burst_cv) == replication_method.METHOD) is (burst_cv <= 1)
    most = kv_pressure.MAX_BURST_PRESSED if burst_cv > 1 else replicated.MAX_PRESSED
    assert kv_pressure.most_pressed(burst_cv) == most


@pytest.mark.parametrize("burst_cv", [1.0, 2.0])
@pytest.mark.parametrize("ratio", [0.5, 0.94, 0.97])
def test_under_bursts_a_pressed_model_near_its_objective_runs_on_and_is_judged_again_after_a_veto(
        monkeypatch, burst_cv, ratio):
    """Under bursty arrivals a model whose MAX_PRESSED-run bound is within BURST_EDGE (5%) of its objective
    runs on to MAX_BURST_PRESSED, and a veto gives it a fresh block; one further inside stops at
    MAX_PRESSED and keeps its block (every model of a 48-model bursty fleet run to 26 and judged again on
    each veto spent the work budget before its confirmation ended). Poisson arrivals: MAX_PRESSED for a
    model its attainment target presses, a fresh block after every veto, as before."""
    monkeypatch.setitem(RATIOS, "clear", [ratio] * kv_pressure.MAX_BURST_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max=0.5, seats=100, burst_cv=burst_cv)
    view = {**VIEW, "models": [{"name": "clear", "rate_rps": 1.0, "slo": {"attainment": 0.5}}]}
    [model] = confirm(view)["models"]
    near = burst_cv > 1 and model["ratio_bound"] > 1.0 - kv_pressure.BURST_EDGE
    assert model["met"] and near is (burst_cv > 1 and ratio > 0.95)
    assert model["replications"] == (kv_pressure.MAX_BURST_PRESSED if near else kv_pressure.MAX_PRESSED)
    assert confirm.refreshes(view, model) is (near or burst_cv <= 1)
    assert confirm.refreshes(view, {**model, "met": False})  # a missed model always gets a fresh block


def _run(drift: float, middle: float, last: float, stable: bool = True, tested: bool = True) -> dict:
    """One simulation of a one-unit model "m" (p90 TTFT 1 s) with the unit's stability record."""
    unit = {"unit": "u", "model": "m", "stability": {"stable": stable, "tested": tested, "drift": drift,
                                                      "ttft_ms": {"middle": middle, "last": last}},
            "kv_occupancy": {"max": 0.4}, "batch": {"max": 30, "max_num_seqs": 256}, "preemptions": 0}
    return {"models": [{"model": "m", "slo": {"ttft_ms": 1000.0, "tpot_ms": 40.0, "percentile": "p90"}}], "units": [unit]}


def test_a_unit_that_drifted_in_a_stable_run_is_under_pressure():
    """Held-out h142 (benchmarks/results/heldout65b): one TP8 replica for 6% of 32k-100k-token prompts drifted
    0.7-1.4 in the runs verification saw, all stable, was confirmed on 4 runs and was unstable in 2 of 8 other
    seeds (one audit seed missed, 'by +541.5%'). A stable run's drift past DRIFT_NEAR, by more than the
    stability floor, now presses the model: confirmed on more seeds, h142 plans $98.96/h and meets 10/10."""
    from hetinfra.plan.kv_pressure import DRIFT_NEAR, under_pressure

    assert under_pressure([_run(1.0, 1200, 1250), _run(1.406, 1319, 1855)], "m")
    assert not under_pressure([_run(1.0, 1200, 1250), _run(0.87, 1319, 1150)], "m")
    # a drift far below the objective is noise (the stability test's floor: 10% of 1 s)
    assert not under_pressure([_run(1.5 * DRIFT_NEAR, 20.0, 30.0)], "m")
    assert not under_pressure([_run(1.4, 1300, 1820, tested=False)], "m")
