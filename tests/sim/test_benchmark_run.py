"""A published run replayed on the simulator (hetinfra.sim.benchmark_run): its benchmark's procedure
(a burst timed to the last reply; MLPerf's server scenario under p99 limits), its scheduler and its
data set's sizes."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from hetinfra.perf.calibration import CALIBRATION
from hetinfra.sim.benchmark_run import _run, burst_rate, request_sizes, server_run, simulated_rate
from hetinfra.perf.published import MLPERF, VLLM_BLOG, size_table

SERVER, OFFLINE, BLOG_8B = MLPERF[0], MLPERF[2], VLLM_BLOG[0]


def test_the_replay_draws_the_data_sets_samples_at_the_runs_output_mean():
    """MLPerf's OpenOrca samples (the published per-sample lengths: 24,576, input mean 222.3, median 152,
    max 1021): inputs as drawn, outputs scaled to the run's tokens per sample."""
    table = size_table("openorca")
    assert len(table) == 24576 and max(a for a, _ in table) == 1021
    assert statistics.mean(a for a, _ in table) == pytest.approx(222.33, abs=0.01)
    drawn = request_sizes(SERVER, 20000)
    assert statistics.median(a for a, _ in drawn) == pytest.approx(152, rel=0.05)
    assert statistics.mean(o for _, o in drawn) == pytest.approx(SERVER.osl, rel=0.03)
    assert max(o for _, o in drawn) <= 1024 and len({o for _, o in drawn}) > 100
    assert request_sizes(BLOG_8B, 3) == [(202, 179)] * 3  # only the means are published


def test_a_burst_is_timed_to_its_last_reply():
    """One request alone: the rate is one over its latency; a burst of 500 batches them (many times that)."""
    one = dataclasses.replace(BLOG_8B, requests=1)
    served = _run(one, CALIBRATION, [0.0])
    assert burst_rate(one) == pytest.approx(1.0 / served.finish[0])
    assert burst_rate(BLOG_8B) > 20 * burst_rate(one)


def test_the_server_scenario_fails_past_the_engines_capacity_and_holds_below():
    ok_low, rate_low = server_run(SERVER, 0.5 * SERVER.rate)
    ok_high, _ = server_run(SERVER, 2.0 * SERVER.rate)
    assert ok_low and not ok_high
    assert rate_low < 0.5 * SERVER.rate  # completed: the drain after the last arrival counts


def test_the_replay_is_deterministic_and_follows_the_step_model():
    """Same input, same figure (a calibration equal to the shipped one but not it: not the cache); a
    GPU whose decode is made 1.6x faster replays faster."""
    same = dataclasses.replace(CALIBRATION)
    assert simulated_rate(OFFLINE, same) == simulated_rate(OFFLINE, same) == simulated_rate(OFFLINE)
    fast = dataclasses.replace(CALIBRATION, by_gpu=tuple(
        (g, tuple((k, v * 1.6 if k in ("mfu_decode", "eta_bw", "eta_kv") else v) for k, v in vals))
        for g, vals in CALIBRATION.by_gpu))
    assert simulated_rate(BLOG_8B, fast) > 1.1 * simulated_rate(BLOG_8B)
