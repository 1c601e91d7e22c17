"""The lumpy count (hetinfra.plan.lumpy): a model the confirmation met under KV pressure, one of whose classes holds
5% of a replica's KV cache or more in one request, is run on 200 more seeds at the promised load and is not met
where more of them miss than a model missing 1% of its runs shows."""

from __future__ import annotations

import pytest

from hetinfra.plan import kv_pressure, lumpy, replicated
from tests.plan.test_replicated import RATIOS, VIEW, _pressed_confirm, spent_at

UNIT = "clear|aws|p5.4xlarge|tp1x1|us-east-1|ondemand"


def _view(tokens: int, kv_tokens: int = 442_838, rps: float = 0.1) -> dict:
    """One model "clear" whose class "big" of ``tokens`` (input + output) goes at ``rps`` to one replica of
    ``kv_tokens`` of KV cache (held-out h81: 48,000 + 200 tokens on an H100's 442,838), beside a small class."""
    classes = [{"name": "small", "input_tokens": 250, "output_tokens": 120},
               {"name": "big", "input_tokens": tokens - 200, "output_tokens": 200}]
    return {**VIEW, "models": [{"name": "clear", "rate_rps": 1.0, "classes": classes}],
            "allocations": [{"unit": UNIT, "template": "t", "model": "clear", "count": 1, "kv_cache_tokens": kv_tokens}],
            "routing": {"clear": {"small": [{"unit": UNIT, "share": 1.0, "rps": 0.9}],
                                  "big": [{"unit": UNIT, "share": 1.0, "rps": rps}]}}}


@pytest.mark.parametrize("tokens, kv_tokens, rps, share", [
    (48_200, 442_838, 0.1, 0.1089),   # h81: nine at once
    (4_100, 25_808, 0.1, 0.1593),     # the linked fleet's m12-llama-31-8b: a 4,100-token class on one A10
    (22_160, 442_838, 0.1, 0.05),     # at the margin KV_NEAR leaves (5%)
    (20_000, 442_838, 0.1, None),     # just inside it
    (48_200, 442_838, 0.0, None),     # a class routed nowhere takes no room
])
def test_a_class_is_lumpy_where_one_request_holds_the_near_full_mark_s_margin(tokens, kv_tokens, rps, share):
    got = lumpy.lumpy(_view(tokens, kv_tokens, rps), "clear")
    assert (got and got["share"]) == share
    if share:
        assert got == {"unit": UNIT, "request_class": "big", "share": share}


def test_the_misses_allowed_are_what_a_model_missing_one_run_in_a_hundred_shows_one_time_in_twenty():
    assert lumpy.LUMPY_ALLOWED == lumpy.allowed(200, 0.01, 0.05) == 5
    assert lumpy.allowed(100, 0.01, 0.05) == 3 and lumpy.allowed(200, 0.0, 0.05) == 0


def test_the_count_stops_early_once_a_model_missing_one_run_in_twenty_would_have_shown_more():
    assert [next(n for n in range(1, 300) if lumpy.clear(k, n)) for k in range(6)] == [59, 93, 124, 153, 181, 208]


def _counted(monkeypatch, misses: set[int], tokens: int = 48_200) -> dict:
    """A confirmation of "clear" met on its 13 runs (0.5 of its objective, KV cache 96% full) whose count runs
    (the 200 seeds after them, by position) miss at ``misses``: its entry."""
    monkeypatch.setitem(RATIOS, "clear", [0.5] * replicated.MAX_PRESSED
                        + [1.5 if i in misses else 0.5 for i in range(lumpy.LUMPY_RUNS)])
    confirm = _pressed_confirm(monkeypatch, 0.96)
    [model] = confirm(_view(tokens))["models"]
    return model


def test_a_lumpy_model_whose_runs_miss_more_than_the_promise_allows_is_not_met_and_says_where(monkeypatch):
    """h81's $8.74/h plan: met on 13 clean runs, 9 of its 200 count runs cascaded; main's rule met it."""
    model = _counted(monkeypatch, {10, 20, 30, 40, 60, 70, 80, 90, 100})
    assert not model["met"] and model["decision"] == "missed" and not model["objective"]["met"]
    record = model["lumpy"]
    assert record["share"] == 0.1089 and record["request_class"] == "big" and record["load"] == 1.2
    # 4 misses in its first 60 runs (a model missing 5% of its runs shows as many), 6 in 80: past the 5 allowed
    assert len(record["missed"]) == 6 and record["runs"] == 80 and not record["met"]
    assert min(record["missed"]) >= 1000 + 3 * lumpy.LUMPY_SEEDS_FROM  # seeds no block of the purpose reaches
    assert model["replications"] == replicated.MAX_PRESSED and model["cliff"]["collapsed"] is False


