"""Where GCP and Azure can launch a GPU at all: zone accelerator types and resource SKU restrictions.

Helpers of :mod:`hetinfra.price_feeds.cloud_quotas` (which makes the requests with its bearer
client, turns every failure into a warning and adds these caps to the quota caps; the planner takes
the minimum per key, :func:`~hetinfra.price_feeds.availability.caps_dict`). Both signals only ever
give a cap of 0, for both purchase options, and add an info line to the warnings list.

GCP (source ``gcp-accelerator-types``): one request per lookup,
  ``GET {base}/compute/v1/projects/{project}/aggregated/acceleratorTypes`` (pages followed with
  ``pageToken=`` from ``nextPageToken``) -> ``{"items": {"zones/us-central1-a": {"acceleratorTypes":
  [{"name": "nvidia-l4", "zone": ".../zones/us-central1-a"}, ...]}, "zones/europe-west4-b":
  {"warning": {...}}}}`` (a warning scope: no accelerator in that zone). Names -> SkyPilot names in
  :data:`GCP_ACCELERATOR_NAMES`; OBSOLETE or DELETED types do not count. A GPU that the offers list
  in a region but that no zone of the region offers is capped at 0. Not decided (no cap; a warning
  where it matters): a region none of whose zones is in the response, a region with a zone in
  ``unreachables``, a GPU whose GCE name is not in the table.

Azure (source ``azure-sku-restrictions``): one request per location,
  ``GET {base}/subscriptions/{sub}/providers/Microsoft.Compute/skus?api-version=2021-07-01&$filter=
  location eq '{location}'`` (``nextLink`` pages followed) -> ``{"value": [{"resourceType":
  "virtualMachines", "name": "Standard_NC24ads_A100_v4", "restrictions": [{"type": "Location",
  "reasonCode": "NotAvailableForSubscription", "values": ["eastus"], "restrictionInfo": {...}}]}]}``.
  A ``Location`` restriction naming the location makes that VM size unusable there; a ``Zone``
  restriction (some zones only) does not; other resource types are ignored. A GPU is capped at 0 in
  a location only when EVERY offered size with that GPU there is location-restricted.
  Known limitation: when only some of a GPU's sizes are restricted, nothing is capped (an info
  line names them) -- caps are per (cloud, region, gpu), so the planner cannot exclude single VM
  sizes through them and may still pick a restricted size. A size absent from the SKU list is not
  treated as restricted.
"""

from __future__ import annotations

import urllib.parse
from typing import Iterable

from hetinfra.price_feeds.caps import PURCHASES, AvailabilityCap
from hetinfra.price_feeds.http import FetchError, HttpClient, redact

MAX_PAGES = 50
AZURE_SKUS_API_VERSION = "2021-07-01"
GCP_ZONES_SOURCE = "gcp-accelerator-types"
AZURE_SKUS_SOURCE = "azure-sku-restrictions"

#: GCE accelerator type name -> SkyPilot GPU name.
GCP_ACCELERATOR_NAMES: dict[str, str] = {
    "nvidia-l4": "L4", "nvidia-tesla-t4": "T4", "nvidia-tesla-v100": "V100", "nvidia-tesla-p100": "P100",
    "nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100-80GB", "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100-MEGA", "nvidia-h200-141gb": "H200", "nvidia-b200": "B200",
}
_GONE = {"OBSOLETE", "DELETED"}


def _lower(value) -> str:  # "East US" ~ "eastus"; VM size names are case-insensitive
    return str(value).replace(" ", "").lower()


def azure_pages(client: HttpClient, url: str, what: str) -> list:
    """The ``value`` items of an ARM list over all pages (``nextLink`` on the same host, no loops)."""
    out: list = []
    seen: set[str] = set()
    base = urllib.parse.urlsplit(url)
    for _ in range(MAX_PAGES):
        seen.add(url)
        body = client.get_json(url)
        if not isinstance(body, dict) or not isinstance(body.get("value"), list):
            raise FetchError(f"no value list in the {what} from {redact(url)}")
        out.extend(body["value"])
        url = body.get("nextLink")
        if not url:
            return out
        nxt = urllib.parse.urlsplit(url)
        if (nxt.scheme, nxt.netloc) != (base.scheme, base.netloc):
            raise FetchError(f"nextLink points to another host ({nxt.netloc}); not followed")
        if url in seen:
            raise FetchError(f"nextLink loops back to {redact(url)}")
    raise FetchError(f"more than {MAX_PAGES} {what} pages")


def _zero(cloud: str, region: str, gpu: str, source: str) -> list[AvailabilityCap]:
    return [AvailabilityCap(cloud, region, gpu, 0, p, source) for p in PURCHASES]


# --- GCP ----------------------------------------------------------------------------------------

