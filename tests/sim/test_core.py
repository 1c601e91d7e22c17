"""The compiled replica loop (hetinfra/sim/_core.c) gives the Python reference's results bit for bit:
every request's first and last token times, replica and preemptions, and every replica's statistics,
on drawn units (sizes, arrival rates, replicas, KV caches small enough to preempt, batch limits,
block sizes; dense, MoE, pipeline-parallel, mixed-pipeline and profile-scaled engines)."""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import get_model
from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import CALIBRATION
from hetinfra.perf.estimator import build_engine
from hetinfra.perf.pipeline import pipeline_engine
from hetinfra.sim import core
from hetinfra.sim.replica import Replica, ReplicaConfig, Request, ScaledEngine, run_replicas

STATS = core.STATS


def _engines() -> dict:
    dense = build_engine(get_model("llama-3.1-8b"), get_gpu("L40S"), 1, 1, 1000, 300, "bf16", 0.9, 256, None, None,
                         CALIBRATION)
    moe = build_engine(get_model("mixtral-8x7b"), get_gpu("H100"), 2, 1, 1000, 300, "bf16", 0.9, 256, None, None,
                       CALIBRATION)
    pp2 = build_engine(get_model("llama-3.1-70b"), get_gpu("A100-80GB"), 2, 2, 2000, 300, "bf16", 0.9, 256, None, None,
                       CALIBRATION)
    mixed = pipeline_engine(get_model("llama-3.1-70b"), [get_gpu("H100"), get_gpu("A100-80GB")], [44, 36], tp=2,
                            input_tokens=2000, output_tokens=300)
    return {"dense": dense, "moe": moe, "pp2": pp2, "mixed": mixed, "scaled": ScaledEngine(dense, 1.37)}


ENGINES = _engines()


def _shrunk(engine, kv_tokens: float):
    """``engine`` with a KV cache of ``kv_tokens`` (small ones force preemptions)."""
    out = copy.copy(engine)
    if isinstance(out, ScaledEngine):
        out.engine = copy.copy(out.engine)
        out.engine.kv_tokens = out.kv_tokens = kv_tokens
    else:
        out.kv_tokens = kv_tokens
    return out


