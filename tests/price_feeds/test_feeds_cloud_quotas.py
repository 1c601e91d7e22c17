"""GCP regional quotas and Azure Compute usages over real loopback HTTP (cloud_quotas.py)."""

from __future__ import annotations

import json
import os
import stat
import threading
import urllib.parse
from http.server import ThreadingHTTPServer

import pytest

from hetinfra.price_feeds import availability
from hetinfra.price_feeds.availability import load_availability
from hetinfra.price_feeds.caps import AvailabilityCap, caps_dict
from hetinfra.price_feeds.cloud_quotas import (AZURE_NO_CREDENTIALS, GCP_NO_CREDENTIALS, azure_caps,
                                               azure_quota_family, gcp_caps)
from hetinfra.price_feeds.cloud_skus import GCP_ACCELERATOR_NAMES
from hetinfra.price_feeds.families import AZURE_GPU_SKUS
from hetinfra.price_feeds.offers import Offer
from tests.conftest import QuietHandler

FAST = {"retries": 1, "backoff_s": 0.01, "timeout_s": 2.0, "deadline_s": 10.0}
PROJECT = "/compute/v1/projects/my-proj"
SUB = "/subscriptions/sub-1/providers/Microsoft.Compute/locations"
SKUS = "/subscriptions/sub-1/providers/Microsoft.Compute/skus"
ACCELS = f"{PROJECT}/aggregated/acceleratorTypes"


class QuotaServer:
    """Loopback server: path -> callable(query) -> (status, body dict); records path, query, headers."""

    def __init__(self):
        self.routes: dict = {}
        self.requests: list[tuple[str, dict, dict]] = []
        server = self

        class Handler(QuietHandler):  # Nagle's algorithm off: tests/conftest.py QuietHandler says why
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
                server.requests.append((parts.path, query, dict(self.headers)))
                route = server.routes.get(parts.path)
                status, body = route(query) if route else (404, {"error": {"code": 404, "message": "not found"}})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def serve(self, path: str, body, status: int = 200) -> None:
        self.routes[path] = body if callable(body) else (lambda q: (status, body))

    def paths(self) -> list[str]:
        return [p for p, _, _ in self.requests]


@pytest.fixture
def qs():
    s = QuotaServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture
def nobin(tmp_path):
    d = tmp_path / "nobin"
    d.mkdir()
    return str(d)


def gcp_env(nobin, **kw):
    return {"PATH": nobin, "GOOGLE_OAUTH_ACCESS_TOKEN": "gcp-tok", "GOOGLE_CLOUD_PROJECT": "my-proj", **kw}


def azure_env(nobin, **kw):
    return {"PATH": nobin, "AZURE_ACCESS_TOKEN": "az-tok", "AZURE_SUBSCRIPTION_ID": "sub-1", **kw}


def q(metric, limit, usage):
    return {"metric": metric, "limit": limit, "usage": usage}


def region_body(name, *quotas):
    return {"kind": "compute#region", "name": name, "status": "UP", "quotas": [q(*x) for x in quotas]}


def project_body(limit=64.0, usage=0.0):
    return {"kind": "compute#project", "name": "my-proj",
            "quotas": [q("CPUS_ALL_REGIONS", 96.0, 8.0), q("GPUS_ALL_REGIONS", limit, usage)]}


def usage(name, current, limit, local=None):
    return {"name": {"value": name, "localizedValue": local or name}, "currentValue": current, "limit": limit,
            "unit": "Count"}


def az_offer(itype, region="eastus", vcpus=None):
    gpu, n, v, mem = AZURE_GPU_SKUS[itype]
    return Offer("azure", region, itype, gpu, n, 80, v if vcpus is None else vcpus, mem, 1.0, None, "t", "s")


def by_key(caps):
    return {(c.region, c.gpu, c.purchase): c.max_gpus for c in caps}


def no_skus(qs):
    """Resource SKUs with no restriction (every Azure lookup also asks for them, per location)."""
    qs.serve(SKUS, {"value": []})


# --- GCP ----------------------------------------------------------------------------------------

