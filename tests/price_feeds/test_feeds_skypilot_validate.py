"""SkyPilot catalog feed on the shared v8 extract, the snapshot builder refactor, and row validation."""

from __future__ import annotations

import importlib.util

import pytest

from hetinfra.price_feeds.offers import Offer, load_embedded_snapshot
from hetinfra.price_feeds.skypilot import SkyPilotAdapter
from hetinfra.price_feeds.validate import Reject, Validator, drops_summary, parse_offers_lenient


def by_key(offers):
    return {(o.cloud, o.region, o.instance_type): o for o in offers}


def test_skypilot_dir_gcp_host_plus_gpu(shared_catalog, feed_config):
    res = SkyPilotAdapter(feed_config(skypilot_catalog=str(shared_catalog))).fetch()
    got = by_key(res.offers)
    g2 = got[("gcp", "us-central1", "g2-standard-4")]
    # README "Column encoding": L4:1 in us-central1 = g2-standard-4 0.14679 + L4 0.56004 = 0.70683
    assert (g2.gpu, g2.gpu_count, g2.price_per_hour) == ("L4", 1, 0.70683)
    assert g2.price_per_hour == round(0.14679 + 0.56004, 6)
    a2 = got[("gcp", "us-central1", "a2-highgpu-1g")]
    assert (a2.price_per_hour, a2.spot_price_per_hour) == (3.67339, 1.80385)  # feeds.md section 5
    assert got[("gcp", "us-east4", "a3-highgpu-8g")].price_per_hour == 87.83247
    p5 = got[("aws", "us-east-1", "p5.48xlarge")]
    assert (p5.gpu, p5.gpu_count, p5.price_per_hour) == ("H100", 8, 55.04)
    nd = got[("azure", "eastus", "Standard_ND96isr_H100_v5")]
    assert (nd.gpu_count, nd.price_per_hour) == (8, 98.32)  # the catalog's count 12 fixed
    assert ("aws", "us-east-2", "p5e.48xlarge") not in got  # empty on-demand price
    assert res.drops["no on-demand price"] >= 1 and res.drops["unknown GPU"] >= 1  # K80, M60, ...
    assert res.coverage == {"aws": None, "azure": None, "gcp": None}
    assert res.label == "skypilot-catalog"


def test_skypilot_url_with_missing_cloud(shared_catalog, feed_server, feed_config, fx):
    for cloud in ("aws", "gcp"):
        feed_server.route(f"/catalogs/v8/{cloud}/vms.csv", fx.Resp(200, (shared_catalog / cloud / "vms.csv").read_text()))
    res = SkyPilotAdapter(feed_config(skypilot_catalog=feed_server.url + "/catalogs/v8")).fetch()
    assert {o.cloud for o in res.offers} == {"aws", "gcp"}
    assert res.coverage == {"aws": None, "gcp": None}
    assert any("no azure/vms.csv (HTTP 404)" in w for w in res.warnings)
    assert by_key(res.offers)[("gcp", "us-central1", "g2-standard-4")].price_per_hour == 0.70683


def test_skypilot_no_catalog_is_not_configured(feed_config, tmp_path):
    from hetinfra.price_feeds.base import FeedNotConfigured

    with pytest.raises(FeedNotConfigured, match="no catalog"):
        SkyPilotAdapter(feed_config(skypilot_catalog=str(tmp_path / "nothing"))).fetch()


def test_skypilot_zone_disagreement_is_dropped(tmp_path, feed_config):
    (tmp_path / "cat" / "azure").mkdir(parents=True)
    (tmp_path / "cat" / "aws").mkdir(parents=True)
    (tmp_path / "cat" / "aws" / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n"
        "g6.xlarge,L4,1,4,16,,0.8048,0.4,us-east-1,use1-az1,x86_64\n"
        "g6.xlarge,L4,1,4,16,,0.9,0.39,us-east-1,use1-az2,x86_64\n"
        "g6.xlarge,L4,1,4,16,,0.8048,0.41,us-east-2,use2-az1,x86_64\n"
        "g6.xlarge,L4,1,4,16,,0.8048,0.38,us-east-2,use2-az2,x86_64\n")
    res = SkyPilotAdapter(feed_config(skypilot_catalog=str(tmp_path / "cat"))).fetch()
    assert [(o.region, o.spot_price_per_hour) for o in res.offers] == [("us-east-2", 0.38)]  # min over AZs
    assert res.drops == {"on-demand differs across zones": 1}


