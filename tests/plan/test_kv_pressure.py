"""hetinfra.plan.kv_pressure.thrashing: a bound on a pressed model's KV thrashing over its replications,
and the confirmation that judges it (hetinfra.plan.replicated._judge_pressed)."""

from __future__ import annotations

import pytest

from hetinfra.plan import kv_pressure, replicated
from hetinfra.sim import replications
from hetinfra.sim.stability import REPREEMPTION_MAX
from tests.plan.test_replicated import RATIOS, VIEW, _pressed_confirm

#: o13-phi-4's A100 on its 10 audit seeds (bench_scale.py --mix other --seed 1, linked): None = no preemption
O13 = [0.3462, 0.4286, None, 0.6078, 0.8919, 0.4423, 0.6316, 0.7629, 0.4, 0.0]


def _sims(figures: list, unit: str = "u-m", model: str = "m") -> list[dict]:
    return [{"units": [{"unit": unit, "model": model, "count": 100, "stability": {"repreemption": f}},
                       {"unit": "calm", "model": model, "count": 100, "stability": {"repreemption": None}}]}
            for f in figures]


@pytest.mark.parametrize("figures, met", [
    (O13[:2] + O13[3:4] + O13[5:7] + O13[8:], False),  # its clean runs alone: a flag is one run away
    ([None] * 12 + [0.5], True),                        # services/batch.yaml's kind: isolated preemptions
    ([None] * 13, None),                                # never preempted: no record
])
def test_a_bound_on_the_next_runs_re_preemption_sees_what_the_flags_are_too_rare_to(figures, met):
    record = kv_pressure.thrashing(_sims(figures), "m", 0.99)
    if met is None:
        assert record is None
        return
    assert record["unit"] == "u-m" and record["repreemption_max"] == REPREEMPTION_MAX and record["met"] is met
    assert (record["bound"] <= REPREEMPTION_MAX) is met


def test_the_thrashing_unit_reads_as_the_worst_for_the_padding():
    units = [{"unit": "u-m", "objective": {"met": True, "ratio": 0.4, "ratios": {"tpot": 0.4}}},
             {"unit": "calm", "objective": {"met": True, "ratio": 0.9, "ratios": {"tpot": 0.9}}}]
    first, calm = kv_pressure.thrashing_first(units, {"unit": "u-m", "bound": 1.2, "repreemption_max": 0.75, "met": False})
    assert first["objective"]["ratio"] == pytest.approx(1.6) and not first["objective"]["met"]
    assert first["objective"]["ratios"]["thrashing"] == pytest.approx(1.6) and calm == units[1]


@pytest.mark.parametrize("figures, met", [([0.6, 0.0, 0.5, 0.7] * 4, False), ([0.0] * 6 + [0.5] + [0.0] * 9, True)])
def test_the_confirmation_misses_a_pressed_model_that_thrashes_and_skips_its_probe(monkeypatch, figures, met):
    monkeypatch.setitem(RATIOS, "clear", [0.5] * replicated.MAX_PRESSED)
    confirm = _pressed_confirm(monkeypatch, kv_max=0.96)

    inner, loads, order = replications.simulate_replications, [], {}

    def with_thrashing(view, spec, path, config, seeds, **kw):
        loads.append(config.load)
        sims = inner(view, spec, path, config, seeds, **kw)
        for sim, seed in zip(sims, seeds):  # each seed's figure by the order seeds first ran in
            for u in sim["units"]:
                u["stability"] = {**u["stability"], "repreemption": figures[order.setdefault(seed, len(order))]}
        return sims

    monkeypatch.setattr("hetinfra.sim.replications.simulate_replications", with_thrashing)
    [model] = confirm({**VIEW, "models": [{"name": "clear", "rate_rps": 1.0}]})["models"]
    assert model["met"] is met and model["thrashing"]["met"] is met
    if not met:
        assert model["decision"] == "missed" and "cliff" not in model and set(loads) == {1.2}
    else:
        assert "cliff" in model  # the probe runs on a model the thrashing leaves met