def test_gcp_regional_quotas(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-central1", region_body(
        "us-central1", ("CPUS", 24.0, 0.0), ("NVIDIA_L4_GPUS", 8.0, 2.0), ("PREEMPTIBLE_NVIDIA_L4_GPUS", 16.0, 1.0),
        ("NVIDIA_A100_80GB_GPUS", 4.0, 4.0), ("NVIDIA_H100_GPUS", 8.0, 0.5), ("PREEMPTIBLE_NVIDIA_H100_GPUS", 0.0, 0.0),
        ("NVIDIA_K80_GPUS", 4.0, 0.0), ("COMMITTED_NVIDIA_L4_GPUS", 100.0, 0.0), ("NVIDIA_T4_GPUS", 1.0, 3.0)))
    caps, warnings = gcp_caps(["us-central1"], base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert warnings == []
    assert by_key(caps) == {
        ("us-central1", "L4", "on-demand"): 6, ("us-central1", "L4", "spot"): 15,
        ("us-central1", "A100-80GB", "on-demand"): 0, ("us-central1", "A100-80GB", "spot"): 0,
        # usage 0.5 of 8 -> 7 whole GPUs; preemptible limit 0: Spot VMs use the standard quota
        ("us-central1", "H100", "on-demand"): 7, ("us-central1", "H100", "spot"): 7,
        ("us-central1", "T4", "on-demand"): 0, ("us-central1", "T4", "spot"): 0,  # over quota -> 0
    }
    assert all(c.cloud == "gcp" and c.source == "gcp-quotas" for c in caps)
    assert qs.paths() == [PROJECT, f"{PROJECT}/regions/us-central1"]
    assert all(h.get("Authorization") == "Bearer gcp-tok" for _, _, h in qs.requests)


def test_gcp_all_regions_quota_bounds_on_demand(qs, nobin):
    qs.serve(PROJECT, project_body(limit=4.0, usage=1.0))
    qs.serve(f"{PROJECT}/regions/us-central1", region_body(
        "us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0), ("PREEMPTIBLE_NVIDIA_L4_GPUS", 16.0, 1.0)))
    caps, warnings = gcp_caps(["us-central1"], base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert warnings == []
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 3}
    assert caps_dict(caps, purchase="spot") == {("gcp", "us-central1", "L4"): 15}


def test_gcp_403_in_one_region_others_still_capped(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/europe-west4", {"error": {"code": 403, "message": "Required 'compute.regions.get' "
                                                                         "permission"}}, status=403)
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    caps, warnings = gcp_caps(["us-central1", "europe-west4"], base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert len(warnings) == 1
    assert "gcp availability for europe-west4 unavailable" in warnings[0] and "HTTP 403" in warnings[0]
    assert "gcp-tok" not in warnings[0]
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6}
    assert qs.paths().count(f"{PROJECT}/regions/europe-west4") == 1  # 403 is not retried


def test_gcp_project_quota_missing_is_a_warning_and_401_stops(qs, nobin):
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    caps, warnings = gcp_caps(["us-central1"], base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6}
    assert len(warnings) == 1 and "GPUS_ALL_REGIONS unavailable" in warnings[0] and "HTTP 404" in warnings[0]

    qs.requests.clear()
    qs.serve(PROJECT, {"error": {"code": 401, "message": "Request had invalid authentication credentials."}},
             status=401)
    caps, warnings = gcp_caps(["us-central1", "us-east1"], base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert caps == [] and len(warnings) == 1 and "access token was rejected" in warnings[0]
    assert qs.paths() == [PROJECT]


@pytest.mark.parametrize("env", [{}, {"GOOGLE_OAUTH_ACCESS_TOKEN": "t"}, {"GOOGLE_CLOUD_PROJECT": "p"}])
def test_gcp_no_credentials_one_warning_no_request(qs, nobin, env):
    caps, warnings = gcp_caps(["us-central1", "us-east1"], base_url=qs.url, env={"PATH": nobin, **env})
    assert caps == [] and warnings == [GCP_NO_CREDENTIALS]
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in warnings[0] and "gcloud auth login" in warnings[0]
    assert qs.requests == []


def fake_cli(bindir, name, script):
    path = os.path.join(bindir, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def test_gcp_credentials_from_a_gcloud_on_path(qs, tmp_path):
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    fake_cli(bindir, "gcloud", 'case "$1 $2" in\n"auth print-access-token") echo cli-tok ;;\n'
                               '"config get-value") echo my-proj ;;\n*) exit 2 ;;\nesac\n')
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    caps, warnings = gcp_caps(["us-central1"], base_url=qs.url, env={"PATH": bindir}, http=FAST)
    assert warnings == [] and caps_dict(caps) == {("gcp", "us-central1", "L4"): 6}
    assert {h.get("Authorization") for _, _, h in qs.requests} == {"Bearer cli-tok"}


def test_gcp_injected_credentials_and_no_regions(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-west1", region_body("us-west1", ("NVIDIA_H100_MEGA_GPUS", 16.0, 8.0)))
    caps, warnings = gcp_caps(["us-west1"], base_url=qs.url, env={"PATH": nobin},
                              credentials=lambda: ("inj-tok", "my-proj"), http=FAST)
    assert warnings == [] and caps_dict(caps) == {("gcp", "us-west1", "H100-MEGA"): 8}
    assert qs.requests[0][2]["Authorization"] == "Bearer inj-tok"
    # nothing to ask: no credential lookup, no request, no warning
    called = []
    assert gcp_caps([], credentials=lambda: called.append(1)) == ([], [])
    assert called == []


# --- Azure --------------------------------------------------------------------------------------

def test_azure_usages_paging_and_family_mapping(qs, nobin):
    path = f"{SUB}/eastus/usages"
    page1 = {"value": [usage("availabilitySets", 0, 2500, "Availability Sets"),
                       usage("standardNCADSA100v4Family", 24, 48, "Standard NCADS_A100_v4 Family vCPUs"),
                       usage("standardNCASv3_T4Family", 0, 20, "Standard NCASv3_T4 Family vCPUs")],
             "nextLink": f"{qs.url}{path}?api-version=2023-07-01&$skiptoken=p2"}
    page2 = {"value": [usage("cores", 4, 100, "Total Regional vCPUs"),
                       usage("lowPriorityCores", 2, 50, "Total Regional Low-priority vCPUs")]}
    qs.serve(path, lambda query: (200, page2 if query.get("$skiptoken") == "p2" else page1))
    no_skus(qs)
    offers = [az_offer("Standard_NC24ads_A100_v4"), az_offer("Standard_NC4as_T4_v3"),
              az_offer("Standard_NC64as_T4_v3"), az_offer("Standard_NC24ads_A100_v4", region="westus3")]
    caps, warnings = azure_caps(["eastus"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert warnings == []
    assert by_key(caps) == {
        # family 48 - 24 = 24 free vCPUs -> one NC24ads_A100_v4 (24 vCPUs, 1 GPU); cores allow 4
        ("eastus", "A100-80GB", "on-demand"): 1,
        # T4 family 20 free: max(20 // 4 * 1, 20 // 64 * 4) = 5
        ("eastus", "T4", "on-demand"): 5,
        # spot: 48 free low-priority vCPUs, any family
        ("eastus", "A100-80GB", "spot"): 2, ("eastus", "T4", "spot"): 12,
    }
    assert all(c.cloud == "azure" and c.source == "azure-usages" for c in caps)
    assert [q.get("$skiptoken") for p, q, _ in qs.requests if p == path] == [None, "p2"]
    assert all(q["api-version"] == "2023-07-01" for p, q, _ in qs.requests if p == path)
    assert qs.paths() == [path, path, SKUS]  # usages (two pages), then the location's resource SKUs
    assert all(h.get("Authorization") == "Bearer az-tok" for _, _, h in qs.requests)


def test_azure_regional_cores_bind_across_families(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [
        usage("StandardNCADSA100v4Family", 0, 48), usage("standard NDAMSv4_A100Family", 0, 96),
        usage("cores", 0, 96)]})
    no_skus(qs)
    offers = [az_offer("Standard_NC24ads_A100_v4"), az_offer("Standard_ND96amsr_A100_v4")]
    caps, warnings = azure_caps(["eastus"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert warnings == []
    # families alone: 48 // 24 * 1 + 96 // 96 * 8 = 10; the 96 regional vCPUs allow at most 8
    assert caps == [AvailabilityCap("azure", "eastus", "A100-80GB", 8, "on-demand", "azure-usages")]


def test_azure_unknown_family_falls_back_to_regional_cores(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCadsH100v5Family", 0, 0), usage("cores", 0, 200)]})
    no_skus(qs)
    odd = Offer("azure", "eastus", "Standard_NCC40ads_H100_v5", "H100", 1, 94, 40, 320, 7.0, None, "t", "s")
    offers = [az_offer("Standard_NC40ads_H100_v5"), odd, az_offer("Standard_ND96isr_H100_v5")]
    caps, warnings = azure_caps(["eastus"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    # the NC H100 v5 family has 0 vCPUs, but NCC and ND sizes have no (known) family: regional only
    assert by_key(caps) == {("eastus", "H100", "on-demand"): 16}  # 200 // 96 * 8
    assert len(warnings) == 1 and "Standard_NCC40ads_H100_v5" in warnings[0]
    assert "Standard_ND96isr_H100_v5 (family standardNDSH100v5Family not in the usages)" in warnings[0]


def test_azure_403_in_one_region_others_still_capped(qs, nobin):
    qs.serve(f"{SUB}/westus3/usages", {"error": {"code": "AuthorizationFailed", "message": "no access"}}, status=403)
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 24, 48)]})
    no_skus(qs)
    offers = [az_offer("Standard_NC24ads_A100_v4"), az_offer("Standard_NC24ads_A100_v4", region="westus3")]
    caps, warnings = azure_caps(["eastus", "westus3"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert len(warnings) == 1 and "azure availability for westus3 unavailable" in warnings[0]
    assert "HTTP 403" in warnings[0] and "az-tok" not in warnings[0]
    assert caps_dict(caps) == {("azure", "eastus", "A100-80GB"): 1}


def test_azure_next_link_to_another_host_is_not_followed(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 0, 48)],
                                      "nextLink": "https://management.example.net/x?api-version=1"})
    no_skus(qs)
    caps, warnings = azure_caps(["eastus"], [az_offer("Standard_NC24ads_A100_v4")], base_url=qs.url,
                                env=azure_env(nobin), http=FAST)
    assert caps == [] and len(warnings) == 1 and "another host" in warnings[0]
    assert qs.paths() == [f"{SUB}/eastus/usages", SKUS]  # the foreign link is not asked; the SKUs still are


@pytest.mark.parametrize("env", [{}, {"AZURE_ACCESS_TOKEN": "t"}, {"AZURE_SUBSCRIPTION_ID": "s"}])
def test_azure_no_credentials_one_warning_no_request(qs, nobin, env):
    caps, warnings = azure_caps(["eastus", "westus3"], [az_offer("Standard_NC24ads_A100_v4")], base_url=qs.url,
                                env={"PATH": nobin, **env})
    assert caps == [] and warnings == [AZURE_NO_CREDENTIALS] and "az login" in warnings[0]
    assert qs.requests == []


def test_azure_credentials_from_an_az_on_path(qs, tmp_path):
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    fake_cli(bindir, "az", 'case "$2" in\nget-access-token) echo cli-az-tok ;;\nshow) echo sub-1 ;;\n'
                           '*) exit 2 ;;\nesac\n')
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 24, 48)]})
    no_skus(qs)
    caps, warnings = azure_caps(["eastus"], [az_offer("Standard_NC24ads_A100_v4")], base_url=qs.url,
                                env={"PATH": bindir}, http=FAST)
    assert warnings == [] and caps_dict(caps) == {("azure", "eastus", "A100-80GB"): 1}
    assert {h.get("Authorization") for _, _, h in qs.requests} == {"Bearer cli-az-tok"}


def test_every_azure_gpu_size_has_a_quota_family():
    assert {k: azure_quota_family(k) is not None for k in AZURE_GPU_SKUS} == {k: True for k in AZURE_GPU_SKUS}
    assert azure_quota_family("Standard_NC24ads_A100_v4") == ("standardNCADSA100v4Family",)
    assert azure_quota_family("Standard_NC4as_T4_v3") == ("standardNCASv3_T4Family",)
    assert azure_quota_family("Standard_ND96isr_H100_v5")[0] == "standardNDSH100v5Family"
    assert azure_quota_family("Standard_NCC40ads_H100_v5") is None
    assert azure_quota_family("Standard_D4s_v5") is None


# --- GCP accelerator types per zone (cloud_skus.py) --------------------------------------------

def accel(name, zone):
    return {"kind": "compute#acceleratorType", "name": name, "description": name, "maximumCardsPerInstance": 8,
            "zone": f"https://www.googleapis.com/compute/v1/projects/my-proj/zones/{zone}"}


def gcp_offer(itype, gpu, region, n=1):
    return Offer("gcp", region, itype, gpu, n, 80, 12 * n, 85 * n, 3.0 * n, 1.0 * n, "t", "s")


def test_gcp_accelerator_types_paging_and_zone_caps(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    qs.serve(f"{PROJECT}/regions/europe-west4", region_body(
        "europe-west4", ("NVIDIA_L4_GPUS", 4.0, 0.0), ("NVIDIA_H100_GPUS", 8.0, 0.0)))
    page1 = {"kind": "compute#acceleratorTypeAggregatedList", "nextPageToken": "tok-2", "items": {
        "zones/us-central1-a": {"acceleratorTypes": [accel("nvidia-tesla-t4", "us-central1-a"),
                                                     accel("nvidia-l4", "us-central1-a")]},
        "zones/us-central1-b": {"acceleratorTypes": [accel("nvidia-tesla-k80", "us-central1-b")]},
        "zones/europe-west4-b": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "no results"}}}}
    page2 = {"kind": "compute#acceleratorTypeAggregatedList", "items": {
        "zones/europe-west4-a": {"acceleratorTypes": [accel("nvidia-h100-80gb", "europe-west4-a"),
                                                      accel("nvidia-tesla-t4", "europe-west4-a")]}}}
    qs.serve(ACCELS, lambda query: (200, page2 if query.get("pageToken") == "tok-2" else page1))
    offers = [gcp_offer("g2-standard-4", "L4", "us-central1"), gcp_offer("g2-standard-4", "L4", "europe-west4"),
              gcp_offer("a3-highgpu-8g", "H100", "europe-west4", 8),
              gcp_offer("a4x-odd-1g", "GB200", "europe-west4"),  # no GCE name known: never capped here
              gcp_offer("g2-standard-4", "L4", "asia-east1")]  # a region not asked about
    caps, warnings = gcp_caps(["us-central1", "europe-west4"], offers, base_url=qs.url, env=gcp_env(nobin),
                              http=FAST)
    assert warnings == ["gcp: L4 is offered in no zone of europe-west4 (accelerator types); capped at 0"]
    assert [c for c in caps if c.source == "gcp-accelerator-types"] == [
        AvailabilityCap("gcp", "europe-west4", "L4", 0, "on-demand", "gcp-accelerator-types"),
        AvailabilityCap("gcp", "europe-west4", "L4", 0, "spot", "gcp-accelerator-types")]
    # the minimum over sources: the L4 quota of europe-west4 (4) loses to the zones (0); L4 is in
    # us-central1-a, so only its quota (8 - 2) caps it there; H100 is in europe-west4-a
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6, ("gcp", "europe-west4", "L4"): 0,
                               ("gcp", "europe-west4", "H100"): 8}
    assert caps_dict(caps, purchase="spot") == caps_dict(caps)
    # one aggregated lookup (two pages) for all zones, after the project and before the regions
    assert qs.paths() == [PROJECT, ACCELS, ACCELS, f"{PROJECT}/regions/europe-west4",
                          f"{PROJECT}/regions/us-central1"]
    assert [q.get("pageToken") for p, q, _ in qs.requests if p == ACCELS] == [None, "tok-2"]
    assert all(h.get("Authorization") == "Bearer gcp-tok" for _, _, h in qs.requests)
    # the wrapper in availability.py passes offers through
    qs.requests.clear()
    assert availability.gcp_caps(["europe-west4"], offers=offers, base_url=qs.url, env=gcp_env(nobin),
                                 http=FAST)[1] == warnings
    assert qs.paths() == [PROJECT, ACCELS, ACCELS, f"{PROJECT}/regions/europe-west4"]