def test_build_snapshot_reproduces_the_embedded_snapshot(shared_catalog, tmp_path, fx):
    """tools/build_snapshot.py now parses through price_feeds.skypilot_catalog: same bytes as shipped."""
    spec = importlib.util.spec_from_file_location("build_snapshot_under_test", fx.REPO / "tools" / "build_snapshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "snap.csv"
    world = fx.REPO / "tools" / "snapshot_data" / "skypilot-v8-world"
    assert mod.main([str(shared_catalog), str(world), "--out", str(out)]) == 0
    assert out.read_text() == (fx.REPO / "price_feeds" / "data" / "offers_snapshot.csv").read_text()


# --- validation ------------------------------------------------------------------------------

def offer(**kw) -> Offer:
    base = dict(cloud="aws", region="us-east-1", instance_type="g6.xlarge", gpu="L4", gpu_count=1, gpu_memory_gb=24,
                vcpus=4, memory_gb=16, price_per_hour=0.8048, spot_price_per_hour=0.4, as_of="t", source="s")
    base.update(kw)
    return Offer(**base)


def test_validator_drops_with_reasons():
    v = Validator()
    rows = [
        offer(),
        offer(region="us-east-2", spot_price_per_hour=0.9),  # spot above on-demand
        offer(region="us-west-2", spot_price_per_hour=1.0),  # spot above on-demand
        offer(cloud="lab", region="r", instance_type="box", gpu="X9000"),  # unknown GPU
    ]
    kept = [v.add(r) for r in rows]
    assert kept == [True, False, False, False]
    assert v.summary() == "dropped 3 rows: 2 spot above on-demand, 1 unknown GPU"
    assert v.examples["spot above on-demand"] == ["aws/us-east-2/g6.xlarge", "aws/us-west-2/g6.xlarge"]


@pytest.mark.parametrize("row,reason", [
    (offer(price_per_hour=0.0), "price <= 0"),
    (offer(price_per_hour=-1.0, spot_price_per_hour=None), "price <= 0"),
    (offer(spot_price_per_hour=0.0), "spot <= 0"),
    (offer(instance_type="g6.12xlarge", gpu_count=1), "GPU count not matching the family"),
    (offer(cloud="azure", instance_type="Standard_NC24ads_A100_v4", gpu="A100", gpu_count=1),
     "GPU count not matching the family"),
    (offer(cloud="gcp", instance_type="g2-standard-24", gpu="L4", gpu_count=1), "GPU count not matching the family"),
    (offer(gpu_count=0), "bad GPU count"),
    (offer(region=""), "missing field"),
    (offer(gpu_memory_gb=0), "GPU memory <= 0"),
])
def test_validator_reasons(row, reason):
    v = Validator()
    assert v.add(row) is False and dict(v.drops) == {reason: 1}


def test_validator_duplicates_and_rejects():
    v = Validator()
    v.add(offer())
    v.add(offer(price_per_hour=0.9))
    v.add(Reject("not a number", "f.csv:3"))
    assert len(v.offers) == 1 and v.offers[0].price_per_hour == 0.8048
    assert v.summary() == "dropped 2 rows: 1 duplicate, 1 not a number"
    assert drops_summary({}) is None and drops_summary({"x": 1}) == "dropped 1 row: 1 x"


def test_lenient_csv_drops_rows_but_header_is_strict():
    from hetinfra.errors import InvalidInputError

    text = ("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"
            "lab,rack-1,box,L4,4,24,32,128,1.5,\n"
            "lab,rack-1,box2,L4,four,24,32,128,1.5,\n"
            "lab,rack-2,box,L4,4,,32,128,2.0,2.5\n"
            "lab,rack-3,box,L4,2.5,24,32,128,2.0,\n")
    v = parse_offers_lenient(text, name="mine.csv")
    assert [(o.region, o.gpu_memory_gb) for o in v.offers] == [("rack-1", 24)]
    assert dict(v.drops) == {"not a number": 1, "spot above on-demand": 1, "bad GPU count": 1}
    with pytest.raises(InvalidInputError) as e:
        parse_offers_lenient("cloud,region\naws,x\n", name="bad.csv")
    assert e.value.exit_code == 2 and "lacks column" in e.value.message


def test_embedded_snapshot_passes_feed_validation():
    v = Validator()
    for o in load_embedded_snapshot().offers:
        v.add(o)
    assert v.dropped == 0, v.summary()
