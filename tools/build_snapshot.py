#!/usr/bin/env python3
"""Build hetinfra's embedded price snapshot, price_feeds/data/offers_snapshot.csv.

Maintainer script; standard library only. It reads SkyPilot v8 catalog directories (by default
the partial US extract ../shared/data/skypilot-catalog/v8, see its README, then the non-US rows of
the same upstream files in tools/snapshot_data/skypilot-v8-world) and the GCP list prices of
tools/snapshot_data/gcp-cyclenerd (tools/snapshot_sources.py), reduces them to one row per
(cloud, region, instance_type), adds the few rows that exist only as numbers in
../shared/notes/feeds.md, validates everything and writes a sorted CSV.

    python tools/build_snapshot.py [CATALOG_DIR ...] [--as-of CLOUD=YYYY-MM-DD] [--gcp-prices FILE|none] [--out PATH]

One source per (cloud, region): a region comes from the first CATALOG_DIR whose <cloud>/vms.csv
has any row in it; the Cyclenerd GCP prices only fill GCP regions that no catalog has. A full upstream
catalog works too: ``python tools/build_snapshot.py ~/.sky/catalogs/v8 --as-of aws=2026-01-15 ...``
(catalog files carry no date; a directory may instead carry a SOURCE.json manifest).

Rules (documented in price_feeds/data/SOURCES.md):
- price_per_hour: on-demand USD/h for the whole instance. AWS: the catalog Price, the same in
  every AZ of a region (checked). GCP: host-VM row + GPU row of the same zone (README "Column
  encoding"; feeds.md section 4), identical across the zones of a region (checked). Azure: one row
  per region already.
- spot_price_per_hour: the MINIMUM over the AZs/zones of the region that have a spot price. This is
  what gpuhunt does (feeds.md section 1c) and what SkyPilot charges for a region when no zone is
  pinned (cheapest zone). Empty when no zone has one, and dropped when it is not below on-demand
  (Azure H100 "spot" = on-demand is bogus, feeds.md section 5).
- Whole-GPU sizes only; GPU names must be SkyPilot names listed for that cloud in
  common/accelerators.csv and in ALLOWED_GPUS below.
- Never invent a price: a row with no number in the catalog or in feeds.md is left out.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# The catalog parsing is shared with the SkyPilot feed (hetinfra.price_feeds.skypilot_catalog);
# both modules are standard library only, so this works without hetinfra installed too.
try:
    from hetinfra.price_feeds import families, skypilot_catalog as sp
    from hetinfra.price_feeds.offers import format_number
except ImportError:  # not installed: import the folder as a plain package
    sys.path.insert(0, str(REPO_ROOT))
    from price_feeds import families, skypilot_catalog as sp  # type: ignore[no-redef]
    from price_feeds.offers import format_number  # type: ignore[no-redef]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import snapshot_sources as srcs  # noqa: E402  (tools/ is not a package)

DEFAULT_CATALOG = REPO_ROOT.parent / "shared" / "data" / "skypilot-catalog" / "v8"
WORLD_CATALOG = REPO_ROOT / "tools" / "snapshot_data" / "skypilot-v8-world"
DEFAULT_GCP_PRICES = REPO_ROOT / "tools" / "snapshot_data" / "gcp-cyclenerd" / "gpu_prices.json"
DEFAULT_OUT = REPO_ROOT / "price_feeds" / "data" / "offers_snapshot.csv"

HEADER = [
    "cloud", "region", "instance_type", "gpu", "gpu_count", "gpu_memory_gb", "vcpus",
    "memory_gb", "price_per_hour", "spot_price_per_hour", "as_of", "source",
]

# Provenance of the shared extract, which carries no SOURCE.json: upstream commits from its README
# ("Source" table). The catalog files carry no dates. Best estimates (SOURCES.md explains them):
# - aws/gcp: content is "late 2025 or later" (feeds.md section 5; catalog README "Clues"):
#   p6-b200/m8a present, a4-highgpu-8g/a3-ultragpu-8g present. We use the lower bound.
# - azure: feeds.md section 5 calls the only available file "stale (2024 vintage)"; mid-2024.
SHARED_EXTRACT = {
    "aws": ("skypilot-catalog-v8/aws@e385a0d3", "2025-11-01"),
    "gcp": ("skypilot-catalog-v8/gcp@8427bbff", "2025-11-01"),
    "azure": ("skypilot-catalog-v8/azure@20291d7e(fork)", "2024-07-01"),
}
CLOUDS = srcs.CLOUDS

# GPU vocabulary of the snapshot (SkyPilot accelerator names); anything else is skipped.
# Memory per GPU (nominal) and the Azure NC H100 v5 NVL override live in price_feeds/families.py.
ALLOWED_GPUS = {"T4", "L4", "A10G", "A10", "L40S", "A100", "A100-80GB", "H100", "H200", "B200", "V100"}

# GCP machine type -> GPU: families.gcp_host_gpu (a2/a3/a4/g2 pinned as SkyPilot does).

# GCP GPU prices we refuse to use (whole machine type left out in that region).
GCP_SUSPECT_GPU_PRICE = {
    # feeds.md section 5: a3-highgpu-8g us-central1 "suspect: wrong H100 SKU matched (see section 4)";
    # section 3: "Nvidia H100 80GB GPU running in Americas" = $9.796550569/GPU-h. These three regions
    # carry the same 4.20076/GPU (43% of that SKU); us-east4 (9.79655) and us-east5 are kept.
    ("H100", "us-central1"): "H100 GPU part 4.20076/GPU: wrong SKU matched (feeds.md s3-s5)",
    ("H100", "us-west1"): "H100 GPU part 4.20076/GPU: wrong SKU matched (feeds.md s3-s5)",
    ("H100", "us-west4"): "H100 GPU part 4.20076/GPU: wrong SKU matched (feeds.md s3-s5)",
    # feeds.md section 5: a2-ultragpu-1g us-central1 "suspect: GPU-part anomaly" (GPU spot 1.964 >
    # on-demand 1.8462). us-east4 (2.07937) is the same price x1.126 with spot at 85% of on-demand,
    # while us-east5 (4.4242, spot 1.272) has a normal spot discount; only us-east5 is kept.
    ("A100-80GB", "us-central1"): "A100-80GB GPU part 1.8462 < its spot 1.964 (feeds.md s5)",
    ("A100-80GB", "us-east4"): "A100-80GB GPU part 2.07937: same anomalous SKU as us-central1",
    # feeds.md section 5: "H200 rows are inconsistent across regions (36.6 vs 74.5)". The 36.60258
    # regions have spot above on-demand (us-south1: 43.9512) or no spot (us-east5).
    ("H200", "us-east5"): "H200x8 GPU part 36.60258: inconsistent with 74.49392 (feeds.md s5)",
    ("H200", "us-south1"): "H200x8 GPU part 36.60258 < its spot 43.9512 (feeds.md s5)",
}

# AWS spot prices we refuse to use (on-demand kept). In ap-southeast-3 the catalog's spot sits at
# or just above on-demand / 10 for every GPU type read (p5.48xlarge 7.5955 of 75.9552, p5.4xlarge
# 0.9494 of 9.4944, p5en 8.7348 of 87.34848, g5.12xlarge 0.7939 of 7.93854, g5.48xlarge 2.2797
# of 22.79672): a floor value, not a market price (other regions: 25-45% of on-demand).
AWS_SUSPECT_SPOT_REGIONS = {"ap-southeast-3": "spot at the on-demand/10 floor: not a market price"}
# A "spot" within 0.1% of on-demand is on-demand rounded to 4 decimals (g5.48xlarge eu-west-2
# 20.6757 of 20.67572): no spot discount, left empty like spot = on-demand.
SPOT_MIN_DISCOUNT = 0.001

# Azure fixes (feeds.md section 5): ND96isr_H100_v5 has AcceleratorCount 12 in the file, a bug;
# the ND H100 v5 VM has 8 H100 GPUs. Applied by skypilot_catalog.reduce_azure.
AZURE_COUNT_FIX = families.AZURE_COUNT_FIX

# Rows that exist only as numbers in feeds.md (the extract lacks them). Catalog rows win if both
# exist (the script then only checks that they agree). vcpus/memory_gb for instance types that the
# extract has in other regions are the same as there (specs do not vary by region).
# (cloud, region, instance_type, gpu, gpu_count, vcpus, memory_gb, price, spot, source)
FEEDS_ONLY_ROWS = [
    # feeds.md section 5 table: g4dn.xlarge, 1xT4 16G, 4/16, us-east-1, on-demand 0.526,
    # spot 0.1845-0.2010 across AZs (catalog v7, commit 001367d2). Spot = low end = AZ minimum.
    ("aws", "us-east-1", "g4dn.xlarge", "T4", 1, 4, 16, 0.526, 0.1845, "feeds.md:s5/aws-v7"),
    # feeds.md section 5 "Other rows", AWS us-east-1: g5.2xlarge 1.212 (no spot given).
    # Specs 8 vCPU / 32 GiB as in the extract's us-east-2/us-west-2 g5.2xlarge rows.
    ("aws", "us-east-1", "g5.2xlarge", "A10G", 1, 8, 32, 1.212, None, "feeds.md:s5"),
    # feeds.md section 5 "Other rows", AWS us-east-1: p3.2xlarge 3.06 (no spot given).
    # Specs 8 vCPU / 61 GiB as in the extract's us-east-2/us-west-2 p3.2xlarge rows.
    ("aws", "us-east-1", "p3.2xlarge", "V100", 1, 8, 61, 3.06, None, "feeds.md:s5"),
]

# Sanity checks against numbers quoted in feeds.md section 5 / the catalog README.
# (cloud, region, instance_type, expected on-demand, expected spot or None to skip)
SANITY = [
    ("gcp", "us-central1", "g2-standard-4", 0.70683, None),  # README example, feeds.md s5
    ("gcp", "us-central1", "g2-standard-8", 0.85362, None),  # feeds.md s3 worked ex. 0.853608
    ("gcp", "us-central1", "a2-highgpu-1g", 3.67339, 1.80385),  # feeds.md s5
    ("gcp", "us-east4", "a3-highgpu-8g", 87.83247, None),  # feeds.md s5
    ("aws", "us-east-1", "p5.48xlarge", 55.04, None),
    ("aws", "us-east-1", "g5.xlarge", 1.006, None),
    ("aws", "us-east-1", "g6.xlarge", 0.8048, None),
    ("aws", "us-east-1", "g6e.xlarge", 1.861, None),
    ("aws", "us-east-1", "p5en.48xlarge", 63.296, None),
    ("aws", "us-east-1", "g5.48xlarge", 16.288, None),
    ("azure", "eastus", "Standard_NC4as_T4_v3", 0.526, 0.062699),
    ("azure", "eastus", "Standard_NC24ads_A100_v4", 3.673, 0.444433),
    ("azure", "eastus", "Standard_ND96isr_H100_v5", 98.32, None),
    # World rows (read in the upstream files; SOURCES.md "Sources and as-of dates").
    ("aws", "eu-north-1", "p5.48xlarge", 58.8928, 20.2439),
    ("aws", "eu-central-1", "p4d.24xlarge", 27.43298, 8.1571),
    ("aws", "ap-northeast-1", "p5en.48xlarge", 79.12, 28.4648),
    # Cyclenerd pricing.yml @fd66b26f, compute.instance.<type>.cost.<region>.hour / hour_spot
    ("gcp", "europe-west4", "g2-standard-4", 0.742916, 0.38986),
    ("gcp", "europe-west4", "a3-highgpu-8g", 112.540479, 44.118779),
    ("gcp", "asia-southeast1", "a2-highgpu-1g", 4.013758, 2.40826),
]

# GCP rows both sources price: the Cyclenerd list prices must agree with SkyPilot's on-demand totals
# (they are the same SKUs). Spot is not compared: it moves weekly.
GCP_AGREEMENT = 0.01  # max relative difference of the median overlapping row


VERBOSE = False


def log(msg: str, routine: bool = False) -> None:
    """Print a note to stderr; routine skips (non-GPU types, GPUs outside the vocabulary) only with -v."""
    if VERBOSE or not routine:
        print(msg, file=sys.stderr)


fnum = sp.fnum
whole = sp.whole


def load_csv(path: Path) -> list[dict[str, str]]:
    return sp.read_rows(path)


def gpu_ok(cloud: str, gpu: str, acc_clouds: dict[str, set[str]]) -> bool:
    return gpu in ALLOWED_GPUS and cloud in acc_clouds.get(gpu, set())


def gpu_memory(instance_type: str, gpu: str) -> int:
    gb = families.gpu_memory_gb(instance_type, gpu)
    return int(gb) if gb == int(gb) else gb


def spot_or_none(price: float, spots: list[float]) -> float | None:
    if not spots:
        return None
    spot = min(spots)
    return spot if 0 < spot < price * (1 - SPOT_MIN_DISCOUNT) else None


def make_row(cloud, region, itype, gpu, count, vcpus, mem, price, spot, prov) -> dict:
    source, as_of = prov
    return {
        "cloud": cloud, "region": region, "instance_type": itype, "gpu": gpu,
        "gpu_count": count, "gpu_memory_gb": gpu_memory(itype, gpu), "vcpus": vcpus,
        "memory_gb": mem, "price_per_hour": price, "spot_price_per_hour": spot,
        "as_of": as_of, "source": source,
    }


def single_price(prices: set[float], what: str) -> float:
    """The on-demand price must be the same in every zone of a region."""
    if len(prices) != 1:
        # AWS p4d shows 21.957642 vs 21.95764 across regions; within a region it is exact.
        if max(prices) - min(prices) > 1e-4:
            raise ValueError(f"{what}: on-demand differs across zones: {sorted(prices)}")
    return max(prices)


def build_aws(offers, acc_clouds, prov) -> list[dict]:
    out = []
    for c in offers:
        region, itype, gpu, count = c.region, c.instance_type, c.gpu, c.gpu_count
        if not gpu or count is None:
            log(f"skip aws {region} {itype}: no whole GPU ({gpu!r} x {c.raw_count!r})", True)
            continue
        if not gpu_ok("aws", gpu, acc_clouds):
            log(f"skip aws {region} {itype}: GPU {gpu} not in the snapshot vocabulary", True)
            continue
        if not c.prices:
            log(f"skip aws {region} {itype}: no on-demand price (e.g. p5e, capacity blocks only)")
            continue
        price = single_price(set(c.prices), f"aws {region} {itype}")
        spot = spot_or_none(price, c.spots)
        if c.spots and spot is None:
            log(f"aws {region} {itype}: spot {min(c.spots)} not below on-demand {price}; left empty")
        if spot is not None and region in AWS_SUSPECT_SPOT_REGIONS:
            log(f"aws {region} {itype}: spot {spot} left empty: {AWS_SUSPECT_SPOT_REGIONS[region]}")
            spot = None
        n = c.gpu_info_count
        if n and n != count and itype != "p5.4xlarge":  # SkyPilot fixes p5.4xlarge to 1
            log(f"note aws {itype}: GpuInfo count {n} != AcceleratorCount {count}")
        out.append(make_row("aws", region, itype, gpu, count, int(c.vcpus), c.memory_gb, price, spot, prov))
    return out


def build_gcp(offers, acc_clouds, prov) -> list[dict]:
    out = []
    # Host + GPU row of the same zone (README "Column encoding"); non-accelerator machine types
    # are skipped by the reducers (skypilot_catalog.reduce_gcp, snapshot_sources.reduce_cyclenerd).
    for c in offers:
        region, itype, gpu, count = c.region, c.instance_type, c.gpu, c.gpu_count
        if not gpu_ok("gcp", gpu, acc_clouds):
            log(f"skip gcp {region} {itype}: GPU {gpu} not in the snapshot vocabulary / not GCP", True)
            continue
        reason = GCP_SUSPECT_GPU_PRICE.get((gpu, region))
        if reason:
            log(f"skip gcp {region} {itype}: {reason}")
            continue
        if not c.prices:
            log(f"skip gcp {region} {itype}: no zone has both host and {gpu}x{count} prices")
            continue
        price = single_price(set(c.prices), f"gcp {region} {itype}")
        if price <= 0:
            log(f"skip gcp {region} {itype}: total price {price}")
            continue
        spot = spot_or_none(price, c.spots)
        if c.spots and spot is None:
            log(f"gcp {region} {itype}: spot {min(c.spots)} not below on-demand {price}; left empty")
        out.append(make_row("gcp", region, itype, gpu, count, int(c.vcpus), c.memory_gb, price, spot, prov))
    return out


def build_azure(offers, acc_clouds, prov) -> list[dict]:
    out = []
    for c in offers:  # _Promo rows dropped by skypilot_catalog.reduce_azure
        region, itype, gpu, count = c.region, c.instance_type, c.gpu, c.gpu_count
        if not gpu or count is None:
            log(f"skip azure {region} {itype}: no whole GPU ({gpu!r} x {c.raw_count!r})", True)
            continue
        if not gpu_ok("azure", gpu, acc_clouds):
            log(f"skip azure {region} {itype}: GPU {gpu} not in the snapshot vocabulary", True)
            continue
        if not c.prices:
            log(f"skip azure {region} {itype}: no on-demand price (not offered there)")
            continue
        price = c.prices[0]
        spot = spot_or_none(price, c.spots)
        if c.spots and spot is None:
            log(f"azure {region} {itype}: spot {c.spots[0]} not below on-demand {price}; left empty")
        out.append(make_row("azure", region, itype, gpu, count, int(c.vcpus), c.memory_gb, price, spot, prov))
    return out


def add_feeds_rows(rows: list[dict]) -> None:
    index = {(r["cloud"], r["region"], r["instance_type"]): r for r in rows}
    for cloud, region, itype, gpu, count, vcpus, mem, price, spot, source in FEEDS_ONLY_ROWS:
        have = index.get((cloud, region, itype))
        if have is not None:
            if abs(have["price_per_hour"] - price) > 1e-6:
                log(f"note {cloud} {region} {itype}: catalog {have['price_per_hour']} vs feeds.md {price}")
            continue
        row = make_row(cloud, region, itype, gpu, count, vcpus, mem, price, spot, (source, SHARED_EXTRACT[cloud][1]))
        rows.append(row)
        index[(cloud, region, itype)] = row


def validate(rows: list[dict]) -> None:
    seen = set()
    for r in rows:
        key = (r["cloud"], r["region"], r["instance_type"])
        assert key not in seen, f"duplicate {key}"
        seen.add(key)
        assert r["cloud"] in CLOUDS, key
        assert r["source"] and srcs.is_date(r["as_of"]), f"{key}: source and as_of (YYYY-MM-DD) required"
        assert r["price_per_hour"] > 0, key
        s = r["spot_price_per_hour"]
        assert s is None or 0 < s <= r["price_per_hour"], key
        assert isinstance(r["gpu_count"], int) and r["gpu_count"] >= 1, key
        assert r["gpu_memory_gb"] > 0, key
        assert r["gpu"] in ALLOWED_GPUS, key


def sanity(rows: list[dict]) -> None:
    index = {(r["cloud"], r["region"], r["instance_type"]): r for r in rows}
    for cloud, region, itype, od, spot in SANITY:
        r = index.get((cloud, region, itype))
        assert r is not None, f"sanity: missing {cloud} {region} {itype}"
        assert abs(r["price_per_hour"] - od) < 1e-4, (itype, r["price_per_hour"], od)
        if spot is not None:
            assert abs(r["spot_price_per_hour"] - spot) < 1e-4, (itype, r["spot_price_per_hour"], spot)


BUILDERS = {"aws": build_aws, "gcp": build_gcp, "azure": build_azure}


def catalog_sources(catalogs: list[Path], as_of: dict[str, str]) -> list[tuple]:
    """(cloud, (source, as_of), offers, regions with any row) per catalog directory and cloud, in order."""
    out = []
    for cat in catalogs:
        clouds = [c for c in CLOUDS if (cat / c / "vms.csv").is_file()]
        if not clouds:
            raise srcs.SourceError(f"{cat}: no aws/, gcp/ or azure/vms.csv in it; give a SkyPilot v8 catalog directory")
        known = SHARED_EXTRACT if cat.resolve() == DEFAULT_CATALOG.resolve() else None
        prov = srcs.catalog_provenance(cat, clouds, as_of, default=known)
        for cloud in clouds:
            raw = load_csv(cat / cloud / "vms.csv")
            out.append((cloud, prov[cloud], list(sp.REDUCERS[cloud](raw)), {r["Region"] for r in raw}))
    return out


#: regions the GCP price file fills by default: the non-US regions the snapshot has carried since
#: v0.1 (its other 29 regions are left out so that plans made with the embedded snapshot do not move;
#: --gcp-regions all takes every region the file prices)
GCP_PRICE_REGIONS = frozenset({"asia-east1", "asia-northeast1", "asia-northeast3", "asia-south1", "asia-southeast1",
                               "europe-west1", "europe-west2", "europe-west3", "europe-west4"})


def gcp_prices_source(path: Path, all_regions: bool = False) -> tuple:
    import json

    # By default only the (region, machine type) rows the snapshot carried before (rows_kept.json), so
    # that the source's change does not move plans; --gcp-regions all takes every row it prices.
    kept = {tuple(r) for r in json.loads((path.parent / "rows_kept.json").read_text())}
    offers = [o for o in srcs.reduce_cyclenerd(json.loads(path.read_text()))
              if all_regions or (o.region in GCP_PRICE_REGIONS and (o.region, o.instance_type) in kept)]
    prov = srcs.read_manifest(path.parent).get("gcp")
    if prov is None:
        raise srcs.SourceError(f"{path.parent / 'SOURCE.json'}: missing, or without a gcp entry (source, as_of)")
    return "gcp", prov, offers, {o.region for o in offers}


def merge(sources: list[tuple], acc_clouds) -> list[dict]:
    """One source per (cloud, region): the first source with any row in a region supplies it."""
    rows, taken = [], {c: set() for c in CLOUDS}
    for cloud, prov, offers, regions in sources:
        fresh = regions - taken[cloud]
        rows += BUILDERS[cloud]([o for o in offers if o.region in fresh], acc_clouds, prov)
        taken[cloud] |= regions
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalogs", nargs="*", type=Path, metavar="CATALOG_DIR",
                    help=f"SkyPilot v8 catalog dirs, first wins per region (default: {DEFAULT_CATALOG} {WORLD_CATALOG})")
    ap.add_argument("--as-of", action="append", default=[], metavar="CLOUD=YYYY-MM-DD",
                    help="as-of date of a catalog without SOURCE.json (repeat per cloud)")
    ap.add_argument("--gcp-prices", default=str(DEFAULT_GCP_PRICES), metavar="FILE|none",
                    help="GCP list prices extracted by tools/snapshot_sources.py (default: %(default)s)")
    ap.add_argument("--gcp-regions", choices=["default", "all"], default="default",
                    help="GCP regions the price file fills: the snapshot's (default) or every one it prices")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output CSV (default: %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="also list routine skips")
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose

    catalogs = args.catalogs or [DEFAULT_CATALOG, WORLD_CATALOG]
    try:
        sources = catalog_sources(catalogs, srcs.parse_as_of(args.as_of))
        if args.gcp_prices != "none":
            sources.append(gcp_prices_source(Path(args.gcp_prices), args.gcp_regions == "all"))
        acc = next((c / "common" / "accelerators.csv" for c in catalogs if (c / "common" / "accelerators.csv").is_file()),
                   None)
        if acc is None:
            raise srcs.SourceError("no common/accelerators.csv in any CATALOG_DIR (SkyPilot's GPU names per cloud)")
        log(srcs.check_agreement(sources, GCP_AGREEMENT))
    except (srcs.SourceError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = merge(sources, sp.accelerator_clouds(load_csv(acc)))
    if DEFAULT_CATALOG.resolve() in {c.resolve() for c in catalogs}:
        add_feeds_rows(rows)  # they fill gaps of the shared extract only
    validate(rows)
    if [c.resolve() for c in catalogs] == [DEFAULT_CATALOG.resolve(), WORLD_CATALOG.resolve()]:
        sanity(rows)  # the documented numbers are only expected from the default sources
    rows.sort(key=lambda r: (r["cloud"], r["region"], r["gpu"], r["gpu_count"], r["instance_type"]))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        for r in rows:
            w.writerow([format_number(r[h]) for h in HEADER])
    counts = {c: sum(r["cloud"] == c for r in rows) for c in CLOUDS}
    regions = {c: len({r["region"] for r in rows if r["cloud"] == c}) for c in CLOUDS}
    log(f"wrote {len(rows)} rows to {args.out}: {counts}; regions {regions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
