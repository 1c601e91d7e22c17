"""The fleets' firewall as one cloud-neutral list (hetinfra.compile.network.firewall_rules): what is
open to whom, for every combination of the spec's CIDR lists and the gateway, on every cloud."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.compile.network import SOURCES, faces_internet, firewall_rules
from hetinfra.facts import CLOUDS, GCP, SSH_PORT

CIDRS = st.lists(st.sampled_from(["10.0.0.0/8", "192.0.2.0/24", "198.51.100.7/32", "0.0.0.0/0"]), max_size=2,
                 unique=True)


@settings(max_examples=150, deadline=None)
@given(cloud=st.sampled_from(sorted(CLOUDS)), port=st.integers(1024, 65535), ingress=CIDRS, ssh=CIDRS, mgmt=CIDRS,
       gateway_port=st.one_of(st.none(), st.integers(1, 65535).filter(lambda p: p != SSH_PORT)))
def test_clients_reach_only_the_front_door_and_nothing_is_open_unasked(cloud, port, ingress, ssh, mgmt, gateway_port):
    rules = firewall_rules(cloud, port=port, ingress_cidrs=ingress, ssh_cidrs=ssh, management_cidrs=mgmt,
                           gateway_port=gateway_port)
    names = [r.name for r in rules]
    assert len(set(names)) == len(names) and all(r.source in SOURCES for r in rules)
    assert all(r.cidrs for r in rules if r.source == "cidrs")  # no rule without a source
    by_name = {r.name: r for r in rules}
    # the fleet's own VMs on every port (Ray, pipeline stages), the load balancers' probers on vLLM's
    assert by_name["internal"].port is None and by_name["internal"].source == "fleet"
    assert by_name["health"].port == port and by_name["health"].source == "probers"
    # clients: the vLLM port without a gateway; with one, only the gateway's port, and vLLM only from it
    if gateway_port is None:
        assert ("vllm" in by_name) == bool(ingress) and not any(r.target == "gateway" for r in rules)
        assert "vllm-from-gateway" not in by_name
    else:
        assert "vllm" not in by_name and by_name["vllm-from-gateway"].source == "gateway"
        assert ("gateway" in by_name) == bool(ingress)
        if ingress:
            assert (by_name["gateway"].port, by_name["gateway"].cidrs) == (gateway_port, tuple(ingress))
    for r in rules:
        if r.source == "cidrs" and set(r.cidrs) & set(ingress) - set(ssh) - set(mgmt):
            assert r.port == (port if gateway_port is None else gateway_port)
    # SSH only from ssh_cidrs; management hosts only to the vLLM port
    assert {r.cidrs for r in rules if r.port == SSH_PORT and r.source == "cidrs"} <= ({tuple(ssh)} if ssh else set())
    assert ("mgmt" in by_name) == bool(mgmt) and (not mgmt or by_name["mgmt"].port == port)


def test_gcp_probers_are_googles_and_external_ones_only_for_public_load_balancers():
    internal = firewall_rules("gcp", port=8000, gateway_port=8080, ingress_cidrs=["10.0.0.0/8"])
    public = firewall_rules("gcp", port=8000, ingress_cidrs=["10.0.0.0/8"])
    assert internal[1].cidrs == GCP.health_check_ranges
    assert public[1].cidrs == GCP.health_check_ranges + GCP.external_lb_check_ranges
    assert firewall_rules("aws", port=8000)[1].cidrs == ()  # the cloud's own: AWS's VPC, Azure's default rule


def test_load_balancers_face_the_internet_only_when_someone_outside_must_reach_them():
    assert faces_internet(gateway=False, ingress_cidrs=["10.0.0.0/8"], management_cidrs=[])
    assert faces_internet(gateway=False, ingress_cidrs=[], management_cidrs=["198.51.100.7/32"])
    assert not faces_internet(gateway=True, ingress_cidrs=["10.0.0.0/8"], management_cidrs=["198.51.100.7/32"])
    assert not faces_internet(gateway=False, ingress_cidrs=[], management_cidrs=[])


def test_the_spec_refuses_a_gateway_on_the_ssh_port():
    """The draw above leaves out 22 because the spec refuses it (one validator, spec and plan.json)."""
    import pytest
    from pydantic import ValidationError

    from hetinfra.spec.deploy import GatewaySpec

    with pytest.raises(ValidationError, match="SSH port"):
        GatewaySpec(port=SSH_PORT)
    assert GatewaySpec(port=443).port == 443
