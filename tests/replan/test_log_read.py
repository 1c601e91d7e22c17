"""hetinfra.replan.log_read: the demand log's typed records. The batch path (numpy, column by column)
and the per-row path (DemandRecord.parse) must read any rows alike: where the batch takes the rows,
the per-row path gives the same values; where it does not, the per-row path decides (reads them or
names the line). A batch check left out (negative tokens, a fraction, a year past 2100, an empty
model) makes the property fail."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.replan.log_read import DemandRecord, _batch, _per_row, read_demand_log
from tests.fuzz.conftest import budget

COL = {"timestamp": 0, "model": 1, "input_tokens": 2, "output_tokens": 3, "region": 4}
NUMBERISH = ["0", "1", "12", " 12 ", "12.0", "12.5", "-3", "1e3", "1E7", "1e8", "10000001", "nan", "inf", "-inf",
             "1_000", "0x10", "", " ", "٣", "\u2003 7", "1714564800", "1714564800.250", "4102444800", "4102444801",
             "-0", "+5", "1e400", "2024-05-01T12:00:00Z", "2024-05-01 12:00:00+02:00", "12abc", "\x00"]
cells = st.one_of(st.sampled_from(NUMBERISH), st.integers(-5, 5_000_000_000).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=6))
names = st.one_of(st.sampled_from(["chat", " chat ", "", " ", "a,b", "x\u2003"]), st.text(max_size=5))
# numbers mostly, at and past each bound (the batch must take most rows, with one bad cell alone)
stamps = st.one_of(st.integers(-10, 5_000_000_000).map(str), st.floats(-1, 5e9).map(repr), cells)
tokens = st.one_of(st.integers(-3, 10_000_002).map(str), st.sampled_from(["-1", "0.5", "7.0", "10000001"]), cells)
rows = st.lists(st.tuples(stamps, st.sampled_from(["chat", "code"]) | names, tokens, tokens, names).map(list),
                min_size=1, max_size=3)


def _per_row_or_error(rows_):
    try:
        return _per_row(rows_, list(range(2, len(rows_) + 2)), COL, "log")
    except InvalidInputError as exc:
        return exc


def _one_bad(cell: int, text: str) -> list[list[str]]:
    row = ["1714564800", "chat", "12", "7", "eu"]
    row[cell] = text
    return [["1714564801", "chat", "3", "4", ""], row]


@budget(100)
@given(rows)
@example(_one_bad(2, "-1")).via("each bound of the record, alone in a file the batch would take")
@example(_one_bad(3, "0.5")).via("a fraction")
@example(_one_bad(2, "10000001")).via("past MAX_LOG_TOKENS")
@example(_one_bad(0, "4102444801")).via("past 2100")
@example(_one_bad(0, "-1")).via("before 1970")
@example(_one_bad(1, "  ")).via("no model")
def test_property_the_batch_and_the_record_read_rows_alike(rows_):
    batch = _batch({name: [row[k] for row in rows_] for name, k in COL.items()})
    if batch is None:
        return  # the per-row path decides: nothing to compare
    one = _per_row_or_error(rows_)
    assert not isinstance(one, InvalidInputError), f"the batch took rows the record refuses: {one}"
    for got, want in zip(batch, one):
        assert np.array_equal(np.asarray(got), np.asarray(want)), (rows_, got, want)


def test_a_record_is_typed_and_checked():
    rec = DemandRecord.parse(["1714564800.5", " chat ", "12", "7.0", " eu "], COL, "log:2")
    assert rec == DemandRecord(1714564800.5, "chat", 12, 7, "eu")
    assert isinstance(rec.input_tokens, int) and isinstance(rec.output_tokens, int)
    with pytest.raises(InvalidInputError, match="log:3: input_tokens '-1' is negative"):
        DemandRecord.parse(["1714564800", "chat", "-1", "7", ""], COL, "log:3")


@pytest.mark.parametrize("iso", [False, True])
def test_both_paths_give_one_log(tmp_path, iso):
    """An ISO stamp sends the file down the per-row path; the log read is the same either way."""
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["timestamp", "model", "input_tokens", "output_tokens", "region"])
    for k in range(50):
        w.writerow([1714564800 + 60 * (49 - k), "chat", 10 + k, 5, "eu" if k % 2 else ""])
    if iso:
        w.writerow(["2024-05-02T00:00:00Z", "chat", 3, 4, ""])
    else:
        w.writerow([1714564800 + 43200, "chat", 3, 4, ""])
    (tmp_path / "d.csv").write_text(text.getvalue())
    log = read_demand_log(tmp_path / "d.csv", clock=lambda: 1714564800 + 86400)
    assert list(log.timestamps) == sorted(log.timestamps) and len(log.timestamps) == 51
    assert int(log.input_tokens[log.timestamps == 1714564800 + 43200][0]) == 3


plain_cells = st.text(st.characters(blacklist_characters='",\r\n', blacklist_categories=("Cs",)), max_size=4)


@budget(100)
@given(st.integers(4, 6).flatmap(lambda w: st.lists(st.lists(plain_cells, min_size=w, max_size=w), min_size=1,
                                                      max_size=5)), st.booleans())
def test_property_the_uniform_split_is_csv_readers_split(rows_, trailing_newline):
    """Where _uniform_columns takes a log, its columns are csv.reader's, cell for cell."""
    from hetinfra.replan.log_read import _uniform_columns

    header = ["timestamp", "model", "input_tokens", "output_tokens", "region", "class"][:len(rows_[0])]
    text = "\n".join(",".join(r) for r in [header] + rows_) + ("\n" if trailing_newline else "")
    got = _uniform_columns(text, "log")
    if got is None:
        return
    parsed = list(csv.reader(io.StringIO(text, newline="")))
    for name, k in {n: header.index(n) for n in header if n in COL}.items():
        assert got[0][name] == [r[k] for r in parsed[1:]], name
    assert got[1] == list(range(2, len(parsed) + 1))


