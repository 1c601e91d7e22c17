"""Credentialed GPU availability caps for GCP and Azure over REST (HttpClient, no cloud SDK).

Both functions return ``(caps, warnings)`` and never raise: missing credentials, HTTP errors and
malformed bodies become warning strings, like :mod:`hetinfra.price_feeds.aws_api`. One response
gives both purchase options, so both are returned (``purchase`` "on-demand" and "spot"); the
planner picks with :func:`~hetinfra.price_feeds.availability.caps_dict`. A bearer token is sent
only to the host of the configured base URL (never to a redirect or paging link elsewhere).

GCP (source ``gcp-quotas``): Compute Engine regional quotas.
  ``GET {base}/compute/v1/projects/{project}/regions/{region}`` ->
  ``{"quotas": [{"metric": "NVIDIA_L4_GPUS", "limit": 8.0, "usage": 2.0}, ...]}``. Free GPUs =
  floor(limit - usage), at least 0; metric -> SkyPilot name in :data:`GCP_GPU_METRICS`
  (NVIDIA_L4_GPUS L4, NVIDIA_A100_80GB_GPUS A100-80GB, NVIDIA_H100_MEGA_GPUS H100-MEGA, ...).
  ``PREEMPTIBLE_<metric>`` is the spot quota; with a limit of 0 Spot VMs draw on the standard quota
  (Google: "request preemptible quota to keep Spot VMs from consuming standard quota"), so the spot
  cap is then the on-demand cap. The project-wide ``GPUS_ALL_REGIONS``
  (``GET {base}/compute/v1/projects/{project}``, same shape; often 0 on new projects) bounds every
  on-demand cap. CPU quotas (A2_CPUS, ...) are not applied. Auth: ``GOOGLE_OAUTH_ACCESS_TOKEN``,
  else ``gcloud auth print-access-token``; project: ``GOOGLE_CLOUD_PROJECT`` /
  ``CLOUDSDK_CORE_PROJECT``, else ``gcloud config get-value project``.

Azure (source ``azure-usages``): Compute usages per location.
  ``GET {base}/subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages?api-version=2023-07-01``
  -> ``{"value": [{"name": {"value": "standardNCADSA100v4Family"}, "currentValue": 0, "limit": 24}, ...],
  "nextLink": ...}`` (pages followed). Limits are vCPUs; names are compared case- and
  space-insensitively; a negative limit is no limit. For a GPU in a location, with v/n the
  vCPUs/GPUs of one VM size and free = limit - currentValue:
    family cap = max over the family's sizes of floor(free_family / v) * n, summed over families;
    regional   = max over all the GPU's sizes of floor(free ``cores`` / v) * n (Total Regional vCPUs);
    on-demand  = min(family sum, regional); regional only when a size's family is unknown or not in
                 the usages (a warning names the size);
    spot       = max over sizes of floor(free ``lowPriorityCores`` / v) * n (regional, any family).
  Like the AWS caps, a cap is what one VM size can reach (sizes are not mixed inside a family).
  VM size -> quota family (Azure's Resource SKU ``family``, which the usage names match; sources:
  the SkyPilot Azure catalog fetcher, OpenShift's Azure family table, ``az vm list-usage`` output):
    NC{4,8,16,64}as_T4_v3 standardNCASv3_T4Family     | NC{6,12,24}s_v3, NC24rs_v3 standardNCSv3Family
    ND40rs_v2 standardNDSv2Family                     | NV{36,72}ads/NV36adms_A10_v5 standardNVADSA10v5Family
    NC{24,48,96}ads_A100_v4 standardNCADSA100v4Family | ND96asr_v4 standardNDASv4_A100Family
    ND96amsr_A100_v4 standardNDAMSv4_A100Family       | NC40ads/NC80adis_H100_v5 standardNCadsH100v5Family
    ND96isr_H100_v5 standardNDSH100v5Family (alias standardNDv5H100Family, Azure ML's name)
    ND96isr_H200_v5 standardNDISRH200V5Family
    not derived (no family cap; regional caps still apply): NCCads_H100_v5, NC A10 v4, MI300X, others.
  Auth: ``AZURE_ACCESS_TOKEN``, else ``az account get-access-token --query accessToken -o tsv``;
  subscription: ``AZURE_SUBSCRIPTION_ID``, else ``az account show --query id -o tsv``.

Where a GPU can be launched at all (:mod:`hetinfra.price_feeds.cloud_skus`; caps of 0 only, with the
same credentials and client, each request's failure a warning of its own):
  GCP ``gcp-accelerator-types``: ``GET .../projects/{project}/aggregated/acceleratorTypes``, once
  per lookup and only when GCP offers are given: an offered GPU in no zone of its region -> 0.
  Azure ``azure-sku-restrictions``: ``GET .../providers/Microsoft.Compute/skus`` per location: a
  GPU all of whose offered sizes carry a ``Location`` restriction there -> 0.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from typing import Callable, Iterable, Mapping

from hetinfra.price_feeds.caps import AvailabilityCap
from hetinfra.price_feeds.cloud_skus import (azure_location_restrictions, azure_pages, azure_restriction_caps,
                                             azure_skus_url, gcp_zone_accelerators, gcp_zone_caps)
from hetinfra.price_feeds.families import AZURE_GPU_SKUS
from hetinfra.price_feeds.http import FetchError, HttpClient, answer_number
from hetinfra.procs import run_group

GCP_BASE_URL = "https://compute.googleapis.com"
AZURE_BASE_URL = "https://management.azure.com"
AZURE_API_VERSION = "2023-07-01"
CLI_TIMEOUT_S = 30.0

GCP_GPU_METRICS: dict[str, str] = {
    "NVIDIA_T4_GPUS": "T4", "NVIDIA_L4_GPUS": "L4", "NVIDIA_V100_GPUS": "V100", "NVIDIA_P100_GPUS": "P100",
    "NVIDIA_A100_GPUS": "A100", "NVIDIA_A100_80GB_GPUS": "A100-80GB", "NVIDIA_H100_GPUS": "H100",
    "NVIDIA_H100_MEGA_GPUS": "H100-MEGA", "NVIDIA_H200_GPUS": "H200", "NVIDIA_B200_GPUS": "B200",
}
GCP_GLOBAL_METRIC = "GPUS_ALL_REGIONS"

#: VM size pattern -> usage names of its quota family (first found in the usages wins).
AZURE_QUOTA_FAMILIES: list[tuple[re.Pattern, tuple[str, ...]]] = [
    (re.compile(r"^Standard_NC[0-9]+as_T4_v3$"), ("standardNCASv3_T4Family",)),
    (re.compile(r"^Standard_NC[0-9]+r?s_v3$"), ("standardNCSv3Family",)),
    (re.compile(r"^Standard_ND40rs_v2$"), ("standardNDSv2Family",)),
    (re.compile(r"^Standard_NV[0-9]+adm?s_A10_v5$"), ("standardNVADSA10v5Family",)),
    (re.compile(r"^Standard_NC[0-9]+ads_A100_v4$"), ("standardNCADSA100v4Family",)),
    (re.compile(r"^Standard_ND96asr_v4$"), ("standardNDASv4_A100Family",)),
    (re.compile(r"^Standard_ND96amsr_A100_v4$"), ("standardNDAMSv4_A100Family",)),
    (re.compile(r"^Standard_NC[0-9]+adi?s_H100_v5$"), ("standardNCadsH100v5Family",)),
    (re.compile(r"^Standard_ND96isr_H100_v5$"), ("standardNDSH100v5Family", "standardNDv5H100Family")),
    (re.compile(r"^Standard_ND96isr_H200_v5$"), ("standardNDISRH200V5Family",)),
]

GCP_NO_CREDENTIALS = ("gcp availability: not configured (no credentials: set GOOGLE_OAUTH_ACCESS_TOKEN and "
                      "GOOGLE_CLOUD_PROJECT, or run `gcloud auth login` and `gcloud config set project ID`); "
                      "caps not applied")
AZURE_NO_CREDENTIALS = ("azure availability: not configured (no credentials: set AZURE_ACCESS_TOKEN and "
                        "AZURE_SUBSCRIPTION_ID, or run `az login`); caps not applied")

Credentials = Callable[[], "tuple[str | None, str | None]"]  # () -> (token, project or subscription)


def azure_quota_family(instance_type: str) -> tuple[str, ...] | None:
    """The usage names (aliases) of an Azure VM size's vCPU quota family, or None when not known."""
    for pattern, names in AZURE_QUOTA_FAMILIES:
        if pattern.match(instance_type):
            return names
    return None


