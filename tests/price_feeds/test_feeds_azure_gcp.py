"""Azure Retail Prices (NextPageLink paging) and GCP Cloud Billing Catalog (nextPageToken) adapters."""

from __future__ import annotations

import json

import pytest

from hetinfra.price_feeds.azure import AzureRetailAdapter, rebase
from hetinfra.price_feeds.base import FeedNotConfigured
from hetinfra.price_feeds.gcp import GcpCatalogAdapter, classify
from hetinfra.price_feeds.http import FetchError
from tests.price_feeds.conftest import by_key


# --- Azure -----------------------------------------------------------------------------------

def test_azure_pages_spot_and_lookalikes(feed_server, feed_config, fx):
    fx.serve_azure(feed_server)
    res = AzureRetailAdapter(feed_config()).fetch()
    got = by_key(res.offers)
    assert sorted(got) == [("eastus", "Standard_NC24ads_A100_v4"), ("eastus", "Standard_NC4as_T4_v3"),
                           ("westus3", "Standard_NC24ads_A100_v4")]
    t4 = got[("eastus", "Standard_NC4as_T4_v3")]
    # Windows 0.736, Low Priority 0.0526, DevTest 0.3 and Reservation 2900 rows are not taken
    assert (t4.gpu, t4.gpu_count, t4.price_per_hour, t4.spot_price_per_hour) == ("T4", 1, 0.526, 0.062699)
    assert (t4.vcpus, t4.memory_gb, t4.gpu_memory_gb) == (4, 28, 16)
    a100 = got[("eastus", "Standard_NC24ads_A100_v4")]
    assert (a100.gpu, a100.price_per_hour, a100.spot_price_per_hour) == ("A100-80GB", 3.673, 0.444433)
    assert got[("westus3", "Standard_NC24ads_A100_v4")].spot_price_per_hour is None
    # ND96isr H100 v5: its "Spot" meter (120) is above on-demand (98.32): dropped with that reason
    assert res.drops == {"spot above on-demand": 1}
    # page 2 came from the loopback server, not from prices.azure.com (NextPageLink rebased)
    queries = [q for p, q in feed_server.requests if p == "/api/retail/prices"]
    assert len(queries) == 2 and queries[1].get("$skip") == "1000"
    assert "priceType eq 'Consumption'" in queries[0]["$filter"]
    assert res.coverage == {"azure": None}


def test_azure_rebase():
    assert rebase("https://prices.azure.com:443/api/retail/prices?a=1&$skip=1000", "http://127.0.0.1:8080") == \
        "http://127.0.0.1:8080/api/retail/prices?a=1&$skip=1000"
    assert rebase("/api/retail/prices?x", "http://h/mirror") == "http://h/mirror/api/retail/prices?x"


def test_azure_malformed_page(feed_server, feed_config, fx):
    feed_server.route("/api/retail/prices", fx.Resp(200, json.dumps({"error": "throttled"})))
    with pytest.raises(FetchError, match="no Items list"):
        AzureRetailAdapter(feed_config()).fetch()


def test_azure_html_page(feed_server, feed_config, fx):
    feed_server.route("/api/retail/prices", fx.Resp(200, "<html>gateway</html>"))
    with pytest.raises(FetchError, match="malformed JSON"):
        AzureRetailAdapter(feed_config()).fetch()


def test_azure_page_loop_is_stopped(feed_server, feed_config, fx):
    page = {"Items": [fx.az_item("Standard_NC4as_T4_v3", "eastus", 0.526, sku_name="NC4as T4 v3",
                                 product="Virtual Machines NCasT4_v3 Series")],
            "NextPageLink": "https://prices.azure.com/api/retail/prices?same=1"}
    feed_server.route("/api/retail/prices", fx.Resp(200, json.dumps(page)))
    with pytest.raises(FetchError, match="loops back"):
        AzureRetailAdapter(feed_config()).fetch()
    assert feed_server.hits("/api/retail/prices") == 2


def test_azure_429_then_ok(feed_server, feed_config, fx):
    p1, p2 = fx.azure_pages(None)
    feed_server.route("/api/retail/prices", fx.Resp(429, "", {"Retry-After": "0"}), fx.Resp(200, json.dumps(p1)))
    res = AzureRetailAdapter(feed_config()).fetch()
    assert by_key(res.offers)[("eastus", "Standard_NC4as_T4_v3")].price_per_hour == 0.526
    assert feed_server.hits("/api/retail/prices") == 2


# --- GCP -------------------------------------------------------------------------------------

