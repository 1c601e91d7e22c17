"""One path, two roles (round fifteen): a file a flag names to append to or replace that holds another file
is refused untouched (hetinfra.fileio.refuse_foreign, in the one appender and the profile CSV's writer).
`replan --log-file OUT/plan.json` appended its log to the plan (every later command then refused the
plan), `gateway --demand-log OUT/plan.json` would have appended its rows, and `profile-import r1.json
r2.json --out r2.json` replaced a measurement with the CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from tests.fuzz.conftest import budget
from tests.test_fileio_append import _replan_log as flushed

REPO = Path(__file__).resolve().parents[2]

#: what a user may name by mistake: a plan, a spec, a CSV of another kind, a result JSON, any text
FOREIGN = st.one_of(
    st.dictionaries(st.text(min_size=1, max_size=8), st.integers() | st.text(max_size=8), min_size=1,
                    max_size=4).map(json.dumps),
    st.just((REPO / "services/chat.yaml").read_text()),
    st.lists(st.sampled_from(["cloud", "region", "gpu", "max_gpus", "timestamp", "model"]), min_size=1,
             max_size=5).map(lambda cols: ",".join(cols) + "\n1,2,3\n"),
    st.text(min_size=1, max_size=200).filter(lambda t: t.strip() and not t.startswith("=== ")),
)


def _demand_log(path: Path):
    from hetinfra.gateway.demand import DemandLog

    DemandLog(path).close()


def _replan_log(path: Path):
    got = flushed(path)  # its warning, where the log refused the file
    if isinstance(got, InvalidInputError):
        raise got


def _profile_csv(path: Path):
    from hetinfra.perf.profile_csv import write_profile_csv
    from hetinfra.perf.profiles import ProfileRow

    write_profile_csv([ProfileRow("m", "L4", 1, 1, 512, 128, 2000.0, 100.0, 2.5, "test", "mean")], path)


WRITERS = {"demand log": _demand_log, "replan log": _replan_log, "profile csv": _profile_csv}


def _ours(writer: str, text: str) -> bool:
    from hetinfra.gateway.demand import is_header
    from hetinfra.perf.profile_csv import is_profile_header

    line = text.removeprefix("\ufeff").split("\n", 1)[0].rstrip("\r")
    return {"demand log": is_header, "replan log": lambda s: s.startswith("=== "),
            "profile csv": is_profile_header}[writer](line)


@budget(60)
@given(writer=st.sampled_from(sorted(WRITERS)), text=FOREIGN)
def test_a_log_or_csv_path_holding_another_file_is_refused_and_left_whole(tmp_path_factory, writer, text):
    path = tmp_path_factory.mktemp("roles") / "named"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    before = path.read_bytes()
    if _ours(writer, text):
        return  # a file of this kind: appended to or replaced, as before
    with pytest.raises(InvalidInputError) as err:
        WRITERS[writer](path)
    assert path.read_bytes() == before, f"the {writer} wrote into {text[:40]!r}"
    assert str(path) in err.value.message and "holds another file" in err.value.message


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_file_of_its_own_kind_or_an_empty_one_is_still_written(tmp_path, writer):
    from hetinfra.gateway.demand import HEADER
    from hetinfra.perf.profile_csv import render_profile_csv

    own = {"demand log": HEADER, "replan log": "=== an earlier run\nsummary\n", "profile csv": render_profile_csv([])}
    for text in ("", "\ufeff" + own[writer], own[writer]):
        path = tmp_path / f"f{len(text)}"
        path.write_text(text)
        WRITERS[writer](path)
        assert path.read_text() != text or writer == "demand log" and text  # written (a log with its header: kept)


def test_profile_import_out_naming_one_of_its_results_is_exit_2_before_reading(tmp_path, monkeypatch):
    from hetinfra.cli.app import cli

    monkeypatch.chdir(tmp_path)
    for i, (rate, tpot) in enumerate([(1, 40), (2, 80), (4, 200)]):
        Path(f"r{i}.json").write_text(json.dumps({
            "model_id": "m", "request_rate": rate, "completed": 200, "failed": 0, "request_throughput": rate,
            "random_input_len": "512", "random_output_len": "128", "mean_ttft_ms": 300, "mean_tpot_ms": tpot}))
    before = Path("r2.json").read_text()
    got = CliRunner().invoke(cli, ["profile-import", "r0.json", "r1.json", "r2.json", "--gpu", "L4", "--tp", "1",
                                   "--ttft-ms", "2000", "--tpot-ms", "100", "--out", "r2.json"])
    assert got.exit_code == 2 and "holds another file" in got.output, got.output
    assert Path("r2.json").read_text() == before