@st.composite
def units(draw):
    name = draw(st.sampled_from(sorted(ENGINES)))
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 250))
    rate = draw(st.floats(0.5, 200.0))
    max_prompt = draw(st.sampled_from([8, 200, 3000]))
    max_output = draw(st.sampled_from([1, 2, 40, 600]))
    config = ReplicaConfig(max_num_seqs=draw(st.sampled_from([1, 4, 64, 256])), block_size=draw(st.sampled_from([1, 16, 32])))
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate) if rng.random() > 0.2 else 0.0  # some simultaneous arrivals
        reqs.append((i, t, rng.randint(1, max_prompt), rng.randint(1, max_output)))
    need = max(p + o for _, _, p, o in reqs)
    engine = ENGINES[name]
    if draw(st.booleans()):  # just big enough for the largest request: preemptions
        engine = _shrunk(engine, float(-(-need // config.block_size) * config.block_size * draw(st.integers(1, 4))))
    return engine, config, draw(st.integers(1, 4)), reqs


def _python(engine, config, k, reqs):
    """The reference: replica.run_replicas, the Python loop."""
    replicas = [Replica(engine, config) for _ in range(k)]
    objs = [Request(*r) for r in reqs]
    run_replicas(replicas, objs)
    return replicas, objs


@pytest.mark.skipif(not core.available(), reason="the compiled core is not built")
@settings(max_examples=60, deadline=None)
@given(unit=units())
def test_the_core_gives_the_python_loops_results_bit_for_bit(unit):
    engine, config, k, reqs = unit
    ref_replicas, ref = _python(engine, config, k, reqs)
    replicas = [Replica(engine, config) for _ in range(k)]
    first, finish, replica, preempted = core.run_arrays(replicas, [r[1] for r in reqs], [r[2] for r in reqs],
                                                        [r[3] for r in reqs])
    assert first.tolist() == [r.first for r in ref]
    assert finish.tolist() == [r.finish for r in ref]
    assert replica.tolist() == [r.replica for r in ref]
    assert preempted.tolist() == [r.preempted for r in ref]
    for mine, theirs in zip(replicas, ref_replicas):
        assert {s: getattr(mine, s) for s in STATS} == {s: getattr(theirs, s) for s in STATS}
        assert 1 <= mine.seq_max <= config.max_num_seqs or mine.steps == 0  # the seats a window ran, capped
    assert all(math.isfinite(x) for x in finish.tolist())


@pytest.mark.parametrize("gap_s, full", [(0.0, True), (1.0, False)])
def test_seq_max_is_the_most_sequences_a_window_ran(gap_s, full):
    """40 requests at once on 8 seats fill them (the seat cliff, hetinfra.plan.kv_pressure.SEATS_NEAR);
    one a second never runs two at once."""
    config = ReplicaConfig(max_num_seqs=8, block_size=16)
    reqs = [Request(i, i * gap_s, 100, 20) for i in range(40)]
    [replica] = [Replica(ENGINES["dense"], config)]
    run_replicas([replica], reqs)
    assert replica.seq_max == (8 if full else 1)


def test_the_core_is_built_here():
    """CI builds it (setup.py); without it verification falls back to the Python loop, 5-10x slower."""
    assert core._run_core is not None and core.available()


def test_a_step_model_the_core_does_not_know_runs_in_python():
    class Const:
        kv_tokens, mbt, pp = 1e6, 2048, 1

        def step_s(self, *args):
            return 0.01

    replicas = [Replica(Const())]
    assert core.run_arrays(replicas, np.array([0.0, 0.1]), np.array([10, 10]), np.array([5, 5])) is None
    reqs = [Request(0, 0.0, 10, 5), Request(1, 0.1, 10, 5)]
    run_replicas([Replica(Const())], reqs)
    assert all(r.finish > r.first > r.arrival - 1e-12 for r in reqs)


@pytest.mark.skipif(not core.available(), reason="the compiled core is not built")
def test_a_request_larger_than_the_kv_cache_is_the_same_error():
    engine = _shrunk(ENGINES["dense"], 160.0)
    with pytest.raises(InvalidInputError, match="needs more KV cache than one engine holds"):
        core.run_arrays([Replica(engine)], np.array([0.0, 1.0]), np.array([10, 150]), np.array([5, 20]))


@st.composite
def size_rules(draw):
    from hetinfra.sim.workload import SizeRule

    side = st.tuples(st.integers(1, 5000), st.sampled_from([0, 1, 2, 7, 1000, 2**31 + 5]))
    if draw(st.booleans()):
        rows = draw(st.lists(st.tuples(st.integers(1, 9000), st.integers(1, 9000)), min_size=1, max_size=40))
        return SizeRule(rows=tuple(rows))
    return SizeRule(draw(side), draw(side))


@pytest.mark.skipif(not core.available(), reason="the compiled core is not built")
@settings(max_examples=60, deadline=None)
@given(rules=st.lists(size_rules(), min_size=1, max_size=5), shares=st.lists(st.floats(0.0, 3.0), min_size=5, max_size=5),
       origins=st.booleans(), seed=st.text(max_size=12), n=st.integers(1, 400))
def test_the_cores_sampler_draws_the_python_loops_requests(rules, shares, origins, seed, n):
    """core.sample and draw._sample's Python loop: the same classes, sizes and uniforms from the
    same random.Random (Python's Mersenne Twister, restated in C)."""
    from bisect import bisect_right

    shares = shares[:len(rules)]
    shares[0] = shares[0] or 1.0
    cum = [math.fsum(shares[:k + 1]) for k in range(len(shares))]
    got = core.sample(random.Random(seed), n, cum, rules, origins)
    rng, ref = random.Random(seed), []
    for _ in range(n):
        k = min(bisect_right(cum, rng.random() * cum[-1]), len(cum) - 1)
        i, o = rules[k].draw(rng)
        ref.append((k, i, o, rng.random() if origins else None, rng.random()))
    cls, prompt, output, where, pick = got
    assert list(zip(cls.tolist(), prompt.tolist(), output.tolist(), where.tolist() if origins else [None] * n,
                    pick.tolist())) == ref


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_broken_step_model_is_the_same_clear_error_in_both_loops(bad, monkeypatch):
    """A step of no positive finite duration would stall or run away the clock: both loops refuse it."""
    engine = copy.copy(ENGINES["dense"])
    engine.fixed, engine.per_seq, engine.per_req, engine.w_gpu, engine.c_dlin, engine.c_plin = bad, 0.0, 0.0, 0.0, 0.0, 0.0
    engine.ar_lat = engine.ar_tok = engine.p2p_lat = engine.p2p_tok = engine.kv_tok_bw = engine.c_dattn = engine.c_pattn = 0.0
    reqs = [(0, 0.0, 10, 5), (1, 0.5, 10, 5)]
    with pytest.raises(InvalidInputError, match="non-positive or non-finite") as python:
        _python(engine, ReplicaConfig(), 1, reqs)
    if core.available():
        with pytest.raises(InvalidInputError, match="non-positive or non-finite") as compiled:
            core.run_arrays([Replica(engine)], np.array([0.0, 0.5]), np.array([10, 10]), np.array([5, 5]))
        assert str(compiled.value) == str(python.value)


_FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e290, max_value=1e290)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_FINITE, st.floats(0, 1e4, allow_nan=False), st.sampled_from([0.0, -0.0, 1e-16, 1.0, 1e16])),
                max_size=400))
