"""A published run replayed on the simulator (hetinfra.sim.benchmark_run): its benchmark's procedure
(a burst timed to the last reply; MLPerf's server scenario under p99 limits), its scheduler and its
data set's sizes."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from hetinfra.perf.calibration import CALIBRATION, CALIBRATIONS
from hetinfra.sim.benchmark_run import _run, burst_rate, multi_step_outputs, request_sizes, server_run, simulated_rate
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
    means_only = dataclasses.replace(BLOG_8B, sizes="", sampler="loadgen", draws=1, scheduler_steps=1)
    assert request_sizes(means_only, 3) == [(202, 179)] * 3  # no lengths: every request at the means


def test_the_blog_replay_samples_sharegpt_first_turns_at_the_posts_means():
    """vLLM's benchmark_serving.py: ShareGPT's first turns under its filter (the vendored table), a sample
    without replacement, scaled to the post's 202 / 179 mean tokens; another seed, another sample."""
    table = size_table("sharegpt")
    assert len(table) == 5316
    assert all(4 <= a <= 1024 and b >= 4 and a + b <= 2048 for a, b in table)
    everyone = request_sizes(BLOG_8B, len(table))  # without replacement: each sample once
    assert statistics.mean(a for a, _ in everyone) == pytest.approx(BLOG_8B.isl, rel=0.01)
    assert statistics.mean(o for _, o in everyone) == pytest.approx(BLOG_8B.osl, rel=0.01)
    drawn = request_sizes(BLOG_8B, 500)
    assert statistics.median(a for a, _ in drawn) < 0.6 * BLOG_8B.isl  # ShareGPT's prompts: a long tail
    assert min(min(a, o) for a, o in drawn) >= 4 and drawn != request_sizes(BLOG_8B, 500, seed=1)
    with pytest.raises(ValueError):
        request_sizes(BLOG_8B, len(table) + 1)  # a sample, not draws with replacement


def test_multi_step_decoding_holds_a_slot_to_the_end_of_its_batch():
    """--num-scheduler-steps 10: a request's decode steps come in batches of 10, so it holds its slot for
    1 + 10 * ceil((output - 1) / 10) tokens; one step at a time, for its output."""
    outs = list(range(1, 60))
    padded = multi_step_outputs(outs, 10)
    assert all((p - 1) % 10 == 0 and o <= p < o + 10 for o, p in zip(outs[1:], padded[1:]))
    assert padded[0] == 1 and multi_step_outputs(outs, 1) == outs
    one = dataclasses.replace(BLOG_8B, requests=1, sizes="", draws=1, osl=12)
    flat = dataclasses.replace(CALIBRATIONS["0.6"], multi_step_share=0.0)  # the padding alone, no CPU spread
    assert burst_rate(one, flat) == pytest.approx(burst_rate(dataclasses.replace(one, osl=21, scheduler_steps=1), flat))
    assert burst_rate(one, flat) < burst_rate(dataclasses.replace(one, scheduler_steps=1), flat)
    with pytest.raises(ValueError, match="V0 bursts only"):
        dataclasses.replace(SERVER, scheduler_steps=10)


def test_a_burst_is_timed_to_its_last_reply():
    """One request alone: the rate is one over its latency; a burst of 500 batches them (many times that)."""
    one = dataclasses.replace(BLOG_8B, requests=1, draws=1)
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
