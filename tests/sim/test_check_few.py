"""simulate --check does not take an objective as met on fewer measured requests than its percentile
needs to have one request beyond it (check.too_few_lines: 100 for p99, 20 for p95, 2 for p50, 1 for
the mean). A plan simulated at --requests 5 said 'objectives met' and exited 0."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.sim.check import OBJECTIVES_MISSED, too_few_lines

NEED = {"p99": 100, "p95": 20, "p90": 10, "p50": 2, "mean": 1}


@given(st.sampled_from(sorted(NEED)), st.integers(0, 300), st.booleans())
def test_a_met_model_is_flagged_exactly_below_its_percentiles_need(pct, count, met):
    doc = {"models": [{"model": "m", "slo": {"percentile": pct}, "count": count, "met": met}]}
    assert bool(too_few_lines(doc)) == (met and count < NEED[pct])


@pytest.fixture(scope="module")
def chat_plan(example_plans):
    return example_plans["chat"][0]


def test_check_exits_12_on_a_run_too_short_for_its_percentile(chat_plan, tmp_path, run_cli):
    code, out, err = run_cli("simulate", str(chat_plan), "--check", "--requests", "20", "--out", str(tmp_path))
    assert code == OBJECTIVES_MISSED, out + err
    assert "fewer than the 100 it takes" in err and "not shown met (too few requests)" in err


def test_simulate_replications_judge_with_the_runs_batch_means(chat_plan):
    """`simulate --replications` judges as verification does: each run carries its batch means, so a
    model's spread between runs is floored by them (hetinfra.sim.batches.run_spread); a single run
    carries none (simulation.json unchanged)."""
    from hetinfra.sim.check import simulate_file
    from hetinfra.sim.workload import WorkloadConfig

    judged = simulate_file(chat_plan, None, WorkloadConfig(requests=3000, seed=5), replications=2)
    assert judged["replications"] == 2 and all(m.get("batches") for m in judged["models"])
    single = simulate_file(chat_plan, None, WorkloadConfig(requests=3000, seed=5))
    assert all("batches" not in m for m in single["models"] + single["units"])
