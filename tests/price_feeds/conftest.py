"""Fixtures for the feed tests: a loopback HTTP server, a closed port, bodies in the real formats.

Every test here runs with HETINFRA_* variables cleared, the snapshot store in tmp, AWS credentials
and the EC2 metadata service out of reach, and sockets limited to loopback (any other connect is
refused and fails the test at teardown).
"""

from __future__ import annotations

from hetinfra.price_feeds.aws import BULK_HEADER

import csv
import io
import json
import os
import _socket
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from tests.conftest import QuietHandler


def by_key(offers):
    """Offers by (region, instance type)."""
    return {(o.region, o.instance_type): o for o in offers}


REPO = Path(__file__).resolve().parents[2]
SHARED_CATALOG = REPO.parent / "shared" / "data" / "skypilot-catalog" / "v8"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def _feeds_sandbox(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith("HETINFRA_") or k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                                              "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                              "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("SKY_RUNTIME_DIR", str(tmp_path / "no-sky"))
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)

    violations: list = []
    # The C implementation, not whatever socket.socket.connect is now: tests/conftest.py's
    # session-wide SkyPilot guard refuses every INET connect (loopback included) once it has run.
    # This guard is the feed tests' own: loopback only.
    real_connect = _socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
            violations.append(address)
            raise ConnectionRefusedError(f"test sandbox: non-loopback connect to {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield
    assert not violations, f"network access outside loopback: {violations}"


@dataclass
class Resp:
    status: int = 200
    body: bytes | str = b""
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds to sleep before answering

    def data(self) -> bytes:
        return self.body.encode() if isinstance(self.body, str) else self.body


class FeedServer:
    """Routes: path -> list of Resp (served in order, the last one repeats) or a callable(query)."""

    def __init__(self):
        self.routes: dict[str, object] = {}
        self.requests: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):  # Nagle's algorithm off: tests/conftest.py QuietHandler says why
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
                with server._lock:
                    server.requests.append((parts.path, query))
                    route = server.routes.get(parts.path)
                    if route is None:
                        resp = Resp(404, "not found")
                    elif callable(route):
                        resp = route(query)
                    else:
                        resp = route[0] if len(route) == 1 else route.pop(0)
                if resp.delay:
                    time.sleep(resp.delay)
                data = resp.data()
                try:
                    self.send_response(resp.status)
                    for k, v in resp.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def route(self, path: str, *responses) -> None:
        if len(responses) == 1 and callable(responses[0]):
            self.routes[path] = responses[0]
        else:
            self.routes[path] = list(responses)

    def hits(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def feed_server():
    server = FeedServer()
    yield server
    server.close()


@pytest.fixture
def shared_catalog() -> Path:
    if not (SHARED_CATALOG / "gcp" / "vms.csv").is_file():
        pytest.skip(f"shared SkyPilot catalog extract not found at {SHARED_CATALOG}")
    return SHARED_CATALOG


# --- AWS price list bulk CSV (feeds.md section 1a) -------------------------------------------

AWS_HEADER = BULK_HEADER


def aws_row(itype: str, price: str, *, region: str = "us-east-1", term: str = "OnDemand", os_: str = "Linux",
            tenancy: str = "Shared", capacity: str = "Used", sw: str = "NA", license_: str = "No License required",
            vcpu: str = "4", memory: str = "16 GiB", gpu: str = "1", market: str = "OnDemand", sku: str = "SKU1",
            unit: str = "Hrs") -> dict:
    return {
        "SKU": sku, "OfferTermCode": "JRTCKXETXF", "RateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "TermType": term,
        "PriceDescription": f"${price} per On Demand {os_} {itype} Instance Hour", "EffectiveDate": "2025-11-01",
        "StartingRange": "0", "EndingRange": "Inf", "Unit": unit, "PricePerUnit": price, "Currency": "USD",
        "Product Family": "Compute Instance", "serviceCode": "AmazonEC2", "Location": "US East (N. Virginia)",
        "Location Type": "AWS Region", "Instance Type": itype, "Current Generation": "Yes",
        "Instance Family": "GPU instance", "vCPU": vcpu, "Memory": memory, "Storage": "1 x 250 NVMe SSD",
        "Network Performance": "Up to 10 Gigabit", "Processor Architecture": "64-bit", "Tenancy": tenancy,
        "Operating System": os_, "License Model": license_, "usageType": f"BoxUsage:{itype}",
        "operation": "RunInstances", "CapacityStatus": capacity, "GPU": gpu, "GPU Memory": "24 GB",
        "MarketOption": market, "Pre Installed S/W": sw, "Region Code": region, "serviceName": "Amazon Elastic Compute Cloud",
        "VPCNetworkingSupport": "true",
    }


def aws_csv(rows: list[dict], *, publication: str = "2025-11-14T21:04:53Z") -> str:
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["FormatVersion", "v1.0"])
    w.writerow(["Disclaimer", "This pricing list is for informational purposes only. All prices are subject to "
                              "the additional terms included in the pricing pages on http://aws.amazon.com. "
                              "All Free Tier prices are also subject to the terms included at "
                              "https://aws.amazon.com/free/"])
    w.writerow(["Publication Date", publication])
    w.writerow(["Version", "20251114210453"])
    w.writerow(["OfferCode", "AmazonEC2"])
    w.writerow(AWS_HEADER)
    for r in rows:
        w.writerow([r.get(c, "") for c in AWS_HEADER])
    return buf.getvalue()