def test_gcp_accelerator_types_failure_unreachable_and_unlisted_regions(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    qs.serve(ACCELS, {"error": {"code": 403, "message": "Required 'compute.acceleratorTypes.list'"}}, status=403)
    offers = [gcp_offer("g2-standard-4", "L4", "us-central1")]
    caps, warnings = gcp_caps(["us-central1"], offers, base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6}  # the quota caps still apply
    assert len(warnings) == 1 and warnings[0].startswith("gcp availability: accelerator types unavailable (HTTP 403")
    assert warnings[0].endswith("zone availability not applied") and "gcp-tok" not in warnings[0]
    assert qs.paths().count(ACCELS) == 1

    # a zone of the region unreachable, or no zone of the region listed: not decided, no cap
    qs.serve(f"{PROJECT}/regions/us-east1", region_body("us-east1", ("NVIDIA_T4_GPUS", 4.0, 0.0)))
    qs.serve(ACCELS, {"items": {"zones/us-central1-a": {"acceleratorTypes": [accel("nvidia-tesla-t4",
                                                                                   "us-central1-a")]}},
                      "unreachables": ["zones/us-central1-f"]})
    offers.append(gcp_offer("n1-standard-4", "T4", "us-east1"))
    caps, warnings = gcp_caps(["us-central1", "us-east1"], offers, base_url=qs.url, env=gcp_env(nobin), http=FAST)
    assert warnings == [
        "gcp: accelerator types for us-central1: zone(s) us-central1-f unreachable; zone availability not applied",
        "gcp: accelerator types for us-east1: no zone of it listed; zone availability not applied"]
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6, ("gcp", "us-east1", "T4"): 4}


