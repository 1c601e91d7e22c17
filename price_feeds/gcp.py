"""GCP: the Cloud Billing Catalog API (API key), machine-type core/RAM SKUs plus GPU SKUs.

``GET {base}/v1/services/6F81-5844-456A/skus?key=KEY&currencyCode=USD&pageSize=5000&pageToken=...``
(feeds.md section 3). GPU pricing is separate from VM pricing even for bundled machine types, so
the hourly price of a machine type in a region is summed (SkyPilot and gpuhunt do the same)::

    vCPUs x "<S> Instance Core running in <geo>" + GiB x "<S> Instance Ram running in <geo>"
      + GPUs x "<GPU> GPU running in <geo>"

with S the machine series token (G2, A2, A3, ...; :data:`~hetinfra.price_feeds.families.GCP_MACHINE_TYPES`).
Example (feeds.md section 3): us-central1 g2-standard-8 = 8 x 0.024988 + 32 x 0.002927 + 0.560040
= 0.853608. The spot price sums the "Spot Preemptible ..." SKUs (usageType Preemptible) the same way.

Look-alikes are told apart by usageType (only OnDemand and Preemptible; Commit1Yr/Commit3Yr and
others are skipped), by a description that must parse exactly (``[Spot Preemptible ]<name> GPU
running in <geo>``: "... GPU DWS Defined Duration ...", "Commitment v1: ..." do not), by a word list
(Commitment, Reserved, DWS, Defined Duration, Calendar Mode, Sole Tenancy, Custom, Premium, Flex,
Extended, suspended) and by requiring usageType and the "Spot Preemptible" prefix to agree. Local
SSD of a2-ultragpu/a3 types is not included. Two SKUs pricing the same thing in a region: the first
is kept and a warning names them.
"""

from __future__ import annotations

import re
import urllib.parse

from hetinfra.price_feeds.base import FeedAdapter, FeedNotConfigured, FetchContext
from hetinfra.price_feeds.families import GCP_GPU_SKU_NAMES, GCP_MACHINE_TYPES, gcp_host_gpu
from hetinfra.price_feeds.http import FetchError, answer_number

COMPUTE_SERVICE = "6F81-5844-456A"
MAX_PAGES = 200
LOOKALIKE_WORDS = ("Commitment", "Reserved", "DWS", "Defined Duration", "Calendar Mode", "Sole Tenancy",
                   "Custom", "Premium", "Flex", "Extended", "suspended")
SPOT_PREFIX = "Spot Preemptible "
CORE_RAM_RE = re.compile(r"^(?P<series>[A-Za-z0-9]+) Instance (?P<kind>Core|Ram) running in (?P<geo>.+)$")
GPU_RE = re.compile(r"^(?P<name>.+?) GPU(?P<spot_suffix> attached to Spot Preemptible VMs)? running in (?P<geo>.+)$")
SLICE_RE = re.compile(r"^(?P<name>.+?\(1 gpu slice\)) running in (?P<geo>.+)$")
UNITS = {"core": "h", "ram": "GiBy.h", "gpu": "h"}


def _or_zero(value, *, most: float = 1e12) -> int | None:
    """A whole figure of a price, 0 where the answer leaves it out (protobuf's JSON omits a zero field)."""
    return 0 if value is None else answer_number(value, whole=True, most=most)


def unit_price(sku: dict) -> tuple[float, str] | None:
    """(USD per usage unit, usage unit) of a SKU's current pricing, from its first tier."""
    try:
        expr = sku["pricingInfo"][0]["pricingExpression"]
        rates = expr["tieredRates"]
        rate = next((r for r in rates if _or_zero(r.get("startUsageAmount")) == 0), rates[0])
        up = rate["unitPrice"]
        units, nanos = _or_zero(up.get("units")), _or_zero(up.get("nanos"), most=999_999_999)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, StopIteration):
        return None
    if units is None or nanos is None:  # not a figure (a boolean, NaN, text): no price of this SKU
        return None
    return units + nanos / 1e9, expr.get("usageUnit", "")


