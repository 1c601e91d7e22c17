"""The boundaries of issue 36: benchmark result files (`profile-import`), template-cache entries
and demand logs, each with any node replaced by any JSON value, truncated, nested 100,000 deep, or
a FIFO; and pairs of files that do not belong together.

Properties: `profile-import` ends with a documented exit code and no traceback, and every row it
writes is finite; a cache entry is either a typed hit or a miss (never an exception, never a hang);
a demand log either reads, with every kept time inside the sane window, or is one InvalidInputError.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from tests.fuzz.conftest import assert_clean_exit, budget
from tests.fuzz.test_fuzz_files import VALUES, paths_of
from tests.fuzz.test_fuzz_spec import mutate
from tests.perf.test_bench_import import result

REPO = Path(__file__).resolve().parents[2]
DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE_VALUES = st.one_of(VALUES, st.just(float("nan")), st.just(1e308), st.just(-1), st.just([[1], [2]]),
                           st.just(["1e3"]), st.just(True), st.just("inf"), st.just([10 ** 30]))


@st.composite
def hostile_json(draw, doc: dict) -> str:
    """``doc`` as text, with one node replaced, or cut short, or something else entirely."""
    how = draw(st.sampled_from(["node", "node", "node", "truncate", "other"]))
    text = json.dumps(doc)
    if how == "truncate":
        return text[:draw(st.integers(0, len(text) - 1))]
    if how == "other":
        return draw(st.sampled_from([DEEP, '{"a":' * 5000 + "1" + "}" * 5000, "", "null", "NaN", "\x00", "1" * 5000]))
    path = draw(st.sampled_from(paths_of(doc)))
    return json.dumps(mutate(doc, path, draw(HOSTILE_VALUES)) if path else draw(HOSTILE_VALUES))


@budget(60)
@given(st.data())
def test_profile_import_of_hostile_result_files(tmp_path_factory, run_cli, data):
    d = tmp_path_factory.mktemp("bench")
    good = d / "r2.json"
    good.write_text(json.dumps(result(2, 300, 150)))
    bad = d / "r1.json"
    bad.write_text(data.draw(hostile_json(result(1, 300, 40))))
    out = d / "profile.csv"
    code, stdout, err = run_cli("profile-import", str(bad), str(good), "--gpu", "L4", "--tp", "1", "--ttft-ms",
                                "2000", "--tpot-ms", "100", "--out", str(out))
    assert_clean_exit(code, stdout, err)
    if code == 0:
        from hetinfra.perf.profiles import load_profiles

        assert all(math.isfinite(r.max_rps) and r.input_tokens >= 1 for r in load_profiles(out))


def test_profile_import_of_a_fifo_does_not_hang(tmp_path, run_cli):
    fifo = tmp_path / "r1.json"
    os.mkfifo(fifo)
    code, stdout, err = run_cli("profile-import", str(fifo), "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                                "--tpot-ms", "100", "--out", str(tmp_path / "p.csv"))
    assert code == 2 and "not a regular file" in err


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A model's template library and the inputs that key it (tests/plan/test_template_cache's spec)."""
    import yaml

    from hetinfra.perf.model import PerformanceModel
    from hetinfra.plan.inputs import resolve
    from hetinfra.plan.template_cache import _encode
    from hetinfra.plan.templates import build_library
    from hetinfra.spec.load import load_spec
    from tests.solver.test_mixed_pipelines import _spec

    d = tmp_path_factory.mktemp("cache")
    path = d / "service.yaml"
    path.write_text(yaml.safe_dump(_spec(d, mixed=True), sort_keys=False))
    spec, text, locate = load_spec(path)
    inputs = resolve(spec, path, text, None, locate)
    lib = build_library(inputs, inputs.models[0], PerformanceModel(inputs.profiles))
    return inputs, lib, _encode(lib)