def test_gcp_sums_core_ram_gpu_exactly(feed_server, feed_config, fx):
    fx.serve_gcp(feed_server)
    res = GcpCatalogAdapter(feed_config()).fetch()
    got = by_key(res.offers)
    g2_8 = got[("us-central1", "g2-standard-8")]
    # feeds.md section 3 worked example: 8 x 0.024988 + 32 x 0.002927 + 0.560040 = 0.853608
    assert g2_8.price_per_hour == 0.853608
    assert g2_8.spot_price_per_hour == round(8 * 0.00999 + 32 * 0.00117 + 0.2231, 6) == 0.34046
    assert (g2_8.gpu, g2_8.gpu_count, g2_8.vcpus, g2_8.memory_gb) == ("L4", 1, 8, 32)
    assert got[("us-central1", "g2-standard-4")].price_per_hour == 0.706824  # SkyPilot's catalog: 0.70683
    assert got[("us-central1", "g2-standard-24")].price_per_hour == 2.000784  # 2 x L4
    # A100 40GB vs 80GB SKUs told apart: a2-highgpu-1g = feeds.md section 5's 3.67339
    assert got[("us-central1", "a2-highgpu-1g")].price_per_hour == 3.673385
    assert got[("us-central1", "a2-ultragpu-1g")].price_per_hour == round(12 * 0.031611 + 170 * 0.004237 + 3.9, 6)
    assert got[("us-central1", "a2-highgpu-1g")].spot_price_per_hour is None  # no A2 spot SKUs served
    assert got[("us-central1", "a2-megagpu-16g")].gpu_count == 16
    assert {o.instance_type.split("-")[0] for o in res.offers} == {"g2", "a2"}
    assert feed_server.hits("/v1/services/6F81-5844-456A/skus") == 2
    assert [q.get("pageToken") for _, q in feed_server.requests] == [None, "page-2"]
    assert all(q["key"] == "test-key" and q["pageSize"] == "5000" for _, q in feed_server.requests)


@pytest.mark.parametrize("desc,usage,expected", [
    ("Nvidia L4 GPU running in Americas", "OnDemand", ("gpu", "L4", False)),
    ("Spot Preemptible Nvidia L4 GPU running in Americas", "Preemptible", ("gpu", "L4", True)),
    ("Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo", "Preemptible",
     ("gpu", "H100-MEGA", True)),
    ("Nvidia H100 80GB GPU running in Americas", "OnDemand", ("gpu", "H100", False)),
    ("Nvidia H100 80GB Plus GPU running in Americas", "OnDemand", ("gpu", "H100-MEGA", False)),
    ("A4 Nvidia B200 (1 gpu slice) running in Americas", "OnDemand", ("gpu", "B200", False)),
    ("G2 Instance Core running in Americas", "OnDemand", ("core", "G2", False)),
    ("Spot Preemptible A3Plus Instance Ram running in Tokyo", "Preemptible", ("ram", "A3Plus", True)),
    ("Nvidia H100 80GB GPU DWS Defined Duration running in Americas", "OnDemand", None),
    ("Nvidia L4 GPU running in Americas DWS Calendar Mode", "OnDemand", None),
    ("Commitment v1: Nvidia L4 GPU running in Americas", "Commit1Yr", None),
    ("Commitment v1: Nvidia L4 GPU running in Americas", "OnDemand", None),
    ("Reserved Nvidia L4 GPU running in Americas", "OnDemand", None),
    ("N2 Custom Instance Core running in Americas", "OnDemand", None),
    ("Nvidia L4 GPU running in Americas", "Preemptible", None),  # usage and name disagree
    ("Spot Preemptible G2 Instance Core running in Americas", "OnDemand", None),
    ("Nvidia Tesla K80 GPU running in Americas", "OnDemand", None),  # not a GPU hetinfra prices
])
def test_gcp_classify(desc, usage, expected, fx):
    assert classify(fx.gcp_sku(desc, 1.0, usage=usage)) == expected


def test_gcp_without_key_is_not_configured(feed_server, feed_config, fx):
    fx.serve_gcp(feed_server)
    with pytest.raises(FeedNotConfigured) as e:
        GcpCatalogAdapter(feed_config(gcp_api_key=None)).fetch()
    assert "HETINFRA_GCP_API_KEY" in e.value.hint and feed_server.requests == []


def test_gcp_bad_key_403(feed_server, feed_config, fx):
    fx.serve_gcp(feed_server)
    with pytest.raises(FetchError) as e:
        GcpCatalogAdapter(feed_config(gcp_api_key="wrong-key")).fetch()
    assert e.value.status == 403 and "wrong-key" not in str(e.value) and feed_server.hits(
        "/v1/services/6F81-5844-456A/skus") == 1


def test_gcp_malformed_and_token_loop(feed_server, feed_config, fx):
    path = "/v1/services/6F81-5844-456A/skus"
    feed_server.route(path, fx.Resp(200, json.dumps({"skus": "oops"})))
    with pytest.raises(FetchError, match="no skus list"):
        GcpCatalogAdapter(feed_config()).fetch()
    feed_server.route(path, fx.Resp(200, json.dumps({"skus": [], "nextPageToken": "same"})))
    with pytest.raises(FetchError, match="repeats"):
        GcpCatalogAdapter(feed_config()).fetch()


def test_gcp_500_then_ok(feed_server, feed_config, fx):
    p1, p2 = fx.gcp_pages()
    p1["nextPageToken"] = ""
    p1["skus"] += p2["skus"]
    path = "/v1/services/6F81-5844-456A/skus"
    feed_server.route(path, fx.Resp(500, "internal"), fx.Resp(503, "unavailable"), fx.Resp(200, json.dumps(p1)))
    res = GcpCatalogAdapter(feed_config()).fetch()
    assert by_key(res.offers)[("us-central1", "g2-standard-8")].price_per_hour == 0.853608
    assert feed_server.hits(path) == 3
