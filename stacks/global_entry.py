"""One global entry point per cloud in front of the regional gateways (docs/regions.md).

A plan that routes by origin (plan.json ``routing_by_origin``) with a gateway in each fleet region
gets, in each cloud's stack, the cloud's latency-based front door, whose targets are that cloud's
regional gateways; each gateway serves its own region's row of the plan (``--region``), so a client
sent to its nearest gateway is served as its origin's row says:

- **aws**: Route 53 latency records, one per gateway region (``set_identifier`` = region), each with
  an HTTP(S) health check on the gateway's ``/health``. Route 53 needs a hosted zone the user owns:
  stack config ``hetinfra:dnsZoneId`` and ``hetinfra:dnsName`` (e.g. ``api.example.com``); without
  them nothing is created and a warning says how to set them.
- **gcp**: a global external Application Load Balancer (``EXTERNAL_MANAGED``): one unmanaged
  instance group per gateway, a backend service over them (Google sends each client to the closest
  healthy one), a URL map, an HTTP proxy, a global address and forwarding rule on port 80, and a
  firewall rule for Google's health-check ranges.
- **azure**: a Traffic Manager profile with ``Performance`` routing and one external endpoint per
  gateway (its public IP and Azure region), probing ``/health``.

``global_endpoint`` (exported by the program) is the front door's client URL. A DNS or anycast
front door fails over to another region when a gateway is down: with ``residency`` that gateway
serves its own region's row, so docs/regions.md says how to keep resident clients on their continent.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlparse

import pulumi

from hetinfra.document import Plan
from hetinfra.facts import GCP
from hetinfra.stacks import names

__all__ = ["GCP_HEALTH_CHECK_RANGES", "global_entry", "wants_global_entry"]

#: Google's load-balancer health-check source ranges (hetinfra.facts, from the Cloud Load Balancing documentation)
GCP_HEALTH_CHECK_RANGES = list(GCP.health_check_ranges)


def wants_global_entry(plan: Plan) -> bool:
    """Routing by origin with gateways: the plan's clients are in several places."""
    return bool(plan.routing_by_origin) and plan.deploy.gateway.enabled


class _Gateway:
    """One regional gateway: its region and the fleet component that made it."""

    def __init__(self, region: str, fleet):
        self.region = region
        self.gateway_url = fleet.gateway_url
        self.fleet = fleet


def _part(url: pulumi.Output, what: str) -> pulumi.Output:
    return url.apply(lambda u: getattr(urlparse(u), what))


def global_entry(plan: Plan, cloud: str, fleets: list[tuple[str, object]], config: dict | None = None
                 ) -> pulumi.Output | None:
    """Create ``cloud``'s front door over the gateways of ``fleets`` ((region, fleet component)
    pairs); its client URL, or None."""
    gateways = [_Gateway(r, f) for r, f in fleets if getattr(f, "gateway_url", None) is not None]
    if not gateways or not wants_global_entry(plan):
        return None
    names.install()  # its resources have no component parent: the root's transformation names them
    config = config or {}
    g = plan.deploy.gateway
    port, tls = g.port, bool(g.tls_cert)
    name = f"{plan.service}-{cloud}-global"
    if cloud == "aws":
        return _route53(name, gateways, port, tls, config)
    if cloud == "gcp":
        return _gcp_lb(name, gateways, port, tls)
    return _traffic_manager(name, plan.service, gateways, port, tls)


