"""Snapshot store round trip and ``load_offers``: live, fallbacks, strict, cache, PATH, max age."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from hetinfra.errors import FeedError, InvalidInputError
from hetinfra.price_feeds.base import FeedResult
from hetinfra.price_feeds.load import load_offers, refresh
from hetinfra.price_feeds.offers import Offer, load_embedded_snapshot
from hetinfra.price_feeds.store import SnapshotStore

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=timezone.utc)


def result(price=0.8048, fetched="2026-01-05T12:00:00Z", source="aws") -> FeedResult:
    o = [Offer("aws", "us-east-1", "g6.xlarge", "L4", 1, 24, 4, 16, price, 0.4, fetched, "aws-pricelist"),
         Offer("aws", "us-east-1", "p5.48xlarge", "H100", 8, 80, 192, 2048, 55.04, None, fetched, "aws-pricelist")]
    return FeedResult(source=source, label="aws-pricelist", offers=o, fetched_at=fetched,
                      coverage={"aws": frozenset({"us-east-1"})}, drops={"price <= 0": 1})


def by_key(offers):
    return {(o.cloud, o.region, o.instance_type): o for o in offers}


# --- store -----------------------------------------------------------------------------------

def test_store_round_trip_hash_stable_and_as_of(tmp_path):
    store = SnapshotStore(tmp_path / "s")
    a = store.save(result(), now=T0)
    b = store.save(result(fetched="2026-01-05T13:00:00Z"), now=T0 + timedelta(hours=1))
    assert a.sha256 == b.sha256  # same prices, different fetch time: same content hash
    assert a.path != b.path and a.path.name.startswith("20260105T120000") and a.path.name.endswith(a.sha256[:12])
    meta = json.loads((b.path / "meta.json").read_text())
    assert (meta["fetched_at"], meta["as_of"], meta["rows"], meta["drops"]) == (
        "2026-01-05T13:00:00Z", "2026-01-05T13:00:00Z", 2, {"price <= 0": 1})
    assert meta["coverage"] == {"aws": ["us-east-1"]}
    latest = store.latest_good("aws")
    assert latest.path == b.path
    snap = latest.snapshot()
    assert [s.name for s in snap.sources] == ["aws-pricelist"]
    assert (snap.sources[0].as_of, snap.sources[0].sha256, snap.sources[0].rows) == ("2026-01-05T13:00:00Z", b.sha256, 2)
    assert by_key(snap.offers)[("aws", "us-east-1", "g6.xlarge")] == Offer(
        "aws", "us-east-1", "g6.xlarge", "L4", 1, 24, 4, 16, 0.8048, 0.4, "2026-01-05T13:00:00Z", "aws-pricelist")
    assert store.save(result(price=0.9), now=T0 + timedelta(hours=2)).sha256 != a.sha256


def test_store_skips_corrupt_snapshot_for_last_good(tmp_path):
    store = SnapshotStore(tmp_path / "s")
    good = store.save(result(price=0.8), now=T0)
    bad = store.save(result(price=0.9), now=T0 + timedelta(hours=1))
    (bad.path / "offers.csv").write_text((bad.path / "offers.csv").read_text().replace("0.9", "0.1"))
    latest = store.latest_good("aws")
    assert latest.path == good.path
    assert any("does not match its sha256" in p for p in store.problems)


def test_store_prunes_and_default_dir(tmp_path, monkeypatch):
    store = SnapshotStore(tmp_path / "s", keep=2)
    for i in range(4):
        store.save(result(price=1 + i), now=T0 + timedelta(minutes=i))
    assert len(store.dirs("aws")) == 2
    assert [s.meta["rows"] for s in store.list("aws")] == [2, 2]
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(tmp_path / "env-cache"))
    assert SnapshotStore().root == tmp_path / "env-cache"


# --- load_offers: snapshot and max age -----------------------------------------------------

def test_snapshot_default_has_no_warnings():
    snap, warnings = load_offers()
    assert snap == load_embedded_snapshot() and warnings == []


def test_snapshot_max_age(monkeypatch):
    snap, warnings = load_offers("snapshot", max_age_h=24, now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert len(warnings) == 1 and "older than --max-age-h 24" in warnings[0] and "2024-07-01" in warnings[0]
    with pytest.raises(FeedError) as e:
        load_offers("snapshot", max_age_h=24, strict=True, now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert e.value.exit_code == 4
    assert load_offers("snapshot", max_age_h=24, now=datetime(2024, 7, 1, 12, tzinfo=timezone.utc))[1] == []


# --- load_offers: live ---------------------------------------------------------------------

def test_live_unreachable_falls_back_with_warnings(make_offline_config):
    cfg = make_offline_config()
    t0 = time.monotonic()
    snap, warnings = load_offers("live", config=cfg, timeout_s=1)
    assert time.monotonic() - t0 < 5
    assert snap.offers == load_embedded_snapshot().offers
    assert [w.split(":")[0] for w in warnings] == ["aws", "azure", "gcp"]
    assert all("live fetch failed" in w and "connection refused" in w and "using the embedded snapshot" in w
               for w in warnings)


def test_live_unreachable_strict_raises(make_offline_config):
    t0 = time.monotonic()
    with pytest.raises(FeedError) as e:
        load_offers("live", strict=True, config=make_offline_config(), timeout_s=1)
    assert e.value.exit_code == 4 and e.value.message.startswith("live feed aws failed")
    assert time.monotonic() - t0 < 5


def test_live_slow_server_never_hangs(feed_server, feed_config, fx):
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(200, fx.aws_csv(fx.aws_fixture_rows()), delay=3))
    cfg = feed_config(retries=1)
    t0 = time.monotonic()
    # two attempts, each cut at 0.15 s by a server 3 s slow: the test waits both out
    snap, warnings = load_offers("live:aws", config=cfg, timeout_s=0.15)
    assert time.monotonic() - t0 < 2.0
    assert len(warnings) == 1 and "timed out" in warnings[0] and "embedded snapshot" in warnings[0]
    assert snap.offers == load_embedded_snapshot().offers


def test_live_overlays_by_region_and_cloud_and_stores(feed_server, feed_config, fx):
    fx.serve_aws(feed_server, g6_price="0.9")
    fx.serve_azure(feed_server)
    fx.serve_gcp(feed_server)
    cfg = feed_config()
    snap, warnings = load_offers("live", config=cfg)
    got = by_key(snap.offers)
    emb = by_key(load_embedded_snapshot().offers)
    # AWS: us-east-1 replaced by the live feed, us-west-2 still the embedded rows
    assert got[("aws", "us-east-1", "g6.xlarge")].price_per_hour == 0.9
    assert ("aws", "us-east-1", "g5.xlarge") not in got and ("aws", "us-east-1", "g5.xlarge") in emb
    assert got[("aws", "us-west-2", "g6.xlarge")] == emb[("aws", "us-west-2", "g6.xlarge")]
    # Azure and GCP: whole clouds replaced
    assert sorted(k for k in got if k[0] == "azure") == [
        ("azure", "eastus", "Standard_NC24ads_A100_v4"), ("azure", "eastus", "Standard_NC4as_T4_v3"),
        ("azure", "westus3", "Standard_NC24ads_A100_v4")]
    assert got[("gcp", "us-central1", "g2-standard-8")].price_per_hour == 0.853608
    assert [s.name for s in snap.sources] == ["embedded-snapshot", "aws-pricelist", "azure-retail-prices",
                                              "gcp-billing-catalog"]
    assert snap.sources[0].rows == sum(1 for o in snap.offers if o.source not in
                                       ("aws-pricelist", "azure-retail-prices", "gcp-billing-catalog"))
    assert all(len(s.sha256) == 64 for s in snap.sources)
    assert "aws: dropped 2 rows: 1 GPU count not matching the family, 1 price <= 0" in warnings
    assert "azure: dropped 1 row: 1 spot above on-demand" in warnings
    store = SnapshotStore(cfg.cache_dir)
    assert store.sources() == ["aws", "azure", "gcp"]
    assert store.latest_good("aws").sha256 == snap.sources[1].sha256


def test_live_failure_uses_last_good_cached_snapshot(feed_server, feed_config, fx):
    cfg = feed_config()
    fx.serve_aws(feed_server, g6_price="0.9")
    first, _ = load_offers("live:aws", config=cfg)
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(500, "internal error"))
    second, warnings = load_offers("live:aws", config=cfg)
    assert second.offers == first.offers
    assert len(warnings) == 1 and "HTTP 500" in warnings[0] and "using the cached snapshot of" in warnings[0]
    with pytest.raises(FeedError, match="HTTP 500"):
        load_offers("live:aws", config=cfg, strict=True)


def test_live_malformed_data_falls_back(feed_server, feed_config, fx):
    feed_server.route(fx.AWS_PATH.format(region="us-east-1"), fx.Resp(200, "<html>503 Service Unavailable</html>"))
    snap, warnings = load_offers("live:aws", config=feed_config())
    assert snap.offers == load_embedded_snapshot().offers
    assert "not an EC2 price list CSV" in warnings[0]
    assert "embedded snapshot (as of 2024-07-01 to 2026-07-30; its aws rows 2025-11-01)" in warnings[0]
    with pytest.raises(FeedError, match="not an EC2 price list CSV"):
        load_offers("live:aws", config=feed_config(), strict=True)


def test_live_max_age_reuses_a_fresh_cache(feed_server, feed_config, fx):
    cfg = feed_config()
    fx.serve_aws(feed_server)
    load_offers("live:aws", config=cfg)
    path = fx.AWS_PATH.format(region="us-east-1")
    assert feed_server.hits(path) == 1
    snap, warnings = load_offers("live:aws", config=cfg, max_age_h=1)
    assert feed_server.hits(path) == 1  # not fetched again
    # only the embedded rows still used (other AWS regions, Azure, GCP) are older than 1 h
    assert len(warnings) == 1 and warnings[0].startswith("the embedded offers still used for aws, azure, gcp is ")
    later = datetime.now(timezone.utc) + timedelta(hours=3)
    snap, warnings = load_offers("live:aws", config=cfg, max_age_h=1, now=later)
    assert feed_server.hits(path) == 2  # too old: fetched again


def test_live_gcp_without_key(make_offline_config):
    snap, warnings = load_offers("live:gcp", config=make_offline_config(gcp_api_key=None))
    assert len(warnings) == 1 and "no Cloud Billing API key" in warnings[0] and "HETINFRA_GCP_API_KEY" in warnings[0]


def test_unknown_source_is_invalid_input():
    with pytest.raises(InvalidInputError, match="did you mean 'aws'"):
        load_offers("live:awz")


def test_refresh_then_cache_mode(feed_server, feed_config, fx):
    cfg = feed_config()
    fx.serve_aws(feed_server, g6_price="0.95")
    outcomes = refresh(["aws", "azure"], config=cfg)
    assert [(o.source, o.ok) for o in outcomes] == [("aws", True), ("azure", False)]
    assert outcomes[1].error.status == 404
    snap, warnings = load_offers("cache:aws,azure", config=cfg)
    assert by_key(snap.offers)[("aws", "us-east-1", "g6.xlarge")].price_per_hour == 0.95
    assert warnings == [f"azure: no cached snapshot in {cfg.cache_dir}; using the embedded snapshot (as of 2024-07-01 to 2026-07-30; its azure rows 2024-07-01)"]
    with pytest.raises(FeedError, match="no cached snapshot"):
        load_offers("cache:azure", config=cfg, strict=True)
    # the store root as a PATH behaves like cache mode
    snap2, _ = load_offers(str(cfg.cache_dir), config=cfg)
    assert snap2.offers == snap.offers


# --- load_offers: PATH ---------------------------------------------------------------------

def test_path_offers_csv_names_the_lines_it_drops_and_the_row_a_duplicate_lost_to(tmp_path):
    """The lenient default stays (rows dropped, not exit 2); the warning names the first three lines
    of each reason, and a duplicate the row kept: the first, and what the two disagree on."""
    p = tmp_path / "offers.csv"
    rows = ["lab,rack-1,box,L4,4,24,32,128,1.5,", "lab,rack-1,box,L4,4,24,32,128,1.5,",
            "", "lab,rack-1,box,L4,8,24,32,128,1.0,"] + [f"lab,r{k},box,L4,4,24,32,128,0," for k in range(4)]
    p.write_text("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,"
                 "spot_price_per_hour\n" + "\n".join(rows) + "\n")
    snap, warnings = load_offers(str(p))
    assert [(o.region, o.price_per_hour) for o in snap.offers] == [("rack-1", 1.5)]
    assert warnings == [
        f"{p}: dropped 6 rows: 4 price <= 0 ({p}:6; {p}:7; {p}:8; ...), 2 duplicate ({p}:3 repeats {p}:2; "
        f"{p}:5 conflicts with {p}:2, the row kept: price_per_hour 1.5 there, 1.0 here and gpu_count 4 there, 8 here)"]


def test_path_offers_csv_drops_bad_rows(tmp_path):
    p = tmp_path / "offers.csv"
    p.write_text("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"
                 "lab,rack-1,box,L4,4,24,32,128,1.5,\n"
                 "lab,rack-1,box2,L4,4,24,32,128,0,\n"
                 "lab,rack-2,box,L4,4,24,32,128,2.0,2.5\n")
    snap, warnings = load_offers(str(p))
    assert [(o.cloud, o.region, o.instance_type) for o in snap.offers] == [("lab", "rack-1", "box")]
    assert warnings == [f"{p}: dropped 2 rows: 1 price <= 0 ({p}:3), 1 spot above on-demand ({p}:4)"]
    assert snap.sources[0].name == str(p) and snap.sources[0].rows == 1
    with pytest.raises(InvalidInputError) as e:
        load_offers(str(p), strict=True)
    assert e.value.exit_code == 2 and ":3:" in e.value.message


def test_path_snapshot_dir_and_errors(tmp_path):
    store = SnapshotStore(tmp_path / "s")
    saved = store.save(result(), now=T0)
    snap, warnings = load_offers(str(saved.path))
    assert len(snap.offers) == 2 and warnings == [] and snap.sources[0].sha256 == saved.sha256
    (saved.path / "offers.csv").write_text("tampered\n")
    with pytest.raises(InvalidInputError, match="sha256"):
        load_offers(str(saved.path))
    with pytest.raises(InvalidInputError, match="no such file"):
        load_offers(str(tmp_path / "missing.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="neither an offers CSV"):
        load_offers(str(tmp_path / "empty"))