#: digits of other scripts Python's float() reads as numbers (Arabic-Indic, Devanagari, fullwidth, Bengali)
DIGIT_SCRIPTS = ["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "০১২৩৪৫৬৭৮৯"]


def _respelled(number: str, how: int, at: int) -> str:
    """``number`` as float() still reads it but no CSV writer writes it: an underscore between two
    digits, or its digits in another script."""
    if how < len(DIGIT_SCRIPTS):
        return number.translate(str.maketrans("0123456789", DIGIT_SCRIPTS[how]))
    cut = 1 + at % (len(number) - 1)
    return number[:cut] + "_" + number[cut:]


@budget(60)
@given(column=st.sampled_from(["timestamp", "input_tokens", "output_tokens"]), row=st.integers(0, 39),
       how=st.integers(0, len(DIGIT_SCRIPTS)), at=st.integers(0, 20), tokens=st.integers(10, 99_999))
def test_a_number_written_as_no_csv_writer_writes_it_is_refused_at_its_line(tmp_path_factory, column, row, how,
                                                                             at, tokens):
    """float() reads '2_00' as 200 and '٢٠٠' as 200: a demand log so written was planned on as if
    written plainly (a cut of the fleet from it), where every other CSV reader refuses such a cell
    (csvtext.PLAIN_NUMBER). Refused at its line, by the batch and the per-row path alike."""
    lines = [f"{1714564800 + 60 * k},chat,{tokens},{7 + k}," for k in range(40)]
    path = tmp_path_factory.mktemp("log") / "d.csv"
    header = "timestamp,model,input_tokens,output_tokens,region\n"
    path.write_text(header + "\n".join(lines) + "\n")
    assert len(read_demand_log(path, clock=lambda: 1714564800 + 86400).timestamps) == 40
    cells = lines[row].split(",")
    k = ["timestamp", "model", "input_tokens", "output_tokens"].index(column)
    cells[k] = _respelled(cells[k], how, at)
    lines[row] = ",".join(cells)
    path.write_text(header + "\n".join(lines) + "\n")
    with pytest.raises(InvalidInputError, match=rf"d\.csv:{row + 2}: {column} '"):
        read_demand_log(path, clock=lambda: 1714564800 + 86400)


# ---- a last row cut short: a gateway stopped, or a flush in progress (hetinfra.csvtext.torn_last_row) -------
NOW = 1_796_000_000.0


def _gateway_rows(n: int, first: float = NOW - 7200) -> list[str]:
    return [f"{first + 2 * k:.3f},chat-8b,{200 + k},100,{'eu' if k % 3 else ''},\"in<=250,out<=100\",90,200"
            for k in range(n)]


@budget(100)
@given(n=st.integers(1, 30), cut=st.integers(1, 200), rotated=st.booleans())
def test_property_a_last_row_cut_short_is_left_out_with_a_note(tmp_path_factory, n, cut, rotated):
    """A gateway's log whose last row a stopped gateway (or a flush in progress) left without its newline and
    short of the header's cells: every whole row is read, the cut one left out and named. It was exit 2
    (``demand.csv:3002: 3 fields, the header has 8``), and through the gateway's GET /admin/demand.csv a
    rotation's cut row joined the next file's first row (10 cells). A whole last row without its newline is
    read, as before."""
    from hetinfra.gateway.demand import HEADER, read_all

    rows = _gateway_rows(n + 1)
    last = rows[-1]
    torn = last[:min(cut, len(last))]
    whole = torn == last or next(csv.reader([torn])).__len__() >= 8
    d = tmp_path_factory.mktemp("torn")
    path = d / "demand.csv"
    if rotated:  # the cut row ends the rotation demand.csv.1; the current file follows it
        (d / "demand.csv.1").write_text(HEADER + "".join(r + "\n" for r in rows[:-1]) + torn)
        later = _gateway_rows(2, first=NOW - 60)
        path.write_text(HEADER + "".join(r + "\n" for r in later))
        (d / "joined.csv").write_text(read_all(path))
        path, expected = d / "joined.csv", n + 2 + (1 if whole else 0)
    else:
        path.write_text(HEADER + "".join(r + "\n" for r in rows[:-1]) + torn)
        expected = n + (1 if whole else 0)
    log = read_demand_log(path, clock=lambda: NOW)
    assert len(log.timestamps) == expected
    assert whole or rotated or any("is cut short" in s and f"{path}:{n + 2}" in s for s in log.skipped), log.skipped


def test_a_cut_row_anywhere_but_last_is_still_refused(tmp_path):
    from hetinfra.gateway.demand import HEADER

    rows = _gateway_rows(3)
    (tmp_path / "d.csv").write_text(HEADER + rows[0] + "\n" + rows[1][:20] + "\n" + rows[2] + "\n")
    with pytest.raises(InvalidInputError, match="d.csv:3: 2 fields, the header has 8"):
        read_demand_log(tmp_path / "d.csv", clock=lambda: NOW)
