"""The embedded snapshot and offers CSV parsing."""

from __future__ import annotations

from collections import defaultdict

from hetinfra.price_feeds.offers import load_embedded_snapshot, parse_offers_csv


def test_embedded_snapshot_is_valid_and_broad():
    snap = load_embedded_snapshot()
    assert len(snap.offers) > 150
    regions = defaultdict(set)
    for o in snap.offers:
        regions[o.cloud].add(o.region)
        assert o.price_per_hour > 0
        assert o.spot_price_per_hour is None or o.spot_price_per_hour <= o.price_per_hour
    assert all(len(regions[c]) >= 3 for c in ("aws", "gcp", "azure"))
    gpus = {o.gpu for o in snap.offers}
    assert {"T4", "L4", "A10G", "L40S", "A100", "A100-80GB", "H100", "H200"} <= gpus
    assert snap.as_of != "unknown" and len(snap.sources[0].sha256) == 64


def test_snapshot_known_prices():
    by = {(o.cloud, o.region, o.instance_type): o for o in load_embedded_snapshot().offers}
    g2 = by[("gcp", "us-central1", "g2-standard-4")]
    assert (g2.gpu, g2.gpu_count) == ("L4", 1)
    assert abs(g2.price_per_hour - 0.70683) < 1e-4  # host 0.14679 + L4 0.56004
    p5 = by[("aws", "us-east-1", "p5.48xlarge")]
    assert (p5.gpu, p5.gpu_count, p5.price_per_hour) == ("H100", 8, 55.04)


def test_user_offers_override_same_key():
    base = load_embedded_snapshot()
    extra = parse_offers_csv(
        "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"
        "aws,us-east-1,p5.48xlarge,H100,8,80,192,2048,40.0,\n"
        "lab,rack-1,box,L4,4,24,32,128,1.5,\n", name="mine.csv")
    merged = base.merged(extra)
    by = {(o.cloud, o.region, o.instance_type): o for o in merged.offers}
    assert by[("aws", "us-east-1", "p5.48xlarge")].price_per_hour == 40.0
    assert by[("lab", "rack-1", "box")].custom_cloud
    assert [s.name for s in merged.sources] == ["embedded-snapshot", "mine.csv"]
