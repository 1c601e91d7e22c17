"""AWS: EC2 Price List bulk CSV per region (public, streamed), plus spot prices via boto3.

``{base}/offers/v1.0/aws/AmazonEC2/current/{region}/index.csv`` is hundreds of MB: it is read as
a stream of lines (never held in memory), lines that cannot be a GPU on-demand Linux row are
skipped by a substring/regex pre-filter before CSV parsing (as gpuhunt does), and columns are
looked up by header name (their order is unstable). Layout (feeds.md section 1a): five
``"Key","Value"`` preamble rows (FormatVersion, Disclaimer, Publication Date, Version, OfferCode),
then the header row starting with ``"SKU"``.

Kept rows: TermType OnDemand, Product Family "Compute Instance*", Operating System Linux, Tenancy
Shared, License Model "No License required" (or empty), Pre Installed S/W NA (or empty),
CapacityStatus Used, MarketOption OnDemand (or empty), Unit Hrs, Currency USD, and an instance
type of a GPU family in :data:`~hetinfra.price_feeds.families.AWS_GPU_FAMILIES`.
"""

from __future__ import annotations

import csv
import re
from typing import Iterable, Iterator

from hetinfra.csvtext import plain_float
from hetinfra.price_feeds.base import FeedAdapter, FetchContext
from hetinfra.price_feeds.families import AWS_GPU_LINE_RE, aws_gpu, gpu_memory_gb
from hetinfra.price_feeds.http import FetchError
from hetinfra.price_feeds.offers import Offer
from hetinfra.price_feeds.validate import NOT_A_NUMBER, Reject

REQUIRED = ("TermType", "PricePerUnit", "Unit", "Currency", "Instance Type", "Operating System", "Tenancy",
            "CapacityStatus", "Pre Installed S/W")
PREAMBLE_MAX = 20

#: Column order of the real EC2 price list bulk CSV (feeds.md s1a). The parser finds columns by name,
#: so this is documentation of the format and what tests and benchmarks write.
BULK_HEADER = [
    "SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate", "StartingRange",
    "EndingRange", "Unit", "PricePerUnit", "Currency", "RelatedTo", "LeaseContractLength", "PurchaseOption",
    "OfferingClass", "Product Family", "serviceCode", "Location", "Location Type", "Instance Type",
    "Current Generation", "Instance Family", "vCPU", "Physical Processor", "Clock Speed", "Memory", "Storage",
    "Network Performance", "Processor Architecture", "Storage Media", "Volume Type", "Max Volume Size",
    "Max IOPS/volume", "Max IOPS Burst Performance", "Max throughput/volume", "Provisioned", "Tenancy",
    "EBS Optimized", "Operating System", "License Model", "Group", "Group Description", "Transfer Type",
    "From Location", "From Location Type", "To Location", "To Location Type", "usageType", "operation",
    "AvailabilityZone", "CapacityStatus", "Classic Network Platform", "Dedicated EBS Throughput", "ECU",
    "Elastic Graphics Type", "Enhanced Networking Supported", "From Region Code", "GPU", "GPU Memory",
    "Instance", "Instance Capacity - 10xlarge", "Instance SKU", "Intel AVX Available", "Intel AVX2 Available",
    "Intel Turbo Available", "MarketOption", "Normalization Size Factor", "Physical Cores", "Pre Installed S/W",
    "Processor Features", "Product Type", "Region Code", "Resource Type", "serviceName", "SnapshotArchiveFeeType",
    "To Region Code", "Volume API Name", "VPCNetworkingSupport",
]


def _num(text: str) -> float | None:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]*)?)", text or "")
    return float(m.group(1)) if m else None


