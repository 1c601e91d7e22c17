"""hetinfra.plan.kv_pressure.thrashing: a bound on a pressed model's KV thrashing over its replications,
and the confirmation that judges it (hetinfra.plan.replicated._judge_pressed)."""

from __future__ import annotations

import pytest

from hetinfra.plan import kv_pressure, replicated
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


@pytest.mark.parametrize("attainment", [0.999, None])
def test_a_model_with_an_attainment_target_is_confirmed_as_one_under_pressure(monkeypatch, attainment):
    """No KV or seat pressure, runs far inside their objective: a model whose objective has an attainment
    target is still confirmed on MAX_PRESSED seeds at PRESSED_CONFIDENCE, at the plan's longest run (a
    burst puts one run's misses past the target while the others attain 1.0: the held-out h62, mixtral-8x7b
    at attainment 0.999 under burst_cv 2, was confirmed on 6 clean runs and missed 8 of 60 audit runs);
    without one it stops at START, as before."""
    from hetinfra.plan.confirm import wanted
    from hetinfra.plan.fidelity import _judgement

    monkeypatch.setitem(RATIOS, "clear", [0.5] * replicated.MAX_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max=0.5, seats=100)
    view = {**VIEW, "models": [{"name": "clear", "rate_rps": 1.0, "slo": {"attainment": attainment}}]}
    assert kv_pressure.attainment_pressed(view, "clear") is (attainment is not None)
    [model] = confirm(view)["models"]
    assert model["met"]
    if attainment is None:
        assert model["replications"] == replicated.START and "confidence" not in _judgement(model)
        assert wanted(confirm, view, {"clear": 100}) == {"clear": 100}
    else:
        assert model["replications"] == replicated.MAX_PRESSED
        assert _judgement(model)["confidence"] == kv_pressure.PRESSED_CONFIDENCE
        assert wanted(confirm, {**view, "models": view["models"] + [{"name": "b", "rate_rps": 1.0}]},
                      {"clear": 100, "b": 400}) == {"clear": 400, "b": 400}
