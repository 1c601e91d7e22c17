#!/usr/bin/env python3
"""Offer sources of ``tools/build_snapshot.py`` beyond the shared SkyPilot extract. Standard library only.

Two kinds of input:

- **SkyPilot v8 catalog directories** (``<dir>/<cloud>/vms.csv``): the shared US extract, the
  world supplement ``tools/snapshot_data/skypilot-v8-world`` (non-US rows of the same upstream
  file), or a full upstream catalog such as ``~/.sky/catalogs/v8``. A directory may carry a
  ``SOURCE.json`` manifest, ``{"aws": {"source": "skypilot-catalog-v8/aws@e385a0d3", "as_of":
  "2025-11-01"}, ...}``, because catalog files carry no date; without one, the caller names the
  as-of dates (``--as-of aws=2026-01-15``) and the source tag is derived from the directory.
- **GCP prices of ``pricing.yml`` of Cyclenerd/google-cloud-pricing-cost-calculator** (Apache-2.0;
  generated from Google's public Cloud Billing Catalog API: per machine type and region the whole
  machine's on-demand ``hour`` and ``hour_spot``). ``extract-cyclenerd`` keeps the GPU machine
  types unchanged in a small JSON file; ``reduce_cyclenerd`` turns them into catalog offers.

    git -C REPO show COMMIT:pricing.yml > pricing.yml
    python tools/snapshot_sources.py extract-cyclenerd pricing.yml --commit COMMIT --out FILE.json
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
    from hetinfra.price_feeds.offers import parse_time
    from hetinfra.price_feeds.skypilot_catalog import CatalogOffer
except ImportError:  # not installed: import the folder as a plain package
    sys.path.insert(0, str(REPO_ROOT))
    from price_feeds.families import gcp_host_gpu  # type: ignore[no-redef]
    from price_feeds.offers import parse_time  # type: ignore[no-redef]
    from price_feeds.skypilot_catalog import CatalogOffer  # type: ignore[no-redef]

CLOUDS = ("aws", "gcp", "azure")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


def is_date(text: str) -> bool:
    """``text`` is YYYY-MM-DD naming a real day: hetinfra's offers reader refuses an as_of such as
    2026-13-45 at its line (price_feeds.offers.parse_time, the reader's own parse), so a snapshot
    written with one could not be loaded."""
    return bool(DATE.match(text)) and parse_time(text) is not None

# pricing.yml GPU key -> SkyPilot accelerator name (T4/V100 need an n1 host of the user's choice and
# h100-80gb-mega is outside the snapshot's vocabulary, so they are left out).
CYCLENERD_GPUS = {"a100": "A100", "a100-80gb": "A100-80GB", "h100-80gb": "H100", "h200-141gb": "H200", "l4": "L4"}
GPU_HOSTS = re.compile(r"^(a2-(highgpu|megagpu|ultragpu)|a3-(highgpu|ultragpu)|g2-standard)-")


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
        if not is_date(as_of):
            raise SourceError(f"{path}: {cloud}.as_of {as_of!r} is not YYYY-MM-DD")
    return out


def parse_as_of(items: list[str]) -> dict[str, str]:
    """``--as-of aws=2026-01-15`` values -> {cloud: date}."""
    out = {}
    for item in items:
        cloud, _, date = item.partition("=")
        if cloud not in CLOUDS or not is_date(date):
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


# --- Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml (Apache-2.0) ----------------------

def extract_cyclenerd(pricing_yml: Path, commit: str) -> dict:
    """The GPU machine types of ``pricing.yml`` (compute.instance.<type>: GPU count, cpu, ram and per
    region ``hour``/``hour_spot``), values unchanged, in a small JSON file. Needs PyYAML (a
    maintainer's run only; building the snapshot from the JSON needs the standard library only)."""
    import yaml

    text = pricing_yml.read_text()
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    instances = doc["compute"]["instance"]
    keep = {}
    for itype, entry in sorted(instances.items()):
        gpu_keys = [k for k in entry if k in CYCLENERD_GPUS]
        if not GPU_HOSTS.match(itype) or len(gpu_keys) != 1:
            continue
        keep[itype] = {"gpu": gpu_keys[0], "count": entry[gpu_keys[0]], "cpu": entry["cpu"], "ram": entry["ram"],
                       "cost": {region: {k: v for k, v in c.items() if k in ("hour", "hour_spot")}
                                for region, c in sorted(entry.get("cost", {}).items())
                                if isinstance(c, dict) and "hour" in c}}
    return {"file": "pricing.yml", "commit": commit, "license": "Apache-2.0",
            "generated": str(doc["about"]["generated"]), "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "instances": keep}


def reduce_cyclenerd(data: dict) -> Iterator[CatalogOffer]:
    """One offer per (machine type, region): pricing.yml's ``hour`` is the whole machine (vCPUs,
    memory and GPUs, from the SKUs of Google's Cloud Billing Catalog), ``hour_spot`` its spot price."""
    for itype, entry in sorted(data["instances"].items()):
        acc = gcp_host_gpu(itype)
        gpu = CYCLENERD_GPUS[entry["gpu"]]
        if acc is None or acc != (gpu, int(entry["count"])):
            continue  # a machine type whose GPU disagrees with hetinfra's table: no row rather than a wrong one
        for region, cost in sorted(entry["cost"].items()):
            hour, spot = float(cost["hour"]), cost.get("hour_spot")
            yield CatalogOffer(cloud="gcp", region=region, instance_type=itype, gpu=gpu, gpu_count=acc[1],
                               raw_count=str(acc[1]), vcpus=float(entry["cpu"]), memory_gb=float(entry["ram"]),
                               prices=[round(hour, 6)] if hour > 0 else [],
                               spots=[round(float(spot), 6)] if spot else [], zones=1)


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
    ex = sub.add_parser("extract-cyclenerd", help="keep the GPU machine types of Cyclenerd's pricing.yml")
    ex.add_argument("pricing_yml", type=Path)
    ex.add_argument("--commit", required=True, help="the repository commit the file was read at, recorded")
    ex.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    out = extract_cyclenerd(args.pricing_yml, args.commit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(out['instances'])} machine types", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
