"""Every GCE resource of the GCP stack has a name GCE accepts (at most 63 characters), for any service name the
spec accepts: those it names itself (``name``) fit, and the others' logical names leave room for the 8 characters
Pulumi appends (`<service>-gcp-<region>-subnet` of a 40-character service was a name `pulumi up` refuses). A name
that fits as Pulumi makes it is not set: a deployed stack keeps its names (stacks.gcp_group.gce_named)."""

from __future__ import annotations

import re

import pytest

pulumi = pytest.importorskip("pulumi")

from tests.stacks.test_gateway_stack import GATEWAY, gateway_urls  # noqa: E402
from tests.stacks.test_global_entry import entry_url, gmocks, origin_plan  # noqa: E402,F401  (fixtures)

GCE = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z"
NAMED = ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork", "gcp:compute/firewall:Firewall",
         "gcp:compute/healthCheck:HealthCheck", "gcp:compute/regionHealthCheck:RegionHealthCheck",
         "gcp:compute/instance:Instance", "gcp:compute/instanceGroup:InstanceGroup",
         "gcp:compute/backendService:BackendService", "gcp:compute/uRLMap:URLMap",
         "gcp:compute/targetHttpProxy:TargetHttpProxy", "gcp:compute/globalAddress:GlobalAddress",
         "gcp:compute/globalForwardingRule:GlobalForwardingRule")


def _names(mocks) -> dict[str, str | None]:
    """logical name -> the name given (None: Pulumi's), over the GCE resources above."""
    return {a.name: a.inputs.get("name") for a in mocks.created if a.typ in NAMED}


def _fit(names: dict[str, str | None]) -> list[str]:
    bad = [n for n, given in names.items() if given is None and len(n) + 8 > 63]
    return bad + [given for given in names.values() if given is not None and not re.match(GCE, given)]


@pytest.mark.parametrize("length", [4, 30, 40, 63])
def test_every_gce_name_of_the_fleet_fits_for_any_service_name(mocks, three_cloud_plan, length):
    plan = dict(three_cloud_plan, service=("s" + "x" * 62)[:length],
                deploy=dict(three_cloud_plan["deploy"], gateway=dict(GATEWAY)))
    gateway_urls(plan, "gcp")
    names = _names(mocks)
    assert len(names) >= 6 and not _fit(names), _fit(names)
    if length == 4:  # a short service: every name is Pulumi's, as deployed stacks have them
        assert all(given is None for given in names.values())


@pytest.mark.parametrize("length", [4, 40, 63])
def test_every_gce_name_of_the_global_load_balancer_fits(gmocks, origin_plan, length):  # noqa: F811
    entry_url(dict(origin_plan, service=("g" + "y" * 62)[:length]), "gcp")
    names = {n: given for n, given in _names(gmocks).items() if "-global" in n}
    assert len(names) >= 8 and not _fit(names), _fit(names)
