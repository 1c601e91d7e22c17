"""One rule for the as-of date of rows of several dates (issue 53): a group of rows states its one
date, or its span "oldest to newest" (price_feeds.offers.as_of_span), and every reader of the embedded
snapshot states it the same way: the fallback warning, the `prices` header, `prices --json`'s
sources and plan.json's `inputs.sources`. The published `as_of` keys stay the oldest row's (what
--max-age-h and replan age); `newest_as_of` is added beside them.

Before, the snapshot (Azure rows of 2024-07-01, AWS of 2025-11-01, GCP of two dates) was "as of
2024-07-01" in the header over AWS rows dated 2025-11-01, while the AWS fallback warning called the
same snapshot "as of 2025-11-01"."""

from __future__ import annotations

import csv
import json
from importlib import resources

from click.testing import CliRunner

from hetinfra.price_feeds.load import overlay
from hetinfra.price_feeds.offers import OfferSnapshot, as_of_span, load_embedded_snapshot, parse_offers_csv


def embedded_dates() -> dict[str, set[str]]:
    """cloud -> the as-of dates of its rows in the shipped CSV, read without hetinfra's parser."""
    text = resources.files("hetinfra.price_feeds").joinpath("data/offers_snapshot.csv").read_text()
    out: dict[str, set[str]] = {}
    for row in csv.DictReader(text.splitlines()):
        out.setdefault(row["cloud"], set()).add(row["as_of"])
    return out


def span_of(dates) -> str:
    dates = sorted(dates)  # plain ISO dates: text order is time order
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def test_one_date_or_the_span():
    assert as_of_span(["2025-11-01", "2025-11-01"]) == "2025-11-01"
    assert as_of_span(["2026-07-30", "2024-07-01", "2025-11-01"]) == "2024-07-01 to 2026-07-30"
    assert as_of_span(["2025-11-01", "2025-11-01T00:00:00Z"]) == "2025-11-01"  # one time, two spellings
    assert as_of_span(["unknown", "2025-11-01"]) == "2025-11-01"
    assert as_of_span([]) == "unknown"


def test_the_embedded_snapshot_records_its_oldest_and_newest_row():
    dates = embedded_dates()
    assert len(set().union(*dates.values())) > 1, "the shipped snapshot has rows of several dates"
    source = load_embedded_snapshot().sources[0]
    whole = set().union(*dates.values())
    assert (source.as_of, source.newest_as_of) == (min(whole), max(whole))
    assert source.span == span_of(whole)


def test_a_source_of_one_date_states_that_date():
    text = ("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,"
            "spot_price_per_hour,as_of,source\naws,us-east-1,x.big,L4,1,24,8,32,1.5,,2025-11-01,me\n")
    snap = parse_offers_csv(text, name="o.csv")
    assert (snap.as_of, snap.newest_as_of, snap.span) == ("2025-11-01", "2025-11-01", "2025-11-01")


def test_an_overlaid_source_states_the_dates_of_its_rows_still_used():
    """Live AWS offers replacing the embedded ones: the embedded record counts and dates the rows left."""
    embedded = load_embedded_snapshot()
    aws = OfferSnapshot(tuple(o for o in embedded.offers if o.cloud == "aws"), embedded.sources)
    merged = overlay(embedded, [(aws, {"aws": None})])  # coverage: every AWS region
    left = [o for o in embedded.offers if o.cloud != "aws"]
    record = merged.sources[0]
    assert record.rows == len(left)
    assert record.span == span_of({o.as_of for o in left})


def invoke(*args, env=None):
    from hetinfra.cli.feeds import prices_command

    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2
        runner = CliRunner()
    res = runner.invoke(prices_command, list(args), catch_exceptions=False, env=env)
    return res.exit_code, res.stdout, res.stderr


def test_warning_header_and_json_state_the_snapshot_alike(monkeypatch, closed_port, tmp_path):
    """`prices --feeds live:aws` offline, over AWS H100 rows: the warning, the header and the JSON
    sources give the embedded snapshot one span, and the header and warning the AWS rows' own date."""
    monkeypatch.setenv("HETINFRA_AWS_PRICING_URL", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("HETINFRA_AWS_SPOT", "off")
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(tmp_path / "cache"))
    dates = embedded_dates()
    whole, aws = span_of(set().union(*dates.values())), span_of(dates["aws"])
    assert whole != aws
    args = ("--feeds", "live:aws", "--timeout", "1", "--gpu", "H100", "--cloud", "aws", "--region", "us-east-1")
    code, out, err = invoke(*args)
    assert code == 0, err
    assert f"using the embedded snapshot (as of {whole}; its aws rows {aws})" in err
    header = " ".join(out.split("┏")[0].split())
    assert header.startswith(f"2 offer(s), as of {aws} (sources: embedded-snapshot {whole}, ")
    code, out, err = invoke(*args, "--json")
    doc = json.loads(out)
    source = next(s for s in doc["sources"] if s["name"] == "embedded-snapshot")
    assert span_of({source["as_of"], source["newest_as_of"]}) == whole
    assert (doc["as_of"], source["as_of"]) == (min(set().union(*dates.values())),) * 2  # the published key: oldest
    assert {o["as_of"] for o in doc["offers"]} == dates["aws"]


def test_plan_json_records_each_sources_span(example_plans):
    """plan.json `inputs.sources[]`: `as_of` the oldest row's (published), `newest_as_of` the newest."""
    dates = set().union(*embedded_dates().values())
    inputs = example_plans["chat"][1]["inputs"]
    source = next(s for s in inputs["sources"] if s["name"] == "embedded-snapshot")
    assert (source["as_of"], source["newest_as_of"], inputs["offers_as_of"]) == (min(dates), max(dates), min(dates))


def test_a_source_without_a_newest_row_date_records_its_as_of_as_both():
    """A source built without ``newest_as_of`` has its as-of as its newest (set once, in SourceInfo):
    plan.json and `prices --json` record the same, and no reader needs a fallback of its own."""
    from price_feeds.offers import SourceInfo

    s = SourceInfo("x.csv", "2024-07-01", "ab", 3)
    assert s.newest_as_of == "2024-07-01" and s.record() == {
        "name": "x.csv", "as_of": "2024-07-01", "newest_as_of": "2024-07-01", "sha256": "ab", "rows": 3}
    assert SourceInfo("x.csv", "2024-07-01", "ab", 3, "2024-08-01").record()["newest_as_of"] == "2024-08-01"