def test_gcp_accelerator_names_cover_the_quota_metrics():
    from hetinfra.price_feeds.cloud_quotas import GCP_GPU_METRICS

    assert set(GCP_ACCELERATOR_NAMES.values()) == set(GCP_GPU_METRICS.values())
    assert GCP_ACCELERATOR_NAMES["nvidia-h100-mega-80gb"] == "H100-MEGA"
    assert GCP_ACCELERATOR_NAMES["nvidia-a100-80gb"] == "A100-80GB"


# --- Azure resource SKU restrictions (cloud_skus.py) -------------------------------------------

def sku(name, *restrictions, rtype="virtualMachines", location="eastus"):
    return {"resourceType": rtype, "name": name, "tier": "Standard", "locations": [location],
            "restrictions": list(restrictions)}


def restriction(kind, location="eastus", zones=None, reason="NotAvailableForSubscription"):
    info = {"locations": [location], **({"zones": zones} if zones else {})}
    return {"type": kind, "reasonCode": reason, "values": [location], "restrictionInfo": info}


def test_azure_sku_restrictions(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [
        usage("standardNCADSA100v4Family", 0, 48), usage("standardNCASv3_T4Family", 0, 64),
        usage("standardNDSH100v5Family", 0, 192), usage("standardNCadsH100v5Family", 0, 80)]})
    page1 = {"value": [sku("Standard_NC24ads_A100_v4", restriction("Location"),
                           restriction("Zone", zones=["1", "2", "3"])),
                       sku("Standard_NC4as_T4_v3", restriction("Location", reason="QuotaId")),
                       sku("Standard_NC64as_T4_v3"),
                       sku("Standard_NC40ads_H100_v5", restriction("Location"), rtype="hostGroups/hosts")],
             "nextLink": f"{qs.url}{SKUS}?api-version=2021-07-01&$filter=x&$skiptoken=s2"}
    page2 = {"value": [sku("standard_nd96isr_h100_v5", restriction("Zone", zones=["2"])),
                       sku("Standard_NC40ads_H100_v5")]}
    qs.serve(SKUS, lambda query: (200, page2 if query.get("$skiptoken") == "s2" else page1))
    offers = [az_offer("Standard_NC24ads_A100_v4"), az_offer("Standard_NC4as_T4_v3"),
              az_offer("Standard_NC64as_T4_v3"), az_offer("Standard_ND96isr_H100_v5"),
              az_offer("Standard_NC40ads_H100_v5")]
    caps, warnings = azure_caps(["eastus"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert warnings == [
        "azure eastus: every offered A100-80GB size is restricted there (Standard_NC24ads_A100_v4 "
        "(NotAvailableForSubscription); resource SKUs); capped at 0",
        "azure eastus: Standard_NC4as_T4_v3 (QuotaId) restricted there (resource SKUs); other T4 sizes are not, "
        "so no cap (caps cannot exclude single VM sizes)"]
    assert [c for c in caps if c.source == "azure-sku-restrictions"] == [
        AvailabilityCap("azure", "eastus", "A100-80GB", 0, "on-demand", "azure-sku-restrictions"),
        AvailabilityCap("azure", "eastus", "A100-80GB", 0, "spot", "azure-sku-restrictions")]
    # the minimum over sources: the A100 family quota alone would allow 48 // 24 = 2; T4 keeps its
    # family cap max(64 // 4 * 1, 64 // 64 * 4) = 16; a Zone-only restriction (ND96isr) or one on
    # another resource type (NC40ads) caps nothing: H100 keeps 192 // 96 * 8 + 80 // 40 * 1 = 18
    assert caps_dict(caps) == {("azure", "eastus", "A100-80GB"): 0, ("azure", "eastus", "T4"): 16,
                               ("azure", "eastus", "H100"): 18}
    assert caps_dict(caps, purchase="spot") == {("azure", "eastus", "A100-80GB"): 0}
    assert qs.paths() == [f"{SUB}/eastus/usages", SKUS, SKUS]
    first, second = [q for p, q, _ in qs.requests if p == SKUS]
    assert first == {"api-version": "2021-07-01", "$filter": "location eq 'eastus'"}
    assert second["$skiptoken"] == "s2"
    assert all(h.get("Authorization") == "Bearer az-tok" for _, _, h in qs.requests)


def test_azure_zone_only_restriction_caps_nothing(qs, nobin):
    qs.serve(f"{SUB}/westus3/usages", {"value": [usage("standardNCADSA100v4Family", 0, 48)]})
    qs.serve(SKUS, {"value": [sku("Standard_NC24ads_A100_v4", restriction("Zone", "westus3", zones=["1"]),
                                  location="westus3"),
                              sku("Standard_NC24ads_A100_v4", restriction("Location", "eastus"), location="eastus")]})
    caps, warnings = azure_caps(["westus3"], [az_offer("Standard_NC24ads_A100_v4", region="westus3")],
                                base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert warnings == []
    assert caps == [AvailabilityCap("azure", "westus3", "A100-80GB", 2, "on-demand", "azure-usages")]
    assert [q["$filter"] for p, q, _ in qs.requests if p == SKUS] == ["location eq 'westus3'"]


def test_azure_skus_500_is_a_warning_and_the_quota_caps_remain(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 24, 48)]})
    qs.serve(SKUS, {"error": {"code": "InternalServerError", "message": "boom"}}, status=500)
    caps, warnings = azure_caps(["eastus"], [az_offer("Standard_NC24ads_A100_v4")], base_url=qs.url,
                                env=azure_env(nobin), http=FAST)
    assert caps == [AvailabilityCap("azure", "eastus", "A100-80GB", 1, "on-demand", "azure-usages")]
    assert len(warnings) == 1
    assert warnings[0].startswith("azure availability: resource SKUs for eastus unavailable (HTTP 500")
    assert warnings[0].endswith("; SKU restrictions not applied") and "az-tok" not in warnings[0]
    assert qs.paths() == [f"{SUB}/eastus/usages", SKUS, SKUS]  # FAST: one retry on a 5xx

    # and the other way round: a failed usages call still lets the SKU restrictions cap
    qs.requests.clear()
    qs.serve(f"{SUB}/eastus/usages", {"error": {"code": "AuthorizationFailed"}}, status=403)
    qs.serve(SKUS, {"value": [sku("Standard_NC24ads_A100_v4", restriction("Location"))]})
    caps, warnings = azure_caps(["eastus"], [az_offer("Standard_NC24ads_A100_v4")], base_url=qs.url,
                                env=azure_env(nobin), http=FAST)
    assert caps_dict(caps) == {("azure", "eastus", "A100-80GB"): 0}
    assert len(warnings) == 2 and "azure availability for eastus unavailable (HTTP 403" in warnings[0]
    assert warnings[1].startswith("azure eastus: every offered A100-80GB size is restricted there")