def aws_fixture_rows(region: str = "us-east-1", g6_price: str = "0.8048000000") -> list[dict]:
    """Kept: g6.xlarge, p5.48xlarge, p4d.24xlarge. Look-alikes skipped; two rows dropped."""
    return [
        aws_row("g6.xlarge", g6_price, region=region),
        aws_row("g6.xlarge", "0.5040000000", region=region, term="Reserved"),  # reserved term
        aws_row("g6.xlarge", "0.9888000000", region=region, os_="Windows"),
        aws_row("g6.xlarge", "1.1000000000", region=region, sw="SQL Std"),
        aws_row("g6.xlarge", "0.8900000000", region=region, tenancy="Dedicated"),
        aws_row("g6.xlarge", "0.8048000000", region=region, tenancy="Host"),
        aws_row("g6.xlarge", "0.0000000000", region=region, capacity="UnusedCapacityReservation"),
        aws_row("g6.xlarge", "0.8048000000", region=region, capacity="AllocatedCapacityReservation"),
        aws_row("g6.xlarge", "0.9000000000", region=region, license_="Bring your own license"),
        aws_row("m5.xlarge", "0.1920000000", region=region, gpu=""),  # not a GPU family
        aws_row("p5.48xlarge", "55.0400000000", region=region, vcpu="192", memory="2048 GiB", gpu="8"),
        aws_row("p4d.24xlarge", "21.9576420000", region=region, vcpu="96", memory="1152 GiB", gpu="8"),
        aws_row("g5.12xlarge", "5.6720000000", region=region, vcpu="48", memory="192 GiB", gpu="8"),  # wrong count
        aws_row("g5.xlarge", "0.0000000000", region=region),  # price 0
    ]


# --- Azure Retail Prices API (feeds.md section 2) --------------------------------------------

def az_item(sku: str, region: str, price: float, *, sku_name: str, product: str, meter: str | None = None,
            type_: str = "Consumption", unit: str = "1 Hour") -> dict:
    return {
        "currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
        "armRegionName": region, "location": "US East", "effectiveStartDate": "2024-07-01T00:00:00Z",
        "meterId": "00000000-0000-0000-0000-000000000000", "meterName": meter or sku_name,
        "productId": "DZH318Z0BQPS", "skuId": "DZH318Z0BQPS/00TG", "productName": product,
        "skuName": sku_name, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute", "unitOfMeasure": unit, "type": type_, "isPrimaryMeterRegion": True,
        "armSkuName": sku,
    }