def gcp_zone_accelerators(client: HttpClient, project_url: str) -> tuple[dict[str, set[str]], set[str]]:
    """({zone: SkyPilot GPUs offered there}, unreachable zones) from aggregated acceleratorTypes.

    Every zone in the response is a key (a zone without accelerators maps to an empty set).
    """
    url = f"{project_url}/aggregated/acceleratorTypes"
    zones: dict[str, set[str]] = {}
    unreachable: set[str] = set()
    token, seen = None, set()
    for _ in range(MAX_PAGES):
        page = url + (f"?pageToken={urllib.parse.quote(token, safe='')}" if token else "")
        body = client.get_json(page)
        items = (body.get("items") or {}) if isinstance(body, dict) else None
        if not isinstance(items, dict):
            raise FetchError(f"no items map in the accelerator types from {redact(page)}")
        for scope, entry in items.items():
            if not str(scope).startswith("zones/"):
                continue
            got = zones.setdefault(str(scope)[len("zones/"):], set())
            types = entry.get("acceleratorTypes") if isinstance(entry, dict) else None
            for t in types if isinstance(types, list) else ():
                if not isinstance(t, dict) or (t.get("deprecated") or {}).get("state") in _GONE:
                    continue
                gpu = GCP_ACCELERATOR_NAMES.get(str(t.get("name", "")))
                zone = str(t.get("zone") or "").rsplit("/", 1)[-1]
                if gpu:
                    (zones.setdefault(zone, set()) if zone else got).add(gpu)
        unreachable.update(str(u).rsplit("/", 1)[-1] for u in body.get("unreachables") or ())
        token = body.get("nextPageToken")
        if not token:
            return zones, unreachable
        if token in seen:
            raise FetchError(f"nextPageToken repeats on {redact(url)}")
        seen.add(token)
    raise FetchError(f"more than {MAX_PAGES} accelerator type pages")


def _zone_region(zone: str) -> str:  # us-central1-a -> us-central1
    return zone.rsplit("-", 1)[0]


def gcp_zone_caps(regions: Iterable[str], offers: Iterable, zones: dict[str, set[str]],
                  unreachable: set[str] = frozenset()) -> tuple[list[AvailabilityCap], list[str]]:
    """Caps of 0 for offered GPUs that no zone of their region has, and the info lines."""
    offers = [o for o in offers if o.cloud == "gcp"]
    known = set(GCP_ACCELERATOR_NAMES.values())
    caps: list[AvailabilityCap] = []
    infos: list[str] = []
    for region in sorted(set(regions)):
        gpus = sorted({o.gpu for o in offers if o.region == region and o.gpu in known})
        if not gpus:
            continue
        here = {z: g for z, g in zones.items() if _zone_region(z) == region}
        lost = sorted(z for z in unreachable if _zone_region(z) == region)
        if lost or not here:
            why = f"zone(s) {', '.join(lost)} unreachable" if lost else "no zone of it listed"
            infos.append(f"gcp: accelerator types for {region}: {why}; zone availability not applied")
            continue
        offered = set().union(*here.values())
        for gpu in gpus:
            if gpu not in offered:
                caps.extend(_zero("gcp", region, gpu, GCP_ZONES_SOURCE))
                infos.append(f"gcp: {gpu} is offered in no zone of {region} (accelerator types); capped at 0")
    return caps, infos


# --- Azure --------------------------------------------------------------------------------------

def azure_skus_url(base_url: str, sub: str, region: str) -> str:
    flt = urllib.parse.quote(f"location eq '{region}'", safe="")
    return (f"{base_url}/subscriptions/{urllib.parse.quote(sub, safe='')}/providers/Microsoft.Compute/skus"
            f"?api-version={AZURE_SKUS_API_VERSION}&$filter={flt}")


def azure_location_restrictions(skus: list, region: str) -> dict[str, str]:
    """{lower-cased VM size: reasonCode} for virtualMachines SKUs with a Location restriction in region."""
    out: dict[str, str] = {}
    loc = _lower(region)
    for sku in skus:
        if not isinstance(sku, dict) or _lower(sku.get("resourceType", "")) != "virtualmachines":
            continue
        for r in sku.get("restrictions") or ():
            if not isinstance(r, dict) or _lower(r.get("type", "")) != "location":
                continue
            info = r.get("restrictionInfo") if isinstance(r.get("restrictionInfo"), dict) else {}
            where = list(r.get("values") or ()) + list(info.get("locations") or ())
            if loc in {_lower(w) for w in where}:
                out[_lower(sku.get("name", ""))] = str(r.get("reasonCode") or "restricted")
    return out


def azure_restriction_caps(region: str, offers: Iterable, restricted: dict[str, str]
                           ) -> tuple[list[AvailabilityCap], list[str]]:
    """Caps of 0 where every offered size of a GPU is location-restricted; info lines otherwise."""
    offers = [o for o in offers if o.cloud == "azure" and o.region == region]
    caps: list[AvailabilityCap] = []
    infos: list[str] = []
    for gpu in sorted({o.gpu for o in offers}):
        sizes = sorted({o.instance_type for o in offers if o.gpu == gpu})
        hit = [f"{s} ({restricted[_lower(s)]})" for s in sizes if _lower(s) in restricted]
        if not hit:
            continue
        if len(hit) == len(sizes):
            caps.extend(_zero("azure", region, gpu, AZURE_SKUS_SOURCE))
            infos.append(f"azure {region}: every offered {gpu} size is restricted there ({', '.join(hit)}; "
                         "resource SKUs); capped at 0")
        else:
            infos.append(f"azure {region}: {', '.join(hit)} restricted there (resource SKUs); other {gpu} sizes "
                         "are not, so no cap (caps cannot exclude single VM sizes)")
    return caps, infos