def test_the_cores_fsum_is_math_fsum(values):
    """The exact sum correctly rounded: the same double as math.fsum (including the half-even fix-up
    across partials, and the sum of nothing)."""
    try:
        want = math.fsum(values)
    except OverflowError:  # intermediate overflow: the core hands such sums back to math.fsum
        with pytest.raises(OverflowError):
            core.fsum(np.array(values, dtype=float))
        return
    got = core.fsum(np.array(values, dtype=float))
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want) or got == want == 0.0


def test_fsum_of_values_that_are_not_finite_is_math_fsums():
    assert core.fsum(np.array([1.0, math.inf])) == math.inf
    assert math.isnan(core.fsum(np.array([1.0, math.nan])))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e3, allow_nan=False), max_size=300))
def test_a_summary_of_sorted_columns_is_summarize(values):
    from hetinfra.sim.stats import summarize

    column = summarize(np.sort(np.array(values, dtype=float)), presorted=True, total=core.fsum)
    assert column == summarize(values) and all(type(v) in (int, float) or v is None for v in column.values())


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 3000))
def test_the_cores_arrival_gaps_are_the_python_loops(seed, n):
    from hetinfra.sim.workload import model_rng

    rng, ref = model_rng(seed, "m", "arrivals"), model_rng(seed, "m", "arrivals")
    before = rng.getstate()
    got = core.exp_gaps(rng, n)
    assert np.array_equal(got, np.array([-math.log(1.0 - ref.random()) for _ in range(n)]))
    assert rng.getstate() == before  # each model's arrivals have a generator of their own


def test_a_build_of_other_stats_is_not_used(monkeypatch):
    """An in-place build from before a stat was added refused every unit's buffer (a traceback): a build
    whose NSTATS is not len(STATS) is taken as not built, and the Python loop runs."""
    import importlib

    from hetinfra.sim import _core

    assert _core.NSTATS == len(core.STATS)
    monkeypatch.setattr(_core, "NSTATS", len(core.STATS) - 1)
    try:
        assert not importlib.reload(core).available()
    finally:
        monkeypatch.undo()
        importlib.reload(core)
    assert core.available()