def test_azure_skus_401_stops_like_the_usages(qs, nobin):
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 24, 48)]})
    qs.serve(SKUS, {"error": {"code": "InvalidAuthenticationToken"}}, status=401)
    offers = [az_offer("Standard_NC24ads_A100_v4"), az_offer("Standard_NC24ads_A100_v4", region="westus3")]
    caps, warnings = azure_caps(["eastus", "westus3"], offers, base_url=qs.url, env=azure_env(nobin), http=FAST)
    assert caps_dict(caps) == {("azure", "eastus", "A100-80GB"): 1}
    assert len(warnings) == 1 and "access token was rejected" in warnings[0]
    assert qs.paths() == [f"{SUB}/eastus/usages", SKUS]


# --- load_availability wiring -------------------------------------------------------------------

def test_load_availability_wires_gcp_and_azure(qs, nobin):
    qs.serve(PROJECT, project_body())
    qs.serve(f"{PROJECT}/regions/us-central1", region_body("us-central1", ("NVIDIA_L4_GPUS", 8.0, 2.0)))
    qs.serve(f"{SUB}/eastus/usages", {"value": [usage("standardNCADSA100v4Family", 24, 48)]})
    no_skus(qs)
    qs.serve(ACCELS, {"items": {"zones/us-central1-a": {"acceleratorTypes": [accel("nvidia-l4", "us-central1-a")]}}})
    g2 = Offer("gcp", "us-central1", "g2-standard-4", "L4", 1, 24, 4, 16, 0.7, 0.28, "t", "s")
    offers = [g2, az_offer("Standard_NC24ads_A100_v4")]
    env = {**gcp_env(nobin), **azure_env(nobin)}
    caps, warnings = load_availability(clouds=["gcp"], offers=offers, gcp_base_url=qs.url, env=env, http=FAST)
    assert warnings == [] and caps_dict(caps) == {("gcp", "us-central1", "L4"): 6}
    # load_availability hands its GCP offers on, so the zones' accelerator types are asked too
    # (L4 is in a zone of us-central1: no extra cap)
    assert ACCELS in qs.paths()
    assert [p for p in qs.paths() if p != ACCELS] == [PROJECT, f"{PROJECT}/regions/us-central1"]

    caps, warnings = load_availability(clouds=["gcp", "azure"], offers=offers, gcp_base_url=qs.url,
                                       azure_base_url=qs.url, env=env, http=FAST)
    assert warnings == []
    assert caps_dict(caps) == {("gcp", "us-central1", "L4"): 6, ("azure", "eastus", "A100-80GB"): 1}

    caps, warnings = load_availability(clouds=["gcp", "azure"], offers=offers, env={"PATH": nobin})
    assert caps == [] and warnings == [GCP_NO_CREDENTIALS, AZURE_NO_CREDENTIALS]
