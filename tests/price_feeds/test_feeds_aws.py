"""AWS price list bulk CSV adapter (streamed from loopback) and boto3 spot prices (Stubber)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import pytest

from hetinfra.price_feeds.aws import AwsBulkAdapter, parse_bulk_csv
from hetinfra.price_feeds.http import FetchError
from tests.price_feeds.conftest import by_key


def test_bulk_csv_filters_and_exact_values(feed_server, feed_config, fx):
    fx.serve_aws(feed_server)
    res = AwsBulkAdapter(feed_config()).fetch()
    got = by_key(res.offers)
    assert sorted(got) == [("us-east-1", "g6.xlarge"), ("us-east-1", "p4d.24xlarge"), ("us-east-1", "p5.48xlarge")]
    g6 = got[("us-east-1", "g6.xlarge")]
    assert (g6.gpu, g6.gpu_count, g6.gpu_memory_gb, g6.vcpus, g6.memory_gb) == ("L4", 1, 24, 4.0, 16.0)
    assert g6.price_per_hour == 0.8048 and g6.spot_price_per_hour is None
    p5 = got[("us-east-1", "p5.48xlarge")]
    assert (p5.gpu, p5.gpu_count, p5.price_per_hour, p5.vcpus, p5.memory_gb) == ("H100", 8, 55.04, 192.0, 2048.0)
    assert got[("us-east-1", "p4d.24xlarge")].price_per_hour == 21.957642
    # g5.12xlarge says 8 GPUs (the family has 4); g5.xlarge costs 0
    assert res.drops == {"GPU count not matching the family": 1, "price <= 0": 1}
    assert res.drop_summary() == "dropped 2 rows: 1 GPU count not matching the family, 1 price <= 0"
    assert res.coverage == {"aws": frozenset({"us-east-1"})}
    assert res.meta["publication_date"] == {"us-east-1": "2025-11-14T21:04:53Z"}
    assert feed_server.hits(fx.AWS_PATH.format(region="us-east-1")) == 1
    assert res.label == "aws-pricelist" and all(o.source == "aws-pricelist" for o in res.offers)


def test_two_regions_and_region_code_column(feed_server, feed_config, fx):
    fx.serve_aws(feed_server, regions=("us-east-1", "us-west-2"), g6_price="0.9")
    res = AwsBulkAdapter(feed_config(aws_regions=("us-east-1", "us-west-2"))).fetch()
    assert {o.region for o in res.offers} == {"us-east-1", "us-west-2"}
    assert by_key(res.offers)[("us-west-2", "g6.xlarge")].price_per_hour == 0.9
    assert res.coverage == {"aws": frozenset({"us-east-1", "us-west-2"})}


def test_columns_are_found_by_name_not_position(fx):
    # Same rows, header columns in reverse order: must give the same offers.
    import csv
    import io

    text = fx.aws_csv(fx.aws_fixture_rows())
    lines = text.splitlines(keepends=True)
    rows = list(csv.reader(lines[5:]))
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in rows:
        w.writerow(list(reversed(r)))
    rev = "".join(lines[:5]) + buf.getvalue()
    a = [o for o in parse_bulk_csv(text.splitlines(True), region="us-east-1", as_of="t", source="s") if hasattr(o, "gpu")]
    b = [o for o in parse_bulk_csv(rev.splitlines(True), region="us-east-1", as_of="t", source="s") if hasattr(o, "gpu")]
    assert a == b and len(a) == 5  # 3 good + 2 that validation drops later


def test_html_error_page_is_malformed(feed_server, feed_config, fx):
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(200, "<html><body>Access Denied</body></html>\n"))
    with pytest.raises(FetchError, match="not an EC2 price list CSV"):
        AwsBulkAdapter(feed_config()).fetch()


def test_missing_columns_is_malformed(feed_server, feed_config, fx):
    text = fx.aws_csv([]).replace('"CapacityStatus"', '"Capacity"')
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(200, text))
    with pytest.raises(FetchError, match="lacks column.*CapacityStatus"):
        AwsBulkAdapter(feed_config()).fetch()


def test_no_gpu_rows_is_an_error(feed_server, feed_config, fx):
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(200, fx.aws_csv([fx.aws_row("m5.large", "0.096")])))
    with pytest.raises(FetchError, match="no valid GPU offer"):
        AwsBulkAdapter(feed_config()).fetch()


def test_spot_without_boto3_is_a_warning(feed_server, feed_config, fx, monkeypatch):
    fx.serve_aws(feed_server)
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    res = AwsBulkAdapter(feed_config(aws_spot="auto")).fetch()
    assert len(res.offers) == 3 and all(o.spot_price_per_hour is None for o in res.offers)
    assert any("boto3 is not installed" in w and "on-demand prices only" in w for w in res.warnings)


def test_spot_without_credentials_is_a_warning(feed_server, feed_config, fx):
    pytest.importorskip("boto3")
    fx.serve_aws(feed_server)
    res = AwsBulkAdapter(feed_config(aws_spot="auto")).fetch()
    assert any("no AWS credentials" in w for w in res.warnings), res.warnings
    assert all(o.spot_price_per_hour is None for o in res.offers)


def _stubbed_ec2(pages):
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import ANY, Stubber

    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(ec2)
    for i, page in enumerate(pages):
        params = {"ProductDescriptions": ["Linux/UNIX"], "InstanceTypes": ANY, "StartTime": ANY}
        if i:
            params["NextToken"] = f"t{i}"
        stub.add_response("describe_spot_price_history", page, params)
    stub.activate()
    return ec2, stub


def test_spot_prices_min_over_azs_with_paging():
    from hetinfra.price_feeds.aws_api import spot_prices

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ec2, stub = _stubbed_ec2([
        {"SpotPriceHistory": [
            {"AvailabilityZone": "us-east-1a", "InstanceType": "g6.xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "0.417700", "Timestamp": t},
            {"AvailabilityZone": "us-east-1b", "InstanceType": "g6.xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "0.388000", "Timestamp": t}], "NextToken": "t1"},
        {"SpotPriceHistory": [
            {"AvailabilityZone": "us-east-1c", "InstanceType": "p5.48xlarge", "ProductDescription": "Linux/UNIX",
             "SpotPrice": "17.630000", "Timestamp": t}]},
    ])
    prices, warns = spot_prices(["us-east-1"], ["g6.xlarge", "p5.48xlarge"], factory=lambda s, r: ec2)
    assert prices == {("us-east-1", "g6.xlarge"): 0.388, ("us-east-1", "p5.48xlarge"): 17.63}
    assert warns == []
    stub.assert_no_pending_responses()


def test_spot_api_error_is_a_warning():
    from hetinfra.price_feeds.aws_api import spot_prices

    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(ec2)
    stub.add_client_error("describe_spot_price_history", "UnauthorizedOperation", "not allowed")
    stub.activate()
    prices, warns = spot_prices(["us-east-1"], ["g6.xlarge"], factory=lambda s, r: ec2)
    assert prices == {} and len(warns) == 1 and "UnauthorizedOperation" in warns[0]


def test_adapter_attaches_spot(feed_server, feed_config, fx, monkeypatch):
    fx.serve_aws(feed_server)
    import hetinfra.price_feeds.aws_api as api

    monkeypatch.setattr(api, "spot_prices", lambda regions, types, **kw: (
        {("us-east-1", "g6.xlarge"): 0.388, ("us-east-1", "p5.48xlarge"): 60.0}, []))
    res = AwsBulkAdapter(feed_config(aws_spot="on")).fetch()
    got = by_key(res.offers)
    assert got[("us-east-1", "g6.xlarge")].spot_price_per_hour == 0.388
    # p5 spot above on-demand: the row is dropped with that reason
    assert ("us-east-1", "p5.48xlarge") not in got and res.drops["spot above on-demand"] == 1


def test_benchmark_generator_is_parsed_by_the_adapter(tmp_path, fx):
    """benchmarks/bench_feeds.py's synthetic bulk CSV stays a valid input (small size here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_feeds_under_test", fx.REPO / "benchmarks" / "bench_feeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = tmp_path / "index.csv"
    rows = mod.write_csv(path, 0.3, gpu_share=0.5)
    r = mod.bench_file(path, path.stat().st_size)
    assert rows > 200 and 1 <= r["offers"] <= len(mod.GPU_TYPES)  # at most one per GPU instance type
