"""Azure: the Retail Prices API (public, no auth), GPU VM SKUs, paged by NextPageLink.

``GET {base}/api/retail/prices?api-version=2023-01-01-preview&$filter=serviceName eq 'Virtual
Machines' and priceType eq 'Consumption' and contains(armSkuName, 'Standard_N')`` returns pages of
``{"Items": [...], "NextPageLink": ..., "Count": n}`` (feeds.md section 2). NextPageLink is
followed (rebased onto the configured base URL, so tests and mirrors work and no other host is
ever contacted) until it is null/empty or a page has no items; pages are bounded.

Rows kept: ``type`` Consumption, unitOfMeasure "1 Hour", USD, an armSkuName in
:data:`~hetinfra.price_feeds.families.AZURE_GPU_SKUS`; dropped as look-alikes: Windows (productName
containing "Windows" or " Win", e.g. "... Srs Win"), Low Priority meters, Cloud Services, Dedicated
hosts, DevTestConsumption and Reservation rows. A meter whose skuName/meterName contains " Spot"
is the spot price of that SKU and region; the others are on-demand (lowest positive kept).
"""

from __future__ import annotations

import urllib.parse

from hetinfra.price_feeds.base import FeedAdapter, FetchContext
from hetinfra.price_feeds.families import AZURE_GPU_SKUS
from hetinfra.price_feeds.http import MAX_ANSWER_NUMBER, FetchError, answer_number

API_VERSION = "2023-01-01-preview"
FILTER = ("serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
          "and contains(armSkuName, 'Standard_N')")
MAX_PAGES = 500


def first_url(base: str) -> str:
    q = urllib.parse.urlencode({"api-version": API_VERSION, "$filter": FILTER}, quote_via=urllib.parse.quote)
    return f"{base.rstrip('/')}/api/retail/prices?{q}"


def rebase(link: str, base: str) -> str:
    """NextPageLink with the configured base's scheme and host (path and query kept)."""
    b, n = urllib.parse.urlsplit(base), urllib.parse.urlsplit(link)
    if not n.path:
        raise FetchError(f"azure: NextPageLink {link!r} has no path")
    prefix = b.path.rstrip("/")
    path = n.path if n.path.startswith(prefix + "/") or not prefix else prefix + n.path
    return urllib.parse.urlunsplit((b.scheme, b.netloc, path, n.query, ""))


def is_lookalike(item: dict) -> bool:
    product = str(item.get("productName") or "")
    names = f"{item.get('skuName') or ''} {item.get('meterName') or ''}"
    return ("Windows" in product or " Win" in product or "Cloud Services" in product or "Dedicated" in product
            or "Low Priority" in names)


def is_spot(item: dict) -> bool:
    return " Spot" in f" {item.get('skuName') or ''} {item.get('meterName') or ''}"


class AzureRetailAdapter(FeedAdapter):
    name = "azure"
    label = "azure-retail-prices"
    clouds = ("azure",)

    def pages(self, ctx: FetchContext):
        base = self.config.azure_prices_url
        url: str | None = first_url(base)
        seen: set[str] = set()
        for page_no in range(1, MAX_PAGES + 1):
            if url is None:
                return
            if url in seen:
                raise FetchError(f"azure: NextPageLink loops back to an earlier page ({page_no} pages read)")
            seen.add(url)
            body = ctx.http.get_json(url)
            if not isinstance(body, dict) or not isinstance(body.get("Items"), list):
                raise FetchError("azure: malformed Retail Prices page (no Items list)",
                                 hint="the API changed format or returned an error page")
            ctx.report(page_no, None, f"page {page_no}")
            yield body["Items"]
            if not body["Items"]:
                return
            link = body.get("NextPageLink")
            url = rebase(link, base) if isinstance(link, str) and link.strip() else None
        raise FetchError(f"azure: more than {MAX_PAGES} pages; stopping")

    def rows(self, ctx: FetchContext):
        od: dict[tuple[str, str], float] = {}
        spot: dict[tuple[str, str], float] = {}
        items = 0
        for page in self.pages(ctx):
            for item in page:
                items += 1
                if not isinstance(item, dict):
                    continue
                sku, region = item.get("armSkuName"), item.get("armRegionName")
                if sku not in AZURE_GPU_SKUS or not region:
                    continue
                if item.get("type", "Consumption") != "Consumption" or is_lookalike(item):
                    continue
                if item.get("unitOfMeasure") != "1 Hour" or item.get("currencyCode", "USD") != "USD":
                    continue
                # a price <= 0 is dropped later, counted; what is no figure (a boolean, NaN, text) is skipped
                price = answer_number(item.get("retailPrice", item.get("unitPrice")), least=-MAX_ANSWER_NUMBER)
                if price is None:
                    continue
                key = (sku, region)
                target = spot if is_spot(item) else od
                if key not in target or (price > 0 and (target[key] <= 0 or price < target[key])):
                    target[key] = price
        ctx.meta["items"] = items
        ctx.meta["url"] = first_url(self.config.azure_prices_url)
        for (sku, region), price in sorted(od.items()):
            gpu, count, vcpus, mem = AZURE_GPU_SKUS[sku]
            s = spot.get((sku, region))
            yield ctx.offer(cloud="azure", region=region, instance_type=sku, gpu=gpu, gpu_count=count, price=price,
                            spot=s if s and s > 0 else None, vcpus=vcpus, memory_gb=mem)
