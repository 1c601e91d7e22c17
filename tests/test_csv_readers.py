"""Every CSV reader reads CSV text one way (hetinfra.csvtext.csv_lines / csv_records): a byte-order
mark at the start changes nothing, a header naming a column twice is refused at its line, and the
records are numbered by the line they start on. The readers are the spec's offers, ``--feeds PATH``
(lenient), caps, profiles, datasets and demand logs; a structural test keeps any other module from
splitting CSV itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.csvtext import csv_lines, csv_records

REPO = Path(__file__).resolve().parents[1]
NOW = 1_760_000_000.0  # 2025-10-09: the demand log's clock


def _offers(text, tmp):
    from hetinfra.price_feeds.offers import parse_offers_csv

    return parse_offers_csv(text, name="o.csv").offers


def _feed(text, tmp):
    """--feeds PATH: the lenient reader, through its adapter (the file's bytes, as the CLI reads them)."""
    from hetinfra.price_feeds.local import OffersCsvAdapter

    path = tmp / "feed.csv"
    path.write_bytes(text.encode("utf-8"))
    res = OffersCsvAdapter(path).fetch()
    return sorted((o.cloud, o.region, o.instance_type, o.price_per_hour) for o in res.offers), res.drops


def _caps(text, tmp):
    from hetinfra.price_feeds.caps import parse_caps_csv

    return [(c.cloud, c.region, c.gpu, c.max_gpus, c.where) for c in parse_caps_csv(text, name="c.csv")]


def _profiles(text, tmp):
    from hetinfra.perf.profiles import parse_profiles_csv

    return parse_profiles_csv(text, "p.csv")


def _demand_log(text, tmp):
    from hetinfra.replan.log_read import read_demand_log

    path = tmp / "log.csv"
    path.write_bytes(text.encode("utf-8"))
    log = read_demand_log(path, clock=lambda: NOW)
    return list(log.timestamps), list(log.models), list(log.input_tokens)


def _dataset(text, tmp):
    from hetinfra.spec.demand import dataset_rows
    from hetinfra.spec.models import DatasetSizes

    path = tmp / "ds.csv"
    path.write_bytes(text.encode("utf-8"))
    return dataset_rows(DatasetSizes(path=str(path), input_edges=[0, 10_000], output_edges=[0, 10_000]), tmp)


def _row(kind: str, k: int, n: int) -> list[str]:
    """Row ``k`` of a valid table of ``kind``; ``n`` varies its numbers."""
    return {
        "offers": ["lab", f"r{k}", f"it{k}", "L4", str(1 + n % 8), "24", "8", "32", f"{1 + n}.5", ""],
        "caps": ["aws", f"r{k}", "L4", str(n)],
        "profiles": ["chat-8b", "L4", "1", "1", str(100 + n), "100", "2000", "120", f"{n}.25"],
        "demand_log": [str(NOW - 3600 + k), "chat-8b", str(n), str(n + 1), "us-east-1"],
        "dataset": [str(n), str(n + k)],
    }[kind]


HEADERS = {
    "offers": "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour",
    "caps": "cloud,region,gpu,max_gpus",
    "profiles": "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps",
    "demand_log": "timestamp,model,input_tokens,output_tokens,region",
    "dataset": "input_tokens,output_tokens",
}
#: reader -> (its kind of table, whether columns are read by name)
READERS = {_offers: "offers", _feed: "offers", _caps: "caps", _profiles: "profiles", _demand_log: "demand_log",
           _dataset: "dataset"}
KEYED = [r for r, kind in READERS.items() if kind != "dataset"]  # a dataset's columns are by position

TABLES = st.lists(st.integers(0, 500), min_size=1, max_size=6)
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def table(kind: str, numbers: list[int], newline: str = "\n") -> str:
    rows = [HEADERS[kind]] + [",".join(_row(kind, k, n)) for k, n in enumerate(numbers)]
    return newline.join(rows) + newline


@pytest.mark.parametrize("reader", list(READERS), ids=lambda r: r.__name__.strip("_"))
@SETTINGS
@given(numbers=TABLES, crlf=st.booleans())
def test_a_bom_changes_nothing(tmp_path, reader, numbers, crlf):
    text = table(READERS[reader], numbers, "\r\n" if crlf else "\n")
    assert reader("\ufeff" + text, tmp_path) == reader(text, tmp_path)


@pytest.mark.parametrize("reader", KEYED, ids=lambda r: r.__name__.strip("_"))
@SETTINGS
@given(numbers=TABLES, data=st.data())
def test_a_column_named_twice_is_refused_at_the_header(tmp_path, reader, numbers, data):
    kind = READERS[reader]
    columns = HEADERS[kind].split(",")
    twice = data.draw(st.sampled_from(columns))
    at = data.draw(st.integers(0, len(columns)))
    header = columns[:at] + [f" {twice}"] + columns[at:]  # spaces around a name do not make it another
    rows = [",".join(_row(kind, k, n)[:at] + ["7"] + _row(kind, k, n)[at:]) for k, n in enumerate(numbers)]
    text = "\n".join([",".join(header), *rows]) + "\n"
    with pytest.raises(InvalidInputError) as refused:
        reader(data.draw(st.sampled_from(["", "\ufeff"])) + text, tmp_path)
    assert ":1: column '" + twice + "' appears twice" in refused.value.message


#: how a spreadsheet user respells a column name: case, spaces or hyphens for '_'
RESPELL = st.sampled_from([str.upper, str.title, lambda c: c.replace("_", " "), lambda c: c.replace("_", "-"),
                           lambda c: c[:1].upper() + c[1:]])
#: reader -> the optional columns it reads besides HEADERS' (a respelled one was dropped silently)
OPTIONAL = {_offers: ["source"], _feed: ["source"], _caps: ["purchase"], _profiles: ["statistic", "vllm_version"],
            _demand_log: [], _dataset: []}


@pytest.mark.parametrize("reader", KEYED, ids=lambda r: r.__name__.strip("_"))
@SETTINGS
@given(numbers=TABLES, data=st.data())
def test_a_column_spelled_otherwise_is_refused_at_the_header(tmp_path, reader, numbers, data):
    """A column named 'Statistic', 'max rps' or 'Region': the readers that ignore columns they do not
    know (profiles, caps, demand logs) dropped an optional one silently (profile rows lost their
    statistic), those that need one said it was missing. Each names the column and its spelling."""
    kind = READERS[reader]
    columns = HEADERS[kind].split(",") + OPTIONAL[reader]
    rows = [_row(kind, k, n) + [""] * len(OPTIONAL[reader]) for k, n in enumerate(numbers)]
    at = data.draw(st.integers(0, len(columns) - 1))
    respelled = data.draw(RESPELL)(columns[at])
    if respelled == columns[at]:  # no '_' to respell, or already so: nothing to refuse
        return
    text = ",".join(columns[:at] + [respelled] + columns[at + 1:]) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    with pytest.raises(InvalidInputError) as refused:
        reader(text, tmp_path)
    assert f":1: column {at + 1} is named {respelled!r}, not {columns[at]!r}" in refused.value.message


def test_csv_lines_numbers_records_by_the_line_they_start_on():
    text = '\ufeffa,b\n\n"x\ny",1\r\n2,3\n'
    assert list(csv_lines(text, "t.csv")) == [(1, ["a", "b"]), (2, []), (3, ["x\ny", "1"]), (5, ["2", "3"])]
    header, rows = csv_records(text + "4\n5,6,,\n", "t.csv")
    assert header == ["a", "b"]
    assert list(rows) == [(3, {"a": "x\ny", "b": "1"}), (5, {"a": "2", "b": "3"}), (6, {"a": "4", "b": None}),
                          (7, {"a": "5", "b": "6"})]  # empty cells past the header: a spreadsheet's trailing commas
    _, rows = csv_records(text + "5,6,7\n", "t.csv", wide="keep")
    assert list(rows)[-1] == (6, {"a": "5", "b": "6", None: "3 cells, the header has 2 (the last 'b'): cell 3 '7' "
                                                            "has no column"})


@pytest.mark.parametrize("reader", list(READERS), ids=lambda r: r.__name__.strip("_"))
@SETTINGS
@given(numbers=TABLES, data=st.data())
def test_a_cell_past_the_header_is_refused_at_its_line(tmp_path, reader, numbers, data):
    """A comma inside a number (4,5 for 4.5; 1,024 for 1024) splits its cell and shifts the row: its
    last cell fell off the end, unread, and the row was read as something else (max_rps 4,5 as 4).
    Every reader refuses the row at its line (the lenient --feeds reader drops it, saying why);
    empty cells past the header (trailing commas) change nothing."""
    kind = READERS[reader]
    at = data.draw(st.integers(0, len(numbers) - 1))
    rows = [_row(kind, k, n) for k, n in enumerate(numbers)]
    trailing = HEADERS[kind] + "\n" + "".join(",".join(r) + "," * data.draw(st.integers(0, 2)) + "\n" for r in rows)
    assert reader(trailing, tmp_path) == reader(table(kind, numbers), tmp_path)
    cell = data.draw(st.sampled_from(["5", "024", "x", " 7"]))
    rows[at] = rows[at] + [""] * data.draw(st.integers(0, 1)) + [cell]
    text = HEADERS[kind] + "\n" + "".join(",".join(r) + "\n" for r in rows)
    if reader is _feed:  # lenient: the row is dropped with its reason (the feed fails when none is left)
        from hetinfra.price_feeds.http import FetchError

        try:
            drops = reader(text, tmp_path)[1]
        except FetchError as failed:
            drops = failed.message
        assert "a cell past the header's columns" in str(drops), drops
        return
    with pytest.raises(InvalidInputError) as refused:
        reader(text, tmp_path)
    assert f":{at + 2}: {len(rows[at])} cells, the header has {HEADERS[kind].count(',') + 1}" in refused.value.message
    assert "has no column" in refused.value.message and "4,5" in refused.value.hint


def test_a_bad_line_of_a_profile_is_named_by_its_real_line():
    """A blank line and a quoted cell spanning lines shifted the line csv.DictReader's count named."""
    from hetinfra.perf.profiles import parse_profiles_csv

    text = HEADERS["profiles"] + "\n\n" + ",".join(_row("profiles", 0, 1)) + '\n"chat\n8b",L4,1,1,1,1,1,1,x\n'
    with pytest.raises(InvalidInputError, match=r"p\.csv:4: column .max_rps. is .x., not a number"):
        parse_profiles_csv(text, "p.csv")


#: the modules that may split CSV themselves: the one mechanism; the AWS price list (hundreds of MB,
#: filtered line by line before a line is split); the SkyPilot catalog reader, standard library only
#: (tools/build_snapshot.py imports it without hetinfra), which drops a BOM itself
OWN_SPLITTERS = {"hetinfra.csvtext", "hetinfra.price_feeds.aws", "hetinfra.price_feeds.skypilot_catalog"}


def test_no_other_module_splits_csv():
    from tests.test_imports import modules

    found = []
    for name, path in sorted(modules(REPO).items()):
        if name in OWN_SPLITTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "csv"
                    and node.attr in ("reader", "DictReader")):
                found.append(f"{name}:{node.lineno}")
    assert not found, f"split CSV through hetinfra.csvtext.csv_lines/csv_records instead: {found}"