@budget(80)
@given(st.data())
def test_a_hostile_cache_entry_is_a_typed_hit_or_a_miss(tmp_path_factory, cached, data):
    from hetinfra.plan.template_cache import TemplateCache

    inputs, lib, doc = cached
    cache = TemplateCache(tmp_path_factory.mktemp("c"))
    entry = cache._path(inputs, inputs.models[0])
    entry.parent.mkdir(parents=True)
    entry.write_text(data.draw(hostile_json(doc)))
    got = cache.get(inputs, inputs.models[0])  # never raises
    if got is not None:  # an edit that kept every type: the library is what the entry says, typed
        for t in got.templates:
            assert isinstance(t.gpus_per_instance, int) and t.gpus_per_instance >= 1
            assert all(isinstance(r, float) and math.isfinite(r) and r >= 0 for r in t.rates.values())


def test_a_cache_entry_that_is_a_fifo_is_a_miss_not_a_hang(tmp_path, cached):
    from hetinfra.plan.template_cache import TemplateCache

    inputs, _, _ = cached
    cache = TemplateCache(tmp_path)
    entry = cache._path(inputs, inputs.models[0])
    entry.parent.mkdir(parents=True)
    os.mkfifo(entry)
    assert cache.get(inputs, inputs.models[0]) is None and cache.misses == [inputs.models[0].spec.name]


STAMPS = st.one_of(st.floats(-1e12, 1e12, allow_nan=False).map(repr), st.integers(-10, 10 ** 11).map(str),
                   st.builds(lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}T00:00:00Z", st.integers(1, 9999),
                             st.integers(1, 12), st.integers(1, 28)),
                   st.sampled_from(["2026-09-21T10:00:00+14:00", "2026-09-21 10:00", "nan", "inf", "", "1e999"]))
NOW = 1_790_000_000.0


@budget(80)
@given(st.lists(STAMPS, min_size=1, max_size=6))
def test_demand_logs_with_any_stamps(tmp_path_factory, stamps):
    from hetinfra.replan.demand_log import AHEAD_S, EARLIEST_S, read_demand_log

    path = tmp_path_factory.mktemp("d") / "demand.csv"
    path.write_text("timestamp,model,input_tokens,output_tokens,region\n"
                    + "".join(f"{s},m,10,10,us-east-1\n" for s in stamps))
    try:
        log = read_demand_log(path, clock=lambda: NOW)
    except InvalidInputError as exc:
        assert str(path) in exc.message and len(str(exc).splitlines()) <= 2
        return
    assert all(EARLIEST_S <= t <= NOW + AHEAD_S for t in log.timestamps.tolist())


def test_pairs_a_demand_log_of_another_service_plans_the_declared_demand(tmp_path):
    """A log whose models and regions the spec does not have: noted and ignored, never an error."""
    from hetinfra.replan.demand_log import apply_to_spec, observe_spec, read_demand_log
    from hetinfra.spec.load import load_spec

    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    path = tmp_path / "demand.csv"
    path.write_text("timestamp,model,input_tokens,output_tokens,region\n"
                    + "".join(f"{NOW - k},other-model,10,10,mars-1\n" for k in range(50)))
    observed, notes = observe_spec(read_demand_log(path, clock=lambda: NOW), spec)
    assert observed == {} and any("other-model" in n for n in notes)
    new_spec, _ = apply_to_spec(spec, observed)
    assert new_spec == spec


def test_pairs_a_state_of_another_plan_is_a_clear_status(tmp_path, run_cli):
    """plan.json of one service beside the state.json of another: `status --json` ends cleanly."""
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-verify",
                           "--no-baselines")
    assert code == 0, err
    state = {"state_version": 1, "service": "someone-else", "allocations": [], "endpoints": {}, "pulumi": {},
             "skypilot": {}, "operation": None, "plan_sha256": "0" * 64}
    (out / "state.json").write_text(json.dumps(state))
    code, stdout, err = run_cli("status", str(out), "--json")
    assert_clean_exit(code, stdout, err, as_json=True)
