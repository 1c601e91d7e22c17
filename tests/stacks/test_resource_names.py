"""Every resource a stack leaves Pulumi to name has a name its cloud accepts, for any service name the spec
accepts (1-63 characters): those the stack names itself fit the cloud's limit, and the others' logical names
leave room for the 8 characters Pulumi appends (`<service>-gcp-<region>-subnet` of a 40-character service was a
71-character GCE name `pulumi up` refuses; an IAM role, an Azure virtual network or a Traffic Manager profile the
same). A name that fits as Pulumi makes it is not set: a deployed stack keeps its names (stacks.fleet.fitted)."""

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


#: the auto-named resources of the AWS and Azure stacks: type -> (the name's input, the cloud's limit)
OTHERS = {"aws:iam/role:Role": ("name", 64),
          "azure-native:resources:ResourceGroup": ("resourceGroupName", 90),
          "azure-native:network:VirtualNetwork": ("virtualNetworkName", 64),
          "azure-native:network:NetworkSecurityGroup": ("networkSecurityGroupName", 80),
          "azure-native:network:Subnet": ("subnetName", 80),
          "azure-native:network:PublicIPAddress": ("publicIpAddressName", 80),
          "azure-native:network:NetworkInterface": ("networkInterfaceName", 80),
          "azure-native:trafficmanager:Profile": ("profileName", 63)}


def _names(mocks) -> dict[str, str | None]:
    """logical name -> the name given (None: Pulumi's), over the GCE resources above."""
    return {a.name: a.inputs.get("name") for a in mocks.created if a.typ in NAMED}


def _fit(names: dict[str, str | None]) -> list[str]:
    bad = [n for n, given in names.items() if given is None and len(n) + 8 > 63]
    return bad + [given for given in names.values() if given is not None and not re.match(GCE, given)]


def _too_long(mocks) -> list[str]:
    """The AWS and Azure resources whose name, given or Pulumi's, passes its cloud's limit."""
    out = []
    for a in mocks.created:
        if a.typ in OTHERS:
            key, limit = OTHERS[a.typ]
            given = a.inputs.get(key)
            if (len(given) if given is not None else len(a.name) + 8) > limit:
                out.append(f"{a.typ} {a.name} {given}")
    return out


@pytest.mark.parametrize("length", [4, 63])
def test_every_gce_name_of_the_fleet_fits_for_any_service_name(mocks, three_cloud_plan, length):
    plan = dict(three_cloud_plan, service=("s" + "x" * 62)[:length],
                deploy=dict(three_cloud_plan["deploy"], gateway=dict(GATEWAY)))
    gateway_urls(plan, "gcp")
    names = _names(mocks)
    assert len(names) >= 6 and not _fit(names), _fit(names)
    if length == 4:  # a short service: every name is Pulumi's, as deployed stacks have them
        assert all(given is None for given in names.values())


@pytest.mark.parametrize("length", [4, 63])
def test_every_gce_name_of_the_global_load_balancer_fits(gmocks, origin_plan, length):  # noqa: F811
    entry_url(dict(origin_plan, service=("g" + "y" * 62)[:length]), "gcp")
    names = {n: given for n, given in _names(gmocks).items() if "-global" in n}
    assert len(names) >= 8 and not _fit(names), _fit(names)


@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("length", [4, 63])
def test_every_auto_named_resource_of_aws_and_azure_fits(mocks, three_cloud_plan, cloud, length):
    plan = dict(three_cloud_plan, service=("a" + "z" * 62)[:length],
                deploy=dict(three_cloud_plan["deploy"], gateway=dict(GATEWAY)))
    gateway_urls(plan, cloud)
    assert any(a.typ in OTHERS for a in mocks.created) and not _too_long(mocks), _too_long(mocks)


@pytest.mark.parametrize("length", [4, 63])
def test_the_traffic_manager_profile_fits(mocks, origin_plan, length):  # noqa: F811
    entry_url(dict(origin_plan, service=("t" + "m" * 62)[:length]), "azure")
    assert any(a.typ == "azure-native:trafficmanager:Profile" for a in mocks.created)
    assert not _too_long(mocks), _too_long(mocks)