def _route53(name: str, gateways: list, port: int, tls: bool, config: dict) -> pulumi.Output | None:
    import pulumi_aws as aws

    zone, dns = config.get("dnsZoneId"), config.get("dnsName")
    if not zone or not dns:
        pulumi.log.warn("no global entry point on AWS: Route 53 latency records need a hosted zone; run "
                        "`pulumi config set hetinfra:dnsZoneId <zone id>` and `pulumi config set hetinfra:dnsName "
                        "<name in it>` (docs/regions.md)")
        return None
    for f in gateways:
        ip = _part(f.gateway_url, "hostname")
        check = aws.route53.HealthCheck(f"{name}-{f.region}-hc", ip_address=ip, port=port,
                                        type="HTTPS" if tls else "HTTP", resource_path="/health",
                                        failure_threshold=3, request_interval=30,
                                        tags={"Name": f"{name}-{f.region}", "hetinfra-role": "global-entry"})
        aws.route53.Record(f"{name}-{f.region}", zone_id=zone, name=dns, type="A", ttl=60, records=[ip],
                           set_identifier=f.region, health_check_id=check.id,
                           latency_routing_policies=[aws.route53.RecordLatencyRoutingPolicyArgs(region=f.region)])
    return pulumi.Output.from_input(f"{'https' if tls else 'http'}://{dns}:{port}/v1")


def _gcp_lb(name: str, gateways: list, port: int, tls: bool) -> pulumi.Output:
    import pulumi_gcp as gcp

    protocol = "HTTPS" if tls else "HTTP"
    groups = []
    for f in gateways:
        vm = f.fleet.gateway_vm
        groups.append(gcp.compute.InstanceGroup(
            f"{name}-{f.region}-ig", zone=vm.zone, instances=[vm.self_link],
            named_ports=[gcp.compute.InstanceGroupNamedPortArgs(name="gateway", port=port)]))
        gcp.compute.Firewall(f"{name}-{f.region}-fw-hc", network=f.fleet.gateway_network, direction="INGRESS",
                             source_ranges=GCP_HEALTH_CHECK_RANGES, target_tags=vm.tags,
                             allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(port)])])
    probe = {"port": port, "request_path": "/health"}
    check = gcp.compute.HealthCheck(
        f"{name}-hc", check_interval_sec=10, timeout_sec=5,
        https_health_check=gcp.compute.HealthCheckHttpsHealthCheckArgs(**probe) if tls else None,
        http_health_check=None if tls else gcp.compute.HealthCheckHttpHealthCheckArgs(**probe))
    backend = gcp.compute.BackendService(
        f"{name}-bs", protocol=protocol, port_name="gateway", load_balancing_scheme="EXTERNAL_MANAGED",
        timeout_sec=600, health_checks=check.id, locality_lb_policy="ROUND_ROBIN",
        backends=[gcp.compute.BackendServiceBackendArgs(group=ig.self_link, balancing_mode="UTILIZATION",
                                                        capacity_scaler=1.0) for ig in groups])
    url_map = gcp.compute.URLMap(f"{name}-urlmap", default_service=backend.id)
    proxy = gcp.compute.TargetHttpProxy(f"{name}-proxy", url_map=url_map.id)
    address = gcp.compute.GlobalAddress(f"{name}-ip")
    gcp.compute.GlobalForwardingRule(f"{name}-fr", target=proxy.id, ip_address=address.address, port_range="80",
                                     load_balancing_scheme="EXTERNAL_MANAGED")
    return pulumi.Output.concat("http://", address.address, "/v1")


def _traffic_manager(name: str, service: str, gateways: list, port: int, tls: bool) -> pulumi.Output:
    from pulumi_azure_native import resources, trafficmanager as network

    rg = resources.ResourceGroup(f"{name}-rg", location=gateways[0].region)
    # a Traffic Manager name is a global DNS label: the service plus a stable hash of it
    label = f"{service}-{hashlib.sha256(service.encode()).hexdigest()[:8]}"
    network.Profile(
        f"{name}-tm", resource_group_name=rg.name, location="global", profile_status="Enabled",
        traffic_routing_method="Performance",
        dns_config=network.DnsConfigArgs(relative_name=label, ttl=30),
        monitor_config=network.MonitorConfigArgs(protocol="HTTPS" if tls else "HTTP", port=port, path="/health"),
        endpoints=[network.EndpointArgs(name=f.region, type="Microsoft.Network/trafficManagerProfiles/externalEndpoints",
                                        target=_part(f.gateway_url, "hostname"), endpoint_location=f.region,
                                        endpoint_status="Enabled") for f in gateways])
    return pulumi.Output.from_input(f"{'https' if tls else 'http'}://{label}.trafficmanager.net:{port}/v1")
