"""Network time between cloud regions: the round trip a request pays when its client's region is not
the region of the unit that serves it.

The table is estimated (no published measurement covers the three clouds with a licence that allows
reuse; ``data/SOURCES.md`` says which sources were looked for): great-circle distance between the
places in ``data/region_locations.csv`` x ``ROUTE_INFLATION`` at ``FIBRE_KM_PER_MS``, there and
back. Region names are unique across the three clouds (``us-east-1`` is AWS, ``us-east1`` GCP,
``eastus`` Azure), so a client origin is named by its region alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from hetinfra.facts import CLOUDS
from hetinfra.csvtext import csv_records
from hetinfra.price_feeds.geo import continent

__all__ = ["FIBRE_KM_PER_MS", "ROUTE_INFLATION", "Location", "continent_of", "locate", "locations", "round_trip_ms"]

#: light in fibre (refractive index ~1.5): km per millisecond, one way
FIBRE_KM_PER_MS = 200.0
#: fibre route length / great-circle distance (cables follow coasts, roads and rails)
ROUTE_INFLATION = 1.3
EARTH_RADIUS_KM = 6371.0


@dataclass(frozen=True)
class Location:
    cloud: str
    region: str
    place: str
    latitude: float
    longitude: float


@lru_cache(maxsize=1)
def locations() -> dict[str, Location]:
    """region name -> its Location (every region of the embedded snapshot)."""
    text = resources.files("hetinfra.price_feeds").joinpath("data/region_locations.csv").read_text()
    out = {}
    for _, row in csv_records(text, "region_locations.csv")[1]:
        out[row["region"]] = Location(row["cloud"], row["region"], row["place"], float(row["latitude"]),
                                      float(row["longitude"]))
    return out


def locate(region: str) -> Location | None:
    return locations().get(region)


def great_circle_km(a: Location, b: Location) -> float:
    """Haversine distance."""
    p1, p2 = math.radians(a.latitude), math.radians(b.latitude)
    dp, dl = p2 - p1, math.radians(b.longitude - a.longitude)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def round_trip_ms(origin: str, region: str) -> float | None:
    """Estimated round trip (ms, 0.1 ms steps, rounded up) from a client in region ``origin`` to a
    unit in ``region``: 0 within one region, None where either place is unknown."""
    if origin == region:
        return 0.0
    a, b = locate(origin), locate(region)
    if a is None or b is None:
        return None
    ms = 2 * great_circle_km(a, b) * ROUTE_INFLATION / FIBRE_KM_PER_MS
    return math.ceil(ms * 10 - 1e-9) / 10


def continent_of(region: str, cloud: str | None = None) -> str | None:
    """The continent of a region named alone (a client origin) or with its cloud (a unit)."""
    if cloud is not None:
        return continent(cloud, region)
    loc = locate(region)
    if loc is not None:
        return continent(loc.cloud, region)
    return next((c for c in (continent(k, region) for k in CLOUDS) if c), None)
