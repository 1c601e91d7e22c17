"""The CSVs a user gives (offers, caps, profiles, dataset, demand log), with cells of any type, range
and encoding: each parser returns finite numbers or raises our InvalidInputError naming the file
and line; nothing else escapes."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import HetinfraError
from hetinfra.perf.profiles import COLUMNS as PROFILE_COLUMNS, load_profiles
from hetinfra.price_feeds.caps import load_caps_csv
from hetinfra.price_feeds.offers import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, load_offers_file
from hetinfra.replan.demand_log import read_demand_log
from hetinfra.spec.demand import dataset_rows
from hetinfra.spec.models import DatasetSizes
from tests.fuzz.conftest import MAX_ERROR_LINES, budget

CELLS = st.one_of(
    st.sampled_from(["", "1", "0", "-1", "1.5", "nan", "NaN", "inf", "-inf", "1e300", "1e-300", "1e999", "2", "8",
                     "24", "1000000", "0x10", "true", "aws", "us-east-1", "L4", "g6.xlarge", "a,b", '"q"', "a\nb",
                     "\ufeff", "ü", "2024-05-01T12:00:00Z", "1790000000", "llama-3.1-8b", "$(id)",
                     "9" * 5000]),  # past int()'s 4,300 digits: its ValueError told users to call Python
    st.text(max_size=12), st.integers(-10 ** 20, 10 ** 20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))
PREFIX = st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff", b"\x00"])


def csv_text(header: list[str], rows: list[list[str]]) -> str:
    def cell(c: str) -> str:
        return '"' + c.replace('"', '""') + '"' if any(x in c for x in ',"\n\r') else c
    return "\n".join(",".join(cell(c) for c in row) for row in [header] + rows) + "\n"


def table(columns: tuple | list, valid_row: list[str]):
    """A header (maybe with a column dropped) and rows that start valid and get junk cells."""
    def mutate(row, edits):
        row = list(row)
        for i, v in edits:
            row[i % len(row)] = v
        return row
    rows = st.lists(st.lists(st.tuples(st.integers(0, 50), CELLS), max_size=3).map(lambda e: mutate(valid_row, e)),
                    min_size=1, max_size=4)
    header = st.one_of(st.just(list(columns)), st.integers(0, len(columns) - 1).map(
        lambda i: [c for j, c in enumerate(columns) if j != i]))
    return st.tuples(header, rows, PREFIX)


def _write(tmp_path_factory, name: str, case) -> object:
    header, rows, prefix = case
    path = tmp_path_factory.mktemp("csv") / name
    path.write_bytes(prefix + csv_text(header, rows).encode("utf-8", "surrogatepass"))
    return path


def _refused_or(fn, path):
    try:
        return fn(path)
    except HetinfraError as exc:
        assert exc.exit_code == 2 and len(str(exc).splitlines()) <= MAX_ERROR_LINES, str(exc)
        assert path.name in str(exc), str(exc)
        return None


OFFER = ["lab", "r1", "n1", "L4", "1", "24", "4", "16", "1.0", "0.5"]


@budget(60)
@given(table(REQUIRED_COLUMNS + OPTIONAL_COLUMNS[:2], OFFER + ["2025-01-01", "mine"]))
def test_offers_csv(tmp_path_factory, case):
    snap = _refused_or(load_offers_file, _write(tmp_path_factory, "offers.csv", case))
    for o in snap.offers if snap else ():
        assert all(math.isfinite(x) for x in (o.price_per_hour, o.gpu_memory_gb, o.vcpus, o.memory_gb))
        assert 1 <= o.gpu_count <= 64 and o.price_per_hour > 0


@budget(40)
@given(table(["cloud", "region", "gpu", "max_gpus"], ["aws", "us-east-1", "L4", "8"]))
def test_caps_csv(tmp_path_factory, case):
    for cap in _refused_or(load_caps_csv, _write(tmp_path_factory, "caps.csv", case)) or ():
        assert isinstance(cap.max_gpus, int) and cap.max_gpus >= 0


@budget(40)
@given(table(PROFILE_COLUMNS, ["llama-3.1-8b", "L4", "1", "1", "200", "100", "2000", "120", "6"]))
def test_profiles_csv(tmp_path_factory, case):
    for row in _refused_or(load_profiles, _write(tmp_path_factory, "profile.csv", case)) or ():
        assert all(math.isfinite(x) for x in (row.max_rps, row.ttft_slo_ms, row.tpot_slo_ms))


@budget(40)
@given(table(["input_tokens", "output_tokens"], ["120", "80"]))
def test_dataset_csv(tmp_path_factory, case):
    path = _write(tmp_path_factory, "sizes.csv", case)
    ds = DatasetSizes(path=str(path), input_edges=[0, 100, 1000], output_edges=[0, 100, 1000])
    rows = _refused_or(lambda p: dataset_rows(ds, p.parent), path) or {}
    assert all(i >= 0 and o >= 0 for bucket in rows.values() for i, o in bucket)  # negative rows refused


@budget(40)
@given(table(["timestamp", "model", "input_tokens", "output_tokens", "region"],
             ["1790000000", "chat-8b", "480", "190", "us-east-1"]))
def test_demand_log(tmp_path_factory, case):
    log = _refused_or(read_demand_log, _write(tmp_path_factory, "demand.csv", case))
    if log is not None:
        assert log.timestamps.dtype.kind == "f" and all(math.isfinite(t) for t in log.timestamps)
        assert (log.input_tokens >= 0).all() and (log.output_tokens >= 0).all()