def azure_pages(next_link: str) -> tuple[dict, dict]:
    t4 = "Virtual Machines NCasT4_v3 Series"
    page1 = {
        "BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
        "Items": [
            az_item("Standard_NC4as_T4_v3", "eastus", 0.526, sku_name="NC4as T4 v3", product=t4),
            az_item("Standard_NC4as_T4_v3", "eastus", 0.062699, sku_name="NC4as T4 v3 Spot", product=t4),
            az_item("Standard_NC4as_T4_v3", "eastus", 0.736, sku_name="NC4as T4 v3", product=t4 + " Windows"),
            az_item("Standard_NC4as_T4_v3", "eastus", 0.0526, sku_name="NC4as T4 v3 Low Priority", product=t4),
            az_item("Standard_NC4as_T4_v3", "eastus", 0.3, sku_name="NC4as T4 v3", product=t4, type_="DevTestConsumption"),
            az_item("Standard_NC4as_T4_v3", "eastus", 2900.0, sku_name="NC4as T4 v3", product=t4, type_="Reservation",
                    unit="1 Hour"),
            az_item("Standard_D2s_v3", "eastus", 0.096, sku_name="D2s v3", product="Virtual Machines DSv3 Series"),
        ],
        "NextPageLink": next_link, "Count": 7,
    }
    a100 = "Virtual Machines NCADS_A100_v4 Series"
    h100 = "Virtual Machines NDsH100v5 Series"
    page2 = {
        "BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
        "Items": [
            az_item("Standard_NC24ads_A100_v4", "eastus", 3.673, sku_name="NC24ads A100 v4", product=a100),
            az_item("Standard_NC24ads_A100_v4", "eastus", 0.444433, sku_name="NC24ads A100 v4 Spot", product=a100),
            az_item("Standard_NC24ads_A100_v4", "westus3", 3.673, sku_name="NC24ads A100 v4", product=a100),
            az_item("Standard_ND96isr_H100_v5", "eastus", 98.32, sku_name="ND96isr H100 v5", product=h100),
            az_item("Standard_ND96isr_H100_v5", "eastus", 120.0, sku_name="ND96isr H100 v5 Spot", product=h100),
            az_item("Standard_ND96isr_H100_v5", "eastus", 110.0, sku_name="ND96isr H100 v5",
                    product="Virtual Machines NDsH100v5 Series Srs Win"),
        ],
        "NextPageLink": None, "Count": 6,
    }
    return page1, page2


def serve_azure(server: FeedServer, *, host_link: str = "https://prices.azure.com:443") -> None:
    link = (f"{host_link}/api/retail/prices?api-version=2023-01-01-preview&$filter=serviceName%20eq%20"
            "%27Virtual%20Machines%27&$skip=1000")
    p1, p2 = azure_pages(link)

    def route(query):
        return Resp(200, json.dumps(p2 if query.get("$skip") == "1000" else p1),
                    {"Content-Type": "application/json"})

    server.route("/api/retail/prices", route)


# --- GCP Cloud Billing Catalog (feeds.md section 3) ------------------------------------------

def gcp_sku(desc: str, price: float, *, usage: str = "OnDemand", group: str = "GPU", unit: str = "h",
            regions=("us-central1",), family: str = "Compute") -> dict:
    units, nanos = int(price), round((price - int(price)) * 1e9)
    return {
        "name": f"services/6F81-5844-456A/skus/{abs(hash(desc + usage)) % 10**8:08X}",
        "skuId": f"{abs(hash(desc + usage)) % 10**8:08X}", "description": desc,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family, "resourceGroup": group,
                     "usageType": usage},
        "serviceRegions": list(regions),
        "pricingInfo": [{"summary": "", "pricingExpression": {
            "usageUnit": unit, "displayQuantity": 1, "usageUnitDescription": "hour",
            "baseUnit": "s", "baseUnitDescription": "second", "baseUnitConversionFactor": 3600,
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(units),
                                                                  "nanos": nanos}}]},
            "aggregationInfo": {"aggregationLevel": "ACCOUNT", "aggregationInterval": "DAILY", "aggregationCount": 0},
            "currencyConversionRate": 1, "effectiveTime": "2025-11-01T00:00:00Z"}],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": list(regions)},
    }