@pytest.mark.parametrize("misses, runs", [
    ({17, 150}, 100),             # one miss in 100 runs: a model missing 5% shows more 96% of the time
    ({3, 85}, 140),               # the linked fleet's m31-mistral-7b: 2 in 200, the second by 100 runs
    (set(), 60),                  # none in 60 (0.95^60: 4.6%)
    ({0, 1, 2, 3, 4}, 200),       # 5, the most allowed: all 200 run
])
def test_a_lumpy_model_missing_at_the_rate_the_promise_allows_keeps_its_verdict(monkeypatch, misses, runs):
    model = _counted(monkeypatch, misses)
    record = model["lumpy"]
    assert model["met"] and record["met"] and record["runs"] == runs and len(record["missed"]) == len(misses & set(range(runs)))
    assert model["ratio_bound"] < 1.0 and record["allowed"] == lumpy.LUMPY_ALLOWED


def test_a_model_with_no_lumpy_class_is_never_counted(monkeypatch):
    model = _counted(monkeypatch, set(range(200)), tokens=1_300)
    assert model["met"] and "lumpy" not in model and model["replications"] == replicated.MAX_PRESSED


def test_a_spent_work_budget_skips_the_count_and_says_so(monkeypatch):
    """The budget stops the count before it runs: the model keeps its judgement on its 13 runs, with no ``lumpy``
    record, and the budget names the count (plan.json work_budget.stopped)."""
    stopped = spent_at(monkeypatch, lumpy.LUMPY_CUT)
    model = _counted(monkeypatch, set(range(200)))
    assert model["met"] and "lumpy" not in model and stopped == [lumpy.LUMPY_CUT]


def test_a_model_unchanged_since_its_count_keeps_it_when_judged_on_a_new_block(monkeypatch):
    """A count depends on the model's state, its run length and the load, not on the block of seeds its 13 runs
    came from: the linked 32-model fleet's two lumpy models were counted again at each of its three confirmations
    (480 more runs for the same plan, 1.24x its wall). A model that changed is counted anew."""
    monkeypatch.setitem(RATIOS, "clear", [0.5] * (3 * replicated.MAX_PRESSED + 2 * lumpy.LUMPY_RUNS))
    counts = []
    real = replicated.count
    monkeypatch.setattr(replicated, "count", lambda *a, **kw: counts.append(a[1]) or real(*a, **kw))
    confirm = _pressed_confirm(monkeypatch, 0.96)
    [first] = confirm(_view(48_200))["models"]
    confirm.fresh()  # a veto of another model: every model on its next block
    [again] = confirm(_view(48_200))["models"]
    assert again["seeds"] != first["seeds"] and again["lumpy"] == first["lumpy"] and counts == ["clear"]
    confirm.fresh()
    [changed] = confirm(_view(48_200, rps=0.2))["models"]  # more of the lumpy class on the replica
    assert counts == ["clear", "clear"] and changed["lumpy"]["runs"] == first["lumpy"]["runs"]


@pytest.mark.parametrize("kv_max, counted", [(0.5, False), (0.94, False), (0.95, True)])
def test_a_lumpy_model_pressed_by_its_spec_alone_is_counted_only_where_its_cache_came_near_full(monkeypatch, kv_max,
                                                                                                 counted):
    """Under bursty arrivals every model is pressed by the spec (kv_pressure.burst_pressed); the count looks for
    cascades, which start with a cache that fills: a lumpy model whose cache stayed under KV_NEAR in its runs has
    none to count (a generated fleet's phi-4 at most 35% full ran 60 clean count runs)."""
    monkeypatch.setitem(RATIOS, "clear", [0.5] * (kv_pressure.MAX_BURST_PRESSED + lumpy.LUMPY_RUNS))
    confirm = _pressed_confirm(monkeypatch, kv_max, burst_cv=2.0)
    [model] = confirm(_view(48_200))["models"]
    assert model["met"] and ("lumpy" in model) is counted


@pytest.mark.parametrize("share, percentile, tokens, counted", [
    (0.002, "p99", 100_000, True),    # held-out h157: 0.2% of 100k-token prompts beside chats, p99
    (0.002, "p99", 32_000, True),     # h157m: the same at 32k
    (0.002, "p99", 4_000, False),     # not heavy: 16x the chats' prompt
    (0.02, "p99", 100_000, False),    # past the p99's 1% tail: it is judged at its bounds
    (0.02, "p90", 100_000, False),    # inside p90's tail but 400 a run: not rare (the shares judge it)
    (0.002, "mean", 100_000, False),  # a mean lets no class miss
])
def test_a_rare_heavy_class_is_counted_as_a_lumpy_one(share, percentile, tokens, counted):
    """A class within its percentile's tail, at most RARE_REQUESTS of it in a default run, each prompt at
    least HEAVY_INPUT x the others': whether a run's percentile holds turns on a handful of its requests,
    so the confirmation counts the model (hetinfra.plan.lumpy.rare_heavy)."""
    view = _view(tokens + 200)
    view["models"][0]["classes"][0]["share"], view["models"][0]["classes"][1]["share"] = 1 - share, share
    view["models"][0]["slo"] = {"percentile": percentile, "attainment": None}
    got = lumpy.rare_heavy(view, "clear")
    assert (got is not None) is counted
    if counted:
        assert got["unit"] == UNIT and got["request_class"] == "big" and 0 < got["share"] < 1