def parse_bulk_csv(lines: Iterable[str], *, region: str, as_of: str, source: str,
                   meta: dict | None = None) -> Iterator[Offer | Reject]:
    """Offers (on-demand only) from the lines of one AWS EC2 bulk price list CSV.

    ``meta`` receives the preamble (``publication_date``, ``version``). Raises
    :class:`~hetinfra.price_feeds.http.FetchError` when the text is not such a CSV.
    """
    it = iter(lines)
    header: list[str] | None = None
    preamble: dict[str, str] = {}
    for i, line in enumerate(it):
        if i >= PREAMBLE_MAX:
            break
        try:
            row = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        row = [c.lstrip("\ufeff") for c in row]
        if "SKU" in row and "TermType" in row:
            header = row
            break
        if len(row) >= 2:
            preamble[row[0]] = row[1]
    if header is None:
        raise FetchError(f"aws {region}: not an EC2 price list CSV (no header row with \"SKU\" and \"TermType\" "
                         f"in the first {PREAMBLE_MAX} lines)",
                         hint="the price list format changed, or an error page was returned")
    if preamble.get("OfferCode", "AmazonEC2") != "AmazonEC2":
        raise FetchError(f"aws {region}: price list is for {preamble['OfferCode']!r}, not AmazonEC2")
    idx = {name: i for i, name in enumerate(header)}
    missing = [c for c in REQUIRED if c not in idx]
    if missing:
        raise FetchError(f"aws {region}: price list CSV lacks column(s) {', '.join(missing)}")
    if meta is not None:
        meta.setdefault("publication_date", {})[region] = preamble.get("Publication Date", "")
        meta.setdefault("version", {})[region] = preamble.get("Version", "")
    ncol = len(header)

    def col(row: list[str], name: str, default: str = "") -> str:
        j = idx.get(name)
        return row[j] if j is not None else default

    candidates = (ln for ln in it if '"OnDemand"' in ln and '"Linux"' in ln and AWS_GPU_LINE_RE.search(ln))
    for row in csv.reader(candidates):
        if len(row) != ncol:
            yield Reject("malformed row", f"aws {region}: {len(row)} columns, header has {ncol}")
            continue
        if (col(row, "TermType") != "OnDemand" or col(row, "Operating System") != "Linux"
                or col(row, "Tenancy") != "Shared" or col(row, "CapacityStatus") != "Used"
                or col(row, "Pre Installed S/W") not in ("", "NA")
                or col(row, "License Model") not in ("", "No License required")
                or col(row, "MarketOption") not in ("", "OnDemand")
                or col(row, "Unit") != "Hrs" or col(row, "Currency") != "USD"
                or not col(row, "Product Family", "Compute Instance").startswith("Compute Instance")):
            continue
        itype = col(row, "Instance Type")
        fam = aws_gpu(itype)
        if fam is None:
            continue
        gpu, table_count = fam
        try:
            price = plain_float(col(row, "PricePerUnit").strip())
        except ValueError:
            yield Reject(NOT_A_NUMBER, f"aws {region}/{itype}: PricePerUnit {col(row, 'PricePerUnit')!r}")
            continue
        csv_count = _num(col(row, "GPU"))
        count = int(csv_count) if csv_count and csv_count == int(csv_count) else table_count
        yield Offer(cloud="aws", region=col(row, "Region Code") or region, instance_type=itype, gpu=gpu,
                    gpu_count=count if count is not None else 0,
                    gpu_memory_gb=gpu_memory_gb(itype, gpu) or 0.0,
                    vcpus=_num(col(row, "vCPU")) or 0.0, memory_gb=_num(col(row, "Memory")) or 0.0,
                    price_per_hour=price, spot_price_per_hour=None, as_of=as_of, source=source)


class AwsBulkAdapter(FeedAdapter):
    name = "aws"
    label = "aws-pricelist"
    clouds = ("aws",)

    def url(self, region: str) -> str:
        return f"{self.config.aws_pricing_url.rstrip('/')}/offers/v1.0/aws/AmazonEC2/current/{region}/index.csv"

    def rows(self, ctx: FetchContext):
        rows: list[Offer | Reject] = []
        ctx.meta["urls"] = []
        for region in self.config.aws_regions:
            url = self.url(region)
            ctx.meta["urls"].append(url)
            ctx.report(0, None, f"{region}: downloading")

            def prog(done: int, total: int | None, region=region) -> None:
                ctx.report(done, total, f"{region}: {done / 1e6:.0f} MB")

            rows.extend(parse_bulk_csv(ctx.http.iter_lines(url, progress=prog), region=region, as_of=ctx.as_of,
                                       source=ctx.label, meta=ctx.meta))
        offers = [r for r in rows if isinstance(r, Offer)]
        if offers and self.config.aws_spot != "off":
            self._add_spot(offers, ctx)
            by_key = {(o.region, o.instance_type): o for o in offers}
            rows = [by_key.get((r.region, r.instance_type), r) if isinstance(r, Offer) else r for r in rows]
        return rows

    def _add_spot(self, offers: list[Offer], ctx: FetchContext) -> None:
        from dataclasses import replace

        from hetinfra.price_feeds.aws_api import spot_prices

        prices, warns = spot_prices(sorted({o.region for o in offers}), sorted({o.instance_type for o in offers}),
                                    timeout_s=ctx.http.timeout_s)
        if warns:
            ctx.warnings.extend(f"aws: {w}; on-demand prices only" if i == 0 else f"aws: {w}"
                                for i, w in enumerate(warns))
        ctx.meta["spot_prices"] = len(prices)
        for i, o in enumerate(offers):
            spot = prices.get((o.region, o.instance_type))
            if spot is not None:
                offers[i] = replace(o, spot_price_per_hour=spot)

    def coverage(self, offers, ctx):
        return {"aws": frozenset(self.config.aws_regions)}