def classify(sku: dict) -> tuple[str, str, bool] | None:
    """("core"|"ram"|"gpu", series token or GPU name, spot) for a SKU hetinfra prices with, else None."""
    cat = sku.get("category") or {}
    if cat.get("resourceFamily") != "Compute":
        return None
    usage = cat.get("usageType")
    if usage not in ("OnDemand", "Preemptible"):
        return None
    desc = str(sku.get("description") or "").strip()
    if any(w in desc for w in LOOKALIKE_WORDS):
        return None
    spot_desc = desc.startswith(SPOT_PREFIX)
    body = desc[len(SPOT_PREFIX):] if spot_desc else desc
    m = CORE_RAM_RE.match(body)
    if m:
        if spot_desc != (usage == "Preemptible"):
            return None
        return m.group("kind").lower(), m.group("series"), spot_desc
    m = GPU_RE.match(body) or SLICE_RE.match(body)
    if m:
        spot = spot_desc or bool(m.groupdict().get("spot_suffix"))
        if spot != (usage == "Preemptible"):
            return None
        gpu = GCP_GPU_SKU_NAMES.get(m.group("name"))
        return ("gpu", gpu, spot) if gpu else None
    return None


class GcpCatalogAdapter(FeedAdapter):
    name = "gcp"
    label = "gcp-billing-catalog"
    clouds = ("gcp",)

    def url(self, token: str | None) -> str:
        q = {"key": self.config.gcp_api_key or "", "currencyCode": "USD", "pageSize": "5000"}
        if token:
            q["pageToken"] = token
        return (f"{self.config.gcp_billing_url.rstrip('/')}/v1/services/{COMPUTE_SERVICE}/skus?"
                + urllib.parse.urlencode(q))

    def skus(self, ctx: FetchContext):
        if not self.config.gcp_api_key:
            raise FeedNotConfigured("gcp: no Cloud Billing API key configured",
                                    hint="set HETINFRA_GCP_API_KEY (an API key with the Cloud Billing API enabled), "
                                         "or leave gcp out: --feeds live:aws,azure")
        token: str | None = None
        seen: set[str] = set()
        for page_no in range(1, MAX_PAGES + 1):
            body = ctx.http.get_json(self.url(token))
            if not isinstance(body, dict) or not isinstance(body.get("skus", []), list):
                raise FetchError("gcp: malformed Cloud Billing Catalog page (no skus list)",
                                 hint="the API changed format or returned an error page")
            ctx.report(page_no, None, f"page {page_no}")
            yield from body.get("skus", [])
            token = body.get("nextPageToken") or None
            if not token:
                return
            if token in seen:
                raise FetchError(f"gcp: nextPageToken repeats after {page_no} pages")
            seen.add(token)
        raise FetchError(f"gcp: more than {MAX_PAGES} pages; stopping")

    def rows(self, ctx: FetchContext):
        prices: dict[tuple[str, str, bool, str], float] = {}
        owners: dict[tuple[str, str, bool, str], str] = {}
        conflicts: list[str] = []
        n = 0
        for sku in self.skus(ctx):
            n += 1
            if not isinstance(sku, dict):
                continue
            kind_name = classify(sku)
            if kind_name is None:
                continue
            kind, name, spot = kind_name
            up = unit_price(sku)
            if up is None or up[1] != UNITS[kind]:
                continue
            for region in sku.get("serviceRegions") or []:
                key = (kind, name, spot, region)
                if key in prices:
                    if abs(prices[key] - up[0]) > 1e-12:
                        conflicts.append(f"{owners[key]!r} vs {sku.get('description')!r} in {region}")
                    continue
                prices[key] = up[0]
                owners[key] = str(sku.get("description"))
        ctx.meta["skus"] = n
        if conflicts:
            ctx.warnings.append(f"gcp: {len(conflicts)} ambiguous SKU price(s), first kept: {conflicts[0]}")
        regions = sorted({k[3] for k in prices})
        for mtype, (series, vcpus, mem) in sorted(GCP_MACHINE_TYPES.items()):
            gpu, count = gcp_host_gpu(mtype)
            for region in regions:
                def total(spot: bool) -> float | None:
                    parts = (prices.get(("core", series, spot, region)), prices.get(("ram", series, spot, region)),
                             prices.get(("gpu", gpu, spot, region)))
                    if any(p is None for p in parts):
                        return None
                    return round(vcpus * parts[0] + mem * parts[1] + count * parts[2], 6)

                od = total(False)
                if od is None:
                    continue
                yield ctx.offer(cloud="gcp", region=region, instance_type=mtype, gpu=gpu, gpu_count=count,
                                price=od, spot=total(True), vcpus=vcpus, memory_gb=mem)
