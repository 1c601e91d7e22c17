"""Which continent a cloud region is on, from its name.

Failover keeps a unit's replicas on the continent the plan put them on (a replica that moves from
us-east-1 to eu-south-2 adds a transatlantic round trip to every request of its clients), and the
snapshot's coverage is counted per continent. AWS and GCP names carry a geographic prefix; Azure
names do not, so they are listed. A region this module does not know is on no continent (None):
callers treat it as its own place.
"""

from __future__ import annotations

__all__ = ["continent"]

_PREFIXES = [
    ("us-", "North America"), ("ca-", "North America"), ("mx-", "North America"),
    ("northamerica-", "North America"), ("sa-", "South America"), ("southamerica-", "South America"),
    ("eu-", "Europe"), ("europe-", "Europe"), ("il-", "Middle East"), ("me-", "Middle East"),
    ("af-", "Africa"), ("africa-", "Africa"), ("ap-", "Asia-Pacific"), ("asia-", "Asia-Pacific"),
    ("australia-", "Asia-Pacific"),
]

_AZURE = {
    "North America": "eastus eastus2 westus westus2 westus3 centralus northcentralus southcentralus westcentralus "
                     "canadacentral canadaeast mexicocentral",
    "South America": "brazilsouth brazilsoutheast chilecentral",
    "Europe": "northeurope westeurope uksouth ukwest francecentral francesouth germanywestcentral germanynorth "
              "swedencentral switzerlandnorth switzerlandwest norwayeast norwaywest polandcentral italynorth "
              "spaincentral austriaeast",
    "Middle East": "uaenorth uaecentral qatarcentral israelcentral",
    "Africa": "southafricanorth southafricawest",
    "Asia-Pacific": "eastasia southeastasia japaneast japanwest koreacentral koreasouth centralindia southindia "
                    "westindia australiaeast australiasoutheast australiacentral newzealandnorth indonesiacentral "
                    "malaysiawest",
}
_AZURE_REGIONS = {r: c for c, names in _AZURE.items() for r in names.split()}


def continent(cloud: str, region: str) -> str | None:
    """'North America', 'South America', 'Europe', 'Middle East', 'Africa', 'Asia-Pacific', or None."""
    if cloud == "azure":
        return _AZURE_REGIONS.get(region)
    return next((c for prefix, c in _PREFIXES if region.startswith(prefix)), None)
