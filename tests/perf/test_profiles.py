"""Profile rows: which row applies to a request class under an SLO."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.perf.profiles import ProfileRow, ProfileTable, parse_profiles_csv

CSV = """model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps
llama,L4,1,1,100,100,900,100,10
llama,L4,1,1,100,100,500,50,6
llama,L4,1,1,100,100,1000,100,12
llama,L4,1,1,1000,1000,1000,100,2
llama,L4,1,1,100,1000,1000,100,4
llama,H100,2,1,100,100,1000,100,50
"""


@pytest.fixture
def table():
    return ProfileTable(parse_profiles_csv(CSV, "p.csv"))


def test_smallest_bucket_then_highest_rate(table):
    row = table.lookup(("llama",), "L4", 1, 1, 80, 90, 1000, 100)
    assert (row.max_rps, row.origin) == (12, "p.csv:4")


def test_larger_request_uses_larger_bucket(table):
    assert table.lookup(("llama",), "L4", 1, 1, 80, 500, 1000, 100).max_rps == 4
    assert table.lookup(("llama",), "L4", 1, 1, 500, 500, 1000, 100).max_rps == 2
    assert table.lookup(("llama",), "L4", 1, 1, 5000, 10, 1000, 100) is None


def test_slo_must_be_equal_or_stricter(table):
    # a spec stricter than every row's SLO gets nothing; a looser one may use any stricter row
    assert table.lookup(("llama",), "L4", 1, 1, 50, 50, 400, 100) is None
    assert table.lookup(("llama",), "L4", 1, 1, 50, 50, 600, 60).max_rps == 6
    assert table.lookup(("llama",), "L4", 1, 1, 50, 50, 5000, 500).max_rps == 12


def test_layout_and_gpu_must_match(table):
    assert table.lookup(("llama",), "H100", 1, 1, 50, 50, 1000, 100) is None
    assert table.lookup(("llama",), "h100", 2, 1, 50, 50, 1000, 100).max_rps == 50
    assert table.lookup(("other", "llama"), "L4", 1, 1, 50, 50, 1000, 100).max_rps == 12


def test_bad_rows_are_located():
    with pytest.raises(InvalidInputError, match=r"p.csv:2: column .tp. is .one., not a number"):
        parse_profiles_csv("model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\n"
                           "llama,L4,one,1,100,100,1000,100,10\n", "p.csv")


def test_statistic_and_vllm_version_columns_are_optional_and_rank_statistics():
    from hetinfra.perf.profiles import parse_profiles_csv, weaker_statistic

    old = "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\nm,L4,1,1,100,100,2000,100,3\n"
    [row] = parse_profiles_csv(old, "old.csv")
    assert row.statistic is None and row.vllm_version is None
    assert weaker_statistic(row, "p99") and not weaker_statistic(row, "mean")
    new = old.replace("max_rps\n", "max_rps,statistic,vllm_version\n").replace(",3\n", ",3,p99,0.12.0\n")
    [row] = parse_profiles_csv(new, "new.csv")
    assert (row.statistic, row.vllm_version) == ("p99", "0.12.0")
    assert not weaker_statistic(row, "p99") and not weaker_statistic(row, "p90")


PROFILE_HEADER = "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps,statistic,vllm_version"


def _profile_row(statistic: str, version: str) -> str:
    return f"{PROFILE_HEADER}\nllama-3.1-8b,L40S,1,1,2000,1000,2000,120,5,{statistic},{version}\n"


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.sampled_from(["mean", "median", "MEAN", "p99.9", "p0.5"]),
                 st.integers(1, 99).map(lambda n: f"p{n}")),
       st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.integers(0, 20), st.integers(0, 30), st.integers(0, 9)))
def test_a_statistic_and_an_engine_version_are_read(statistic, version):
    row = parse_profiles_csv(_profile_row(statistic, version), "p.csv")[0]
    assert (row.statistic, row.vllm_version) == (statistic, version)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(100, 10**6).map(lambda n: f"p{n}"), st.sampled_from(["p0", "p", "bogus", "99", "p-1"]),
                 st.text(alphabet="abcxyz$();` ", min_size=1, max_size=12)),
       st.booleans())
def test_a_statistic_or_version_that_is_none_is_refused_at_its_line(bad, as_version):
    """A statistic that is none was ranked as if it were one (p999 above p99, so a row measured on a
    weaker statistic than the objective was used without a word); a version that is none is refused
    as the spec's deploy.vllm_version is."""
    bad = bad.strip()
    if not bad or "," in bad or bad.lower() in ("mean", "median"):
        return
    statistic, version = ("p99", bad) if as_version else (bad, "0.12.0")
    with pytest.raises(InvalidInputError, match=r"^p\.csv:2: " + ("vllm_version" if as_version else "statistic")):
        parse_profiles_csv(_profile_row(statistic, version), "p.csv")


def _row(origin: str, max_rps: float, statistic: str | None, version: str | None, **cell) -> ProfileRow:
    base = dict(model="llama", gpu="L4", tp=1, pp=1, input_tokens=100, output_tokens=100, ttft_slo_ms=1000.0,
                tpot_slo_ms=100.0)
    return ProfileRow(**{**base, **cell}, max_rps=max_rps, origin=origin, statistic=statistic, vllm_version=version)


MEASURED = st.tuples(st.floats(0, 1e6, allow_nan=False), st.sampled_from([None, "p99", "P99", "mean", "p90"]),
                     st.sampled_from([None, "0.12.0", "0.10.0"]))


@settings(max_examples=60, deadline=None)
@given(MEASURED, MEASURED, st.sampled_from(["llama", "LLAMA"]), st.sampled_from(["L4", "l4"]),
       st.sampled_from([{"tpot_slo_ms": 50.0}, {"input_tokens": 200}, {"tp": 2}]))
def test_a_cell_measured_twice_differently_is_refused_with_both_places(first, second, model, gpu, other):
    """Two rows of one cell (model and GPU in any case, layout, sizes, SLOs) that disagree on the rate,
    the statistic or the engine were both kept and the lookup took the higher rate, silently (a p99
    row of 4 req/s beside a mean row of 40 planned at 40): refused naming both rows, in the order
    read, whichever files they are in. The same row twice (a file listed twice) passes, and so do
    rows of different cells."""
    a = _row("a.csv:2", *first)
    b = _row("b.csv:7", *second, model=model, gpu=gpu)
    same = (first[0], (first[1] or "").lower(), first[2] or "") == (second[0], (second[1] or "").lower(), second[2] or "")
    if same:
        assert ProfileTable([a, b]).lookup(("llama",), "L4", 1, 1, 50, 50, 1000, 100).max_rps == first[0]
    else:
        with pytest.raises(InvalidInputError, match=r"(?i)^b\.csv:7: llama on .* is measured again: .* where a\.csv:2 says"):
            ProfileTable([a, b])
    assert len(ProfileTable([a, _row("b.csv:7", *second, **other)]).rows) == 2