def gcp_pages() -> tuple[dict, dict]:
    """Look-alikes come FIRST, so a look-alike that slips through changes the totals (first kept)."""
    page1 = {"skus": [
        gcp_sku("Commitment v1: G2 Cpu in Americas for 1 Year", 0.0157, usage="Commit1Yr", group="CPU"),
        gcp_sku("Commitment v1: Nvidia L4 GPU running in Americas", 0.35, usage="Commit1Yr"),
        gcp_sku("Nvidia L4 GPU DWS Defined Duration running in Americas", 0.30),
        gcp_sku("Reserved Nvidia L4 GPU running in Americas", 0.10),
        gcp_sku("Nvidia L4 GPU running in Americas", 0.01, usage="Preemptible"),  # spot usage, on-demand name
        gcp_sku("G2 Custom Instance Core running in Americas", 0.05, group="CPU"),
        gcp_sku("Nvidia L4 GPU running in Americas", 0.56004),
        gcp_sku("G2 Instance Core running in Americas", 0.024988, group="CPU"),
        gcp_sku("G2 Instance Ram running in Americas", 0.002927, group="RAM", unit="GiBy.h"),
        gcp_sku("Spot Preemptible G2 Instance Core running in Americas", 0.00999, usage="Preemptible", group="CPU"),
        gcp_sku("Storage PD Capacity", 0.04, family="Storage", group="PDStandard", unit="GiBy.mo"),
    ], "nextPageToken": "page-2"}
    page2 = {"skus": [
        gcp_sku("Spot Preemptible G2 Instance Ram running in Americas", 0.00117, usage="Preemptible",
                group="RAM", unit="GiBy.h"),
        gcp_sku("Spot Preemptible Nvidia L4 GPU running in Americas", 0.2231, usage="Preemptible"),
        gcp_sku("Nvidia Tesla A100 80GB GPU running in Americas", 3.9),
        gcp_sku("Nvidia Tesla A100 GPU running in Americas", 2.933908),
        gcp_sku("A2 Instance Core running in Americas", 0.031611, group="CPU"),
        gcp_sku("A2 Instance Ram running in Americas", 0.004237, group="RAM", unit="GiBy.h"),
    ], "nextPageToken": ""}
    return page1, page2


def serve_gcp(server: FeedServer, key: str = "test-key") -> None:
    p1, p2 = gcp_pages()

    def route(query):
        if query.get("key") != key:
            return Resp(403, json.dumps({"error": {"code": 403, "message": "API key not valid."}}))
        return Resp(200, json.dumps(p2 if query.get("pageToken") == "page-2" else p1),
                    {"Content-Type": "application/json"})

    server.route("/v1/services/6F81-5844-456A/skus", route)


AWS_PATH = "/offers/v1.0/aws/AmazonEC2/current/{region}/index.csv"


def serve_aws(server: FeedServer, regions=("us-east-1",), g6_price: str = "0.8048000000") -> None:
    for region in regions:
        server.route(AWS_PATH.format(region=region),
                     Resp(200, aws_csv(aws_fixture_rows(region, g6_price)), {"Content-Type": "text/csv"}))


@pytest.fixture
def feed_config(tmp_path, feed_server):
    """A FeedConfig pointing every live source at the loopback server; no retries wait long."""
    from hetinfra.price_feeds.config import FeedConfig

    def make(**kw) -> FeedConfig:
        base = dict(cache_dir=tmp_path / "cache", aws_pricing_url=feed_server.url, aws_regions=("us-east-1",),
                    aws_spot="off", azure_prices_url=feed_server.url, gcp_billing_url=feed_server.url,
                    gcp_api_key="test-key", skypilot_catalog=str(tmp_path / "no-catalog"), timeout_s=2.0,
                    retries=2, backoff_s=0.01, deadline_s=10.0)
        base.update(kw)
        return FeedConfig(**base)

    return make


def offline_config(tmp_path, port: int, **kw):
    from hetinfra.price_feeds.config import FeedConfig

    url = f"http://127.0.0.1:{port}"
    base = dict(cache_dir=tmp_path / "cache", aws_pricing_url=url, aws_regions=("us-east-1",), aws_spot="off",
                azure_prices_url=url, gcp_billing_url=url, gcp_api_key="k", timeout_s=1.0, retries=2,
                backoff_s=0.01, deadline_s=5.0)
    base.update(kw)
    return FeedConfig(**base)


@pytest.fixture
def make_offline_config(tmp_path, closed_port) -> Callable:
    return lambda **kw: offline_config(tmp_path, closed_port, **kw)


@pytest.fixture
def fx():
    """The body builders and helpers above, for tests (conftest is not imported by name)."""
    import types

    return types.SimpleNamespace(
        Resp=Resp, aws_row=aws_row, aws_csv=aws_csv, aws_fixture_rows=aws_fixture_rows, serve_aws=serve_aws,
        AWS_PATH=AWS_PATH, az_item=az_item, azure_pages=azure_pages, serve_azure=serve_azure, gcp_sku=gcp_sku,
        gcp_pages=gcp_pages, serve_gcp=serve_gcp, offline_config=offline_config, REPO=REPO)
