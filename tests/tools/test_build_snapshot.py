"""tools/build_snapshot.py and tools/snapshot_sources.py: world-wide offers, provenance per row,
full upstream catalogs dropped into a directory, and planning outside the US."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from hetinfra.price_feeds.geo import continent

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).parent / "data" / "catalog-v8"  # synthetic, see its README
SNAPSHOT = REPO / "price_feeds" / "data" / "offers_snapshot.csv"



def load_tool(name: str):
    sys.path.insert(0, str(REPO / "tools"))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def build():
    return load_tool("build_snapshot")


def rows_of(path: Path) -> dict[tuple[str, str, str], dict]:
    with path.open() as fh:
        return {(r["cloud"], r["region"], r["instance_type"]): r for r in csv.DictReader(fh)}


# --- the shipped snapshot ------------------------------------------------------------------

def test_every_snapshot_row_names_its_source_and_date():
    rows = rows_of(SNAPSHOT).values()
    assert rows
    for r in rows:
        assert r["source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["as_of"]), r
    # one price list per (cloud, region); the three feeds.md rows only fill gaps of us-east-1
    per_region: dict = {}
    for r in rows:
        if not r["source"].startswith("feeds.md:"):
            per_region.setdefault((r["cloud"], r["region"]), set()).add(r["source"])
    assert {k: v for k, v in per_region.items() if len(v) > 1} == {}


def test_prices_h100_spans_three_continents_on_aws_and_gcp(run_cli):
    code, out, err = run_cli("prices", "--gpu", "H100", "--json")
    assert code == 0, err
    offers = json.loads(out)["offers"]
    continents: dict[str, set] = {}
    for o in offers:
        continents.setdefault(o["cloud"], set()).add(continent(o["cloud"], o["region"]))
    assert None not in continents["aws"] | continents["gcp"]
    # Azure: US rows only until a world-wide Azure price list is found (price_feeds/data/SOURCES.md "Gaps").
    for cloud in ("aws", "gcp"):
        assert {"North America", "Europe", "Asia-Pacific"} <= continents[cloud], (cloud, continents[cloud])
    by_key = {(o["cloud"], o["region"], o["instance_type"]): o for o in offers}
    # numbers read in the upstream sources (SOURCES.md): AWS catalog row and GCP host + 8 x GPU
    assert by_key[("aws", "eu-north-1", "p5.48xlarge")]["price_per_hour"] == 58.8928
    assert by_key[("gcp", "europe-west4", "a3-highgpu-8g")]["price_per_hour"] == pytest.approx(112.540479, abs=1e-6)  # Cyclenerd pricing.yml hour


def test_european_example_plans_offline_in_europe(run_cli):
    code, out, err = run_cli("plan", str(REPO / "services" / "europe.yaml"), "--json", "--no-verify", "--no-baselines")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["allocations"] and plan["cost_usd_per_hour"] > 0
    assert {continent(a["cloud"], a["region"]) for a in plan["allocations"]} == {"Europe"}
    assert {a["model"] for a in plan["allocations"]} == {"chat-8b", "docs-70b"}


# --- building from catalog directories -----------------------------------------------------

def test_a_full_catalog_dir_flows_through_to_prices_and_plans(build, run_cli, tmp_path):
    out = tmp_path / "offers.csv"
    assert build.main([str(TINY), "--as-of", "aws=2026-01-15", "--as-of", "gcp=2026-01-16", "--as-of", "azure=2026-01-17",
                       "--gcp-prices", "none", "--out", str(out)]) == 0
    rows = rows_of(out)
    assert set(rows) == {("aws", "eu-central-1", "g6.xlarge"), ("aws", "us-east-1", "g6.xlarge"),
                         ("aws", "ap-northeast-1", "p5.48xlarge"), ("gcp", "europe-west4", "g2-standard-4"),
                         ("azure", "westeurope", "Standard_NC24ads_A100_v4"),
                         ("azure", "swedencentral", "Standard_NC24ads_A100_v4")}
    g6 = rows[("aws", "eu-central-1", "g6.xlarge")]
    assert (g6["price_per_hour"], g6["spot_price_per_hour"], g6["as_of"]) == ("1", "0.3", "2026-01-15")  # spot: AZ minimum
    assert g6["source"] == "skypilot-catalog-v8/aws:catalog-v8"
    g2 = rows[("gcp", "europe-west4", "g2-standard-4")]
    assert (g2["price_per_hour"], g2["spot_price_per_hour"]) == ("0.75", "0.26")  # host + GPU per zone; min of 0.26/0.27
    assert rows[("azure", "westeurope", "Standard_NC24ads_A100_v4")]["as_of"] == "2026-01-17"

    code, text, err = run_cli("prices", "--feeds", str(out), "--gpu", "L4", "--json")
    assert code == 0, err
    assert [(o["cloud"], o["region"]) for o in json.loads(text)["offers"]] == [
        ("gcp", "europe-west4"), ("aws", "us-east-1"), ("aws", "eu-central-1")]

    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["infrastructure"] = {"clouds": ["aws", "gcp", "azure"], "regions": ["eu-central-1", "europe-west4", "westeurope"]}
    (tmp_path / "eu.yaml").write_text(yaml.safe_dump(spec))
    code, text, err = run_cli("plan", str(tmp_path / "eu.yaml"), "--feeds", str(out), "--json", "--no-verify",
                              "--no-baselines")
    assert code == 0, err
    plan = json.loads(text)
    assert {a["region"] for a in plan["allocations"]} <= {"eu-central-1", "europe-west4", "westeurope"}
    # westeurope: an Azure region the shipped snapshot lacks, priced from the dropped-in catalog
    assert ("azure", "westeurope", "Standard_NC24ads_A100_v4", 4.0) in {
        (a["cloud"], a["region"], a["instance_type"], a["price_per_instance_usd_per_hour"]) for a in plan["allocations"]}
    assert plan["cost_usd_per_hour"] == pytest.approx(sum(
        a["count"] * a["nodes_per_replica"] * a["price_per_instance_usd_per_hour"] for a in plan["allocations"]))


def test_first_catalog_dir_wins_per_region(build, tmp_path):
    """The US extract first: a later directory only adds regions the earlier ones lack."""
    later = tmp_path / "later"
    (later / "aws").mkdir(parents=True)
    text = (TINY / "aws" / "vms.csv").read_text().replace(",1.0,0.40,eu-central-1", ",2.0,0.40,eu-central-1")
    text += text.splitlines()[1].replace("eu-central-1,euc1-az1", "eu-west-3,euw3-az1") + "\n"
    (later / "aws" / "vms.csv").write_text(text)
    (later / "SOURCE.json").write_text(json.dumps({"aws": {"source": "later@1", "as_of": "2026-02-01"}}))
    out = tmp_path / "o.csv"
    assert build.main([str(TINY), str(later), "--as-of", "aws=2026-01-15", "--as-of", "gcp=2026-01-15",
                       "--as-of", "azure=2026-01-15", "--gcp-prices", "none", "--out", str(out)]) == 0
    rows = rows_of(out)
    assert rows[("aws", "eu-central-1", "g6.xlarge")]["price_per_hour"] == "1"  # not the later 2.0
    assert rows[("aws", "eu-west-3", "g6.xlarge")]["source"] == "later@1"


def test_a_catalog_without_a_date_is_refused(build, tmp_path, capsys):
    assert build.main([str(TINY), "--as-of", "aws=2026-01-15", "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "gcp/vms.csv: catalog files carry no date; pass --as-of gcp=YYYY-MM-DD" in err
    assert not (tmp_path / "o.csv").exists()


# --- the Cyclenerd GCP list prices (Apache-2.0 pricing.yml) -------------------------------------

def cyclenerd(h100: float = 10.0) -> dict:
    return {"instances": {
        "a3-highgpu-2g": {"gpu": "h100-80gb", "count": 2, "cpu": 52, "ram": 468,
                          "cost": {"europe-west4": {"hour": 2 * h100 + 1.0, "hour_spot": 4.0},
                                   "asia-east9": {"hour": 0}}},
        "a3-highgpu-4g": {"gpu": "h100-80gb", "count": 2, "cpu": 78, "ram": 702,  # GPU count disagrees
                          "cost": {"europe-west4": {"hour": 30.0}}}}}


def test_cyclenerd_prices_the_whole_machine_per_region():
    srcs = load_tool("snapshot_sources")
    (asia, eu) = list(srcs.reduce_cyclenerd(cyclenerd()))  # sorted by region; 4g has no row
    assert (eu.region, eu.instance_type, eu.gpu, eu.gpu_count) == ("europe-west4", "a3-highgpu-2g", "H100", 2)
    assert (eu.prices, eu.spots, eu.vcpus, eu.memory_gb) == ([21.0], [4.0], 52.0, 468.0)
    assert (asia.region, asia.prices) == ("asia-east9", [])  # no price: no row later


def test_cyclenerd_extract_keeps_gpu_machine_types_only(tmp_path):
    srcs = load_tool("snapshot_sources")
    doc = {"about": {"generated": "Thu Jul 30 06:13:17 2026"}, "compute": {"instance": {
        "g2-standard-4": {"cpu": 4, "ram": 16, "l4": 1, "cost": {"us-central1": {"hour": 0.7, "month": 511}}},
        "n2-standard-2": {"cpu": 2, "ram": 8, "cost": {"us-central1": {"hour": 0.1}}}}}}
    path = tmp_path / "pricing.yml"
    path.write_text(yaml.safe_dump(doc))
    out = srcs.extract_cyclenerd(path, "abc")
    assert out["license"] == "Apache-2.0" and out["commit"] == "abc"
    assert out["instances"] == {"g2-standard-4": {"gpu": "l4", "count": 1, "cpu": 4, "ram": 16,
                                                  "cost": {"us-central1": {"hour": 0.7}}}}


#: licences whose data hetinfra may ship and be used commercially with
ALLOWED_LICENCES = {"Apache-2.0", "MIT", "BSD-3-Clause", "CC0-1.0", "CC-BY-4.0"}


def licence_table() -> dict[str, str]:
    """SOURCES.md's "Licences" table: source tag (as in the snapshot's source column) -> SPDX id."""
    text = (REPO / "price_feeds" / "data" / "SOURCES.md").read_text()
    section = text.split("## Licences", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| ([A-Za-z0-9.+-]+) \|", section, re.M)}


def test_every_snapshot_row_comes_from_a_source_whose_licence_allows_commercial_use():
    licences = licence_table()
    assert licences, "SOURCES.md has no Licences table"
    for name in ("offers_snapshot.csv", "committed_prices.csv"):
        for r in csv.DictReader((REPO / "price_feeds" / "data" / name).open()):
            assert r["source"] in licences, f"{name}: source {r['source']!r} has no licence in SOURCES.md"
            assert licences[r["source"]] in ALLOWED_LICENCES, (name, r["source"], licences[r["source"]])


def test_the_gcp_price_file_records_its_licence():
    data = json.loads((REPO / "tools" / "snapshot_data" / "gcp-cyclenerd" / "gpu_prices.json").read_text())
    manifest = json.loads((REPO / "tools" / "snapshot_data" / "gcp-cyclenerd" / "SOURCE.json").read_text())
    assert data["license"] == manifest["gcp"]["license"] == "Apache-2.0"
    assert manifest["gcp"]["source"] in licence_table()


def test_sources_that_disagree_on_the_same_sku_are_refused():
    srcs = load_tool("snapshot_sources")
    a = ("gcp", ("a@1", "2026-01-01"), list(srcs.reduce_cyclenerd(cyclenerd(10.0))), set())
    same = ("gcp", ("b@1", "2026-01-01"), list(srcs.reduce_cyclenerd(cyclenerd(10.0))), set())
    assert "median difference 0.000%" in srcs.check_agreement([a, same], 0.01)
    off = ("gcp", ("b@1", "2026-01-01"), list(srcs.reduce_cyclenerd(cyclenerd(12.0))), set())
    with pytest.raises(srcs.SourceError, match="median difference"):
        srcs.check_agreement([a, off], 0.01)


@pytest.mark.parametrize("day, ok", [("2026-01-15", True), ("2024-02-29", True), ("2026-13-45", False),
                                     ("2025-02-29", False), ("2026-1-15", False), ("2026-01-15\n", False)])
def test_an_as_of_date_is_a_real_day_as_the_offers_reader_requires(day, ok):
    """The snapshot's as_of cells are read by hetinfra's offers reader, which refuses one naming no
    day (2026-13-45) at its line: the tool refuses it first, on --as-of and in SOURCE.json."""
    from hetinfra.price_feeds.offers import parse_offers_csv

    srcs = load_tool("snapshot_sources")
    assert srcs.is_date(day) == ok
    if not ok:
        with pytest.raises(srcs.SourceError):
            srcs.parse_as_of([f"aws={day}"])
    else:  # what the tool takes, the reader takes
        parse_offers_csv("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,"
                         f"spot_price_per_hour,as_of,source\naws,us-east-1,x,L4,1,24,8,32,1.5,,{day},me\n", name="o.csv")