def _norm(name: str) -> str:  # usage names: "Standard NCASv3_T4 Family" ~ "standardNCASv3_T4Family"
    return name.replace(" ", "").lower()


# --- credentials ------------------------------------------------------------------------------

def _cli(argv: list[str], env: Mapping[str, str]) -> str | None:
    """Last stdout line of a CLI found on env's PATH, or None (absent, failed, timed out, "(unset)")."""
    exe = shutil.which(argv[0], path=env.get("PATH", ""))
    if exe is None:
        return None
    try:
        proc = run_group([exe, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=CLI_TIMEOUT_S, env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (proc.stdout or "").strip().splitlines()
    value = lines[-1].strip() if proc.returncode == 0 and lines else ""
    return value if value and value != "(unset)" else None


def gcp_credentials(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(access token, project) from the environment, else from gcloud; None where not found."""
    env = os.environ if env is None else env
    token = env.get("GOOGLE_OAUTH_ACCESS_TOKEN") or _cli(["gcloud", "auth", "print-access-token"], env)
    project = (env.get("GOOGLE_CLOUD_PROJECT") or env.get("CLOUDSDK_CORE_PROJECT")
               or (_cli(["gcloud", "config", "get-value", "project"], env) if token else None))
    return token, project


def azure_credentials(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(ARM access token, subscription id) from the environment, else from az; None where not found."""
    env = os.environ if env is None else env
    token = env.get("AZURE_ACCESS_TOKEN") or _cli(
        ["az", "account", "get-access-token", "--query", "accessToken", "-o", "tsv"], env)
    sub = env.get("AZURE_SUBSCRIPTION_ID") or (
        _cli(["az", "account", "show", "--query", "id", "-o", "tsv"], env) if token else None)
    return token, sub


# --- HTTP with a bearer token -----------------------------------------------------------------

class _BearerHandler(urllib.request.BaseHandler):
    def __init__(self, token: str, host: str):
        self.token, self.host = token, host

    def http_request(self, req):
        if urllib.parse.urlsplit(req.full_url).hostname == self.host:
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return req

    https_request = http_request


class BearerClient(HttpClient):
    """:class:`HttpClient` that adds ``Authorization: Bearer`` on requests to one host only."""

    def __init__(self, token: str, base_url: str, **kw):
        super().__init__(**kw)
        self._token = token
        self.host = urllib.parse.urlsplit(base_url).hostname or ""

    def _opener(self, url: str) -> urllib.request.OpenerDirector:  # HttpClient's hook, per request
        opener = super()._opener(url)
        opener.add_handler(_BearerHandler(self._token, self.host))
        return opener


def _client(token: str, base_url: str, timeout_s: float, http: Mapping | None) -> BearerClient:
    kw = {"timeout_s": timeout_s, "retries": 2, "deadline_s": 120.0, **(http or {})}
    return BearerClient(token, base_url, **kw)


def _rejected(cloud: str, exc: FetchError) -> str:
    return (f"{cloud} availability: the access token was rejected ({exc.message}); refresh it "
            f"({'gcloud auth login' if cloud == 'gcp' else 'az login'}); caps not applied")


# --- GCP --------------------------------------------------------------------------------------

def _gcp_quotas(body) -> dict[str, tuple[float, int]]:
    """{metric: (limit, free GPUs)} from a regions.get / projects.get body."""
    if not isinstance(body, dict) or not isinstance(body.get("quotas"), list):
        raise FetchError("no quotas list in the response")
    out = {}
    for q in body["quotas"]:
        if not isinstance(q, dict) or not isinstance(q.get("metric"), str):
            continue
        limit, usage = answer_number(q.get("limit", 0)), answer_number(q.get("usage", 0))
        if limit is None or usage is None:  # not a figure (a boolean, NaN, an infinity, text): no quota read
            continue
        out[q["metric"]] = (limit, max(0, math.floor(limit - usage)))
    return out


def _gcp_region_caps(region: str, quotas: dict, global_free: int | None) -> list[AvailabilityCap]:
    caps = []
    for metric, gpu in GCP_GPU_METRICS.items():
        std, pre = quotas.get(metric), quotas.get("PREEMPTIBLE_" + metric)
        od = None
        if std is not None:
            od = std[1] if global_free is None else min(std[1], global_free)
            caps.append(AvailabilityCap("gcp", region, gpu, od, "on-demand", "gcp-quotas"))
        if pre is not None and pre[0] > 0:
            spot = pre[1]
        else:  # no preemptible quota: Spot VMs count against the standard quota
            spot = od if od is not None else (0 if pre is not None else None)
        if spot is not None:
            caps.append(AvailabilityCap("gcp", region, gpu, spot, "spot", "gcp-quotas"))
    return caps


def gcp_caps(regions: Iterable[str], offers: Iterable = (), *, base_url: str | None = None,
             env: Mapping[str, str] | None = None, credentials: Credentials | None = None,
             timeout_s: float = 20.0, http: Mapping | None = None) -> tuple[list[AvailabilityCap], list[str]]:
    """GCP regional GPU quota caps and zone accelerator caps (module docstring) and warnings; never raises.

    ``offers`` (Offer rows; only cloud "gcp" is used) name the GPUs to look for in each region's
    zones; without them the accelerator types are not asked. No regions: nothing is asked (no
    credential lookup). ``http``: extra HttpClient arguments.
    """
    regions = sorted(set(regions))
    offers = [o for o in offers if o.cloud == "gcp" and o.region in regions]
    if not regions:
        return [], []
    token, project = (credentials or (lambda: gcp_credentials(env)))()
    if not token or not project:
        return [], [GCP_NO_CREDENTIALS]
    base_url = (base_url or GCP_BASE_URL).rstrip("/")
    client = _client(token, base_url, timeout_s, http)
    project_url = f"{base_url}/compute/v1/projects/{urllib.parse.quote(project, safe='')}"
    warnings: list[str] = []
    global_free = None
    try:
        glob = _gcp_quotas(client.get_json(project_url)).get(GCP_GLOBAL_METRIC)
        global_free = glob[1] if glob else None
    except FetchError as exc:
        if exc.status == 401:
            return [], [_rejected("gcp", exc)]
        warnings.append(f"gcp availability: project quota {GCP_GLOBAL_METRIC} unavailable ({exc.message}); "
                        "regional quotas only")
    caps: list[AvailabilityCap] = []
    if offers:
        try:
            zones, unreachable = gcp_zone_accelerators(client, project_url)
        except FetchError as exc:
            if exc.status == 401:
                return [], warnings + [_rejected("gcp", exc)]
            warnings.append(f"gcp availability: accelerator types unavailable ({exc.message}); "
                            "zone availability not applied")
        else:
            got, infos = gcp_zone_caps(regions, offers, zones, unreachable)
            caps.extend(got)
            warnings.extend(infos)
    for region in regions:
        try:
            quotas = _gcp_quotas(client.get_json(f"{project_url}/regions/{urllib.parse.quote(region, safe='')}"))
        except FetchError as exc:
            if exc.status == 401:
                warnings.append(_rejected("gcp", exc))
                break
            warnings.append(f"gcp availability for {region} unavailable ({exc.message})")
            continue
        caps.extend(_gcp_region_caps(region, quotas, global_free))
    return caps, warnings


# --- Azure ------------------------------------------------------------------------------------

def _azure_usages(client: HttpClient, url: str) -> dict[str, tuple[float, float]]:
    """{normalized usage name: (limit, currentValue)} over all pages (nextLink)."""
    out: dict[str, tuple[float, float]] = {}
    for u in azure_pages(client, url, "usages"):
        try:
            name = u["name"]["value"] if isinstance(u.get("name"), dict) else u["name"]
        except (AttributeError, KeyError, TypeError):
            continue
        limit = answer_number(u.get("limit"), least=-1.0)  # -1: no limit
        current = 0 if u.get("currentValue") is None else answer_number(u["currentValue"])
        if limit is not None and current is not None and isinstance(name, str):
            out[_norm(name)] = (limit, current)
    return out


def _free(usages: dict, name: str) -> float | None:
    """Free vCPUs of a usage (inf for no limit), None when the usage is not listed."""
    got = usages.get(_norm(name))
    if got is None:
        return None
    limit, current = got
    return math.inf if limit < 0 else max(0.0, limit - current)


def _best(free: float, sizes: list[tuple[str, float, int]]) -> int:
    return max(math.floor(free / v) * n for _, v, n in sizes)


def _azure_region_caps(region: str, offers: list, usages: dict) -> tuple[list[AvailabilityCap], list[str]]:
    caps: list[AvailabilityCap] = []
    unmapped: list[str] = []
    cores, low = _free(usages, "cores"), _free(usages, "lowPriorityCores")
    for gpu in sorted({o.gpu for o in offers}):
        sizes = []
        for o in offers:
            vcpus = o.vcpus or AZURE_GPU_SKUS.get(o.instance_type, (None, 0, 0, 0))[2]
            if o.gpu == gpu and vcpus > 0 and o.gpu_count > 0:
                sizes.append((o.instance_type, float(vcpus), int(o.gpu_count)))
        if not sizes:
            continue
        bounds = []
        if cores is not None and cores != math.inf:
            bounds.append(_best(cores, sizes))
        families: dict[str, list] = {}
        family_free: dict[str, float] = {}
        complete = True
        for size in sizes:
            names = azure_quota_family(size[0]) or ()
            found = next((n for n in names if _free(usages, n) is not None), None)
            if found is None:
                complete = False
                unmapped.append(size[0] + (f" (family {names[0]} not in the usages)" if names else ""))
                continue
            families.setdefault(found, []).append(size)
            family_free[found] = _free(usages, found)
        if complete and all(f != math.inf for f in family_free.values()):
            bounds.append(sum(_best(family_free[f], group) for f, group in families.items()))
        if bounds:
            caps.append(AvailabilityCap("azure", region, gpu, min(bounds), "on-demand", "azure-usages"))
        if low is not None and low != math.inf:
            caps.append(AvailabilityCap("azure", region, gpu, _best(low, sizes), "spot", "azure-usages"))
    warnings = []
    if unmapped:
        warnings.append(f"azure {region}: no vCPU family quota for {', '.join(sorted(set(unmapped)))}; "
                        "only the regional vCPU quota caps those GPUs")
    return caps, warnings


def azure_caps(regions: Iterable[str], offers: Iterable = (), *, base_url: str | None = None,
               env: Mapping[str, str] | None = None, credentials: Credentials | None = None,
               timeout_s: float = 20.0, http: Mapping | None = None
               ) -> tuple[list[AvailabilityCap], list[str]]:
    """Azure GPU caps from Compute usages and resource SKU restrictions (module docstring) and
    warnings; never raises.

    ``offers`` (Offer rows; only cloud "azure" is used) give the VM sizes to map to families and to
    look up in the SKU restrictions. Per location: usages, then SKUs; either may fail alone.
    """
    regions = sorted(set(regions))
    offers = [o for o in offers if o.cloud == "azure"]
    if not regions:
        return [], []
    token, sub = (credentials or (lambda: azure_credentials(env)))()
    if not token or not sub:
        return [], [AZURE_NO_CREDENTIALS]
    base_url = (base_url or AZURE_BASE_URL).rstrip("/")
    client = _client(token, base_url, timeout_s, http)
    caps: list[AvailabilityCap] = []
    warnings: list[str] = []
    for region in regions:
        reg = [o for o in offers if o.region == region]
        if not reg:
            continue
        url = (f"{base_url}/subscriptions/{urllib.parse.quote(sub, safe='')}/providers/Microsoft.Compute/"
               f"locations/{urllib.parse.quote(region, safe='')}/usages?api-version={AZURE_API_VERSION}")
        try:
            usages = _azure_usages(client, url)
        except FetchError as exc:
            if exc.status == 401:
                warnings.append(_rejected("azure", exc))
                break
            warnings.append(f"azure availability for {region} unavailable ({exc.message})")
        else:
            got, warns = _azure_region_caps(region, reg, usages)
            caps.extend(got)
            warnings.extend(warns)
        try:
            skus = azure_pages(client, azure_skus_url(base_url, sub, region), "resource SKUs")
        except FetchError as exc:
            if exc.status == 401:
                warnings.append(_rejected("azure", exc))
                break
            warnings.append(f"azure availability: resource SKUs for {region} unavailable ({exc.message}); "
                            "SKU restrictions not applied")
            continue
        got, infos = azure_restriction_caps(region, reg, azure_location_restrictions(skus, region))
        caps.extend(got)
        warnings.extend(infos)
    return caps, warnings
