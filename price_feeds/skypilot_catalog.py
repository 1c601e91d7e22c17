"""SkyPilot catalog (schema v8) parsing, shared by the SkyPilot feed and ``tools/build_snapshot.py``.

Standard library only (and hetinfra.csvtext's number rule, standard library only too). Reduces
``<cloud>/vms.csv`` rows to one :class:`CatalogOffer` per (cloud, region, instance type), keeping
every zone's prices so that callers choose their policy (the snapshot builder raises on zone
disagreement; the feed drops such rows with a reason).

Column encoding (../shared/data/skypilot-catalog/v8/README.md):
- aws: one row per (instance type, AZ id); ``Price`` is on-demand for the whole instance and the
  same in every AZ of a region; ``SpotPrice`` is per AZ.
- gcp: host-VM rows (InstanceType set, no accelerator) and accelerator rows (InstanceType empty);
  the total of a machine type in a zone is host price + GPU price of the same zone (SkyPilot's
  ``get_hourly_cost`` + ``get_accelerator_hourly_cost``). Example: us-central1 g2-standard-4 =
  0.14679 + 0.56004 = 0.70683.
- azure: one row per region; ``_Promo`` rows duplicate others; ND96isr_H100_v5 count fixed to 8.
"""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from hetinfra.csvtext import plain_float  # standard library only too: tools import this without hetinfra installed

from .families import AZURE_COUNT_FIX, gcp_host_gpu


@dataclass
class CatalogOffer:
    """One (cloud, region, instance type) of a SkyPilot catalog, before any policy is applied."""

    cloud: str
    region: str
    instance_type: str
    gpu: str  # AcceleratorName ('' when none)
    gpu_count: int | None  # whole GPUs, None when absent or fractional
    raw_count: str  # the AcceleratorCount text as in the file
    vcpus: float | None
    memory_gb: float | None
    prices: list[float] = field(default_factory=list)  # on-demand per zone (> 0 only)
    spots: list[float] = field(default_factory=list)  # spot per zone (> 0 only)
    gpu_info_count: int | None = None  # AWS GpuInfo's total GPU count, when given
    zones: int = 0  # zones seen (GCP: zones with both host and GPU rows)


def fnum(text: str | None) -> float | None:
    """A catalog cell's number (None when empty); a ValueError for one no CSV writer writes ('1_0', '٣')
    or past the largest ('1e400', whose whole() was an OverflowError), as float() read them."""
    text = (text or "").strip()
    return plain_float(text) if text else None


def whole(x: float | None) -> int | None:
    if x is None or x < 1 or x != int(x):
        return None
    return int(x)


def read_rows(path) -> list[dict[str, str]]:
    """Rows of a catalog CSV file."""
    with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM dropped, as hetinfra.csvtext.csv_lines does
        return list(csv.DictReader(fh))


def parse_text(text: str) -> list[dict[str, str]]:
    """Rows of a catalog CSV given as text."""
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def accelerator_clouds(rows: Iterable[dict[str, str]]) -> dict[str, set[str]]:
    """common/accelerators.csv: AcceleratorName -> clouds offering it (Clouds is a Python list)."""
    out = {}
    for row in rows:
        out[row["AcceleratorName"]] = {c.lower() for c in ast.literal_eval(row["Clouds"])}
    return out


def group(rows, key):
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def reduce_aws(rows: list[dict[str, str]]) -> Iterator[CatalogOffer]:
    """AWS rows grouped by (instance type, region), sorted; prices/spots over the AZs."""
    for (itype, region), grp in sorted(group(rows, lambda r: (r["InstanceType"], r["Region"])).items()):
        first = grp[0]
        info_count = None
        if first.get("GpuInfo"):
            try:
                info = ast.literal_eval(first["GpuInfo"])
                info_count = sum(g.get("Count", 0) for g in info.get("Gpus", [])) or None
            except (ValueError, SyntaxError, AttributeError):
                info_count = None
        yield CatalogOffer(
            cloud="aws", region=region, instance_type=itype, gpu=first["AcceleratorName"],
            gpu_count=whole(fnum(first["AcceleratorCount"])), raw_count=first["AcceleratorCount"],
            vcpus=fnum(first["vCPUs"]), memory_gb=fnum(first["MemoryGiB"]),
            prices=[p for p in (fnum(r["Price"]) for r in grp) if p is not None and p > 0],
            spots=[s for s in (fnum(r["SpotPrice"]) for r in grp) if s is not None and s > 0],
            gpu_info_count=info_count, zones=len(grp))


def reduce_gcp(rows: list[dict[str, str]]) -> Iterator[CatalogOffer]:
    """GCP accelerator-optimized machine types: host + GPU row of the same zone, per zone.

    Machine types with no fixed accelerator (n1, e2, ...) are skipped; the GPU is the one the
    machine type pins (families.gcp_host_gpu). Totals are rounded to 6 decimals.
    """
    hosts = [r for r in rows if r["InstanceType"]]
    gpu_rows = {}
    for r in rows:
        if r["InstanceType"] or not r["AcceleratorName"]:
            continue
        count = whole(fnum(r["AcceleratorCount"]))
        if count is not None:
            gpu_rows[(r["AcceleratorName"], count, r["AvailabilityZone"])] = r
    for (itype, region), grp in sorted(group(hosts, lambda r: (r["InstanceType"], r["Region"])).items()):
        acc = gcp_host_gpu(itype)
        if acc is None:
            continue
        gpu, count = acc
        od, spots, zones = [], [], 0
        for h in grp:
            g = gpu_rows.get((gpu, count, h["AvailabilityZone"]))
            if g is None:
                continue  # GPU not offered in that zone
            hp, gp = fnum(h["Price"]), fnum(g["Price"])
            if hp is None or gp is None:
                continue
            zones += 1
            od.append(round(hp + gp, 6))
            hs, gs = fnum(h["SpotPrice"]), fnum(g["SpotPrice"])
            if hs is not None and gs is not None:
                spots.append(round(hs + gs, 6))
        h = grp[0]
        yield CatalogOffer(
            cloud="gcp", region=region, instance_type=itype, gpu=gpu, gpu_count=count, raw_count=str(count),
            vcpus=fnum(h["vCPUs"]), memory_gb=fnum(h["MemoryGiB"]), prices=od,
            spots=[s for s in spots if s > 0], zones=zones)


def reduce_azure(rows: list[dict[str, str]]) -> Iterator[CatalogOffer]:
    """Azure rows (one per region); ``_Promo`` duplicates skipped, known count bugs fixed."""
    for r in rows:
        itype = r["InstanceType"]
        if itype.endswith("_Promo"):
            continue
        price, spot = fnum(r["Price"]), fnum(r["SpotPrice"])
        yield CatalogOffer(
            cloud="azure", region=r["Region"], instance_type=itype, gpu=r["AcceleratorName"],
            gpu_count=AZURE_COUNT_FIX.get(itype) or whole(fnum(r["AcceleratorCount"])),
            raw_count=r["AcceleratorCount"], vcpus=fnum(r["vCPUs"]), memory_gb=fnum(r["MemoryGiB"]),
            prices=[price] if price is not None and price > 0 else [],
            spots=[spot] if spot is not None and spot > 0 else [], zones=1)


REDUCERS = {"aws": reduce_aws, "gcp": reduce_gcp, "azure": reduce_azure}
