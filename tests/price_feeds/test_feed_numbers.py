"""A number in a price feed's CSV is read as every CSV number is (hetinfra.csvtext.plain_float: ASCII
digits, sign, point, exponent, finite): an offers file given as ``--feeds PATH`` (the lenient reader,
price_feeds.validate), the SkyPilot catalog (price_feeds.skypilot_catalog) and AWS's price list read
their cells with float(), which also reads '1_0' as 10, '٣' as 3 and '1e400' as an infinity: `prices
--feeds f.csv` listed an offer at $10/h for a price cell '1_0', and a GPU count of 'inf' in the catalog
was an OverflowError that failed the whole feed as "malformed feed data"."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.price_feeds.http import FetchError
from tests.fuzz.conftest import budget

DIGIT_SCRIPTS = ["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "০১২৩৪৫৬৭৮৯"]


def _other_digits(n: int, script: str) -> str:
    return str(n).translate(str.maketrans("0123456789", script))


#: texts float() reads as a number that no CSV writer writes
unwritten = st.one_of(
    st.integers(10, 10**6).map(lambda n: f"{str(n)[0]}_{str(n)[1:]}"),
    st.builds(_other_digits, st.integers(1, 64), st.sampled_from(DIGIT_SCRIPTS)),
    st.sampled_from(["inf", "-inf", "Infinity", "nan", "NaN", "1e400", "1_0", "0_5"]),
)
OFFER_COLUMNS = ["gpu_count", "gpu_memory_gb", "vcpus", "memory_gb", "price_per_hour", "spot_price_per_hour"]
CATALOG_COLUMNS = ["AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice"]


@budget(100)
@given(cell=unwritten, column=st.sampled_from(OFFER_COLUMNS))
def test_property_an_offers_file_number_no_csv_writes_drops_its_row(cell, column):
    from hetinfra.price_feeds.validate import parse_offers_lenient

    float(cell)  # a text float() reads: the old reader took it
    header = "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"
    good = dict(zip(header.split(","), "aws,us-east-1,g6e.xlarge,L40S,1,48,4,32,1.861,0.9".split(",")))
    bad = {**good, "instance_type": "g6e.2xlarge", "vcpus": "8", "memory_gb": "64", column: cell}
    text = header + "\n" + ",".join(good.values()) + "\n" + ",".join(bad.values()) + "\n"
    v = parse_offers_lenient(text, name="f.csv")
    assert [o.instance_type for o in v.offers] == ["g6e.xlarge"], [(o.instance_type, o) for o in v.offers]


@budget(100)
@given(cell=unwritten, column=st.sampled_from(CATALOG_COLUMNS))
def test_property_a_catalog_number_no_csv_writes_is_never_an_offers_figure(tmp_path_factory, cell, column):
    from hetinfra.price_feeds.config import FeedConfig
    from hetinfra.price_feeds.skypilot import SkyPilotAdapter

    cat = tmp_path_factory.mktemp("catalog")
    (cat / "aws").mkdir()
    cols = ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo", "Price",
            "SpotPrice", "Region", "AvailabilityZone", "Arch"]
    good = dict(zip(cols, ["g6.xlarge", "L4", "1", "4", "16", "", "0.8048", "0.4", "us-east-1", "use1-az1", "x86_64"]))
    bad = {**good, "InstanceType": "g6.2xlarge", "vCPUs": "8", "MemoryGiB": "32", column: cell}
    out = io.StringIO()
    w = csv.DictWriter(out, cols)
    w.writeheader()
    w.writerows([good, bad])
    (cat / "aws" / "vms.csv").write_text(out.getvalue(), encoding="utf-8")
    config = FeedConfig(cache_dir=cat / "cache", skypilot_catalog=str(cat), retries=0)
    try:
        res = SkyPilotAdapter(config).fetch()
    except FetchError as exc:  # the catalog refused, naming the cell
        assert cell[:10] in exc.message or "no valid GPU offer" in exc.message, exc.message
        return
    assert [o.instance_type for o in res.offers] == ["g6.xlarge"], res.offers


@pytest.mark.parametrize("price", ["1_0", "٣", "inf", "1e400"])
def test_an_aws_price_list_price_no_csv_writes_is_rejected(fx, price):
    from hetinfra.price_feeds.aws import parse_bulk_csv
    from hetinfra.price_feeds.offers import Offer

    text = fx.aws_csv([fx.aws_row("g6.xlarge", price)])
    got = list(parse_bulk_csv(text.splitlines(True), region="us-east-1", as_of="2026-01-01", source="aws"))
    assert got and not any(isinstance(g, Offer) for g in got), got
