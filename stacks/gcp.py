"""GCP GPU fleet of one region: VPC network, subnetwork, firewalls, self-healing instance groups.

Resources (children, names prefixed by the component's name): ``<name>-provider`` (gcp.Provider
with the project and region), ``-secrets``/``-secrets-v1`` (Secret Manager: the fleet's secrets as
one JSON document), ``-sa`` (the VMs' service account) with ``-sa-secret`` (secretAccessor on that
secret only): VMs read their secrets at boot with their identity, never from metadata; with
multi-node pipelines also ``-sa-viewer`` (compute.viewer on the project: workers list instances to
find their head). ``-net`` (custom-mode network), ``-subnet``, ``-fw-internal`` (fleet-internal
traffic: Ray, pipeline stages), ``-fw-health`` (Google's health-check probers, 35.191.0.0/16 and
130.211.0.0/22, plus 209.85.152.0/22 and 209.85.204.0/22 for external load balancers, to the vLLM
port only), ``-fw-vllm``, ``-fw-ssh`` and ``-fw-mgmt`` (``management_cidrs`` to the vLLM port;
each only when CIDRs are declared), ``-hc`` (the autohealers' HTTP check of ``/health``: every
30 s, unhealthy after 10 failures, i.e. 5 minutes) and ``-lb-hc`` (the load balancers' regional
check: every 10 s, out after 3). Per unit the groups and load balancer of
:mod:`hetinfra.stacks.gcp_group`; ``endpoints`` are the units' load balancers, ``vms`` the groups.

With ``deploy.gateway.enabled``: ``-gateway`` (a CPU VM, ``deploy.gateway.gcp_machine_type``, on
Ubuntu 22.04, running ``hetinfra gateway`` against the units' internal load balancers),
``-fw-gateway`` (clients from ``deploy.ingress_cidrs`` to the gateway port only) and
``-fw-vllm-from-gateway`` (the vLLM port from the gateway's network tag); ``-fw-vllm`` (clients
to the vLLM port) is then not created, so no backend port is open to clients. ``gateway_url`` is
its client URL.

The zone of the groups is the region's first zone (``compute.get_zones``) unless the
``hetinfra:zones`` config maps the region to one, e.g. ``{"us-central1": "us-central1-c"}``: GPUs
are not offered in every zone, so the groups are zonal, all of a pipeline replica in that zone.
``deploy.autoscale`` keeps the planned size (docs/guides/pulumi.md, "The stacks": GCE's autoscaler has no request-rate
signal for a passthrough load balancer).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from hetinfra.compile.images import GCP as IMAGES
from hetinfra.compile.network import FirewallRule
from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import (FleetSecrets, build_units, field, gateway_url, gateway_user_data, pick_image,
                                    secret_document)
from hetinfra.stacks.fleet import FleetArgs, short_name
from hetinfra.stacks.gcp_group import FleetContext, label, unit_groups



def _firewall(name: str, rule: FirewallRule, network, subnet_cidr: str, tags: dict[str, list[str]],
              opts) -> gcp.compute.Firewall:
    """One rule of hetinfra.compile.network.firewall_rules as a GCP firewall: the fleet is its subnet,
    the gateway its network tag (``tags``: role -> network tags); every protocol is TCP, UDP and ICMP."""
    if rule.port is None:
        allows = [gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")]
    else:
        allows = [gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(rule.port)])]
    sources = {"fleet": {"source_ranges": [subnet_cidr]}, "gateway": {"source_tags": tags["gateway"]}}
    return gcp.compute.Firewall(name, network=network, direction="INGRESS", target_tags=tags[rule.target], allows=allows,
                                opts=opts, **sources.get(rule.source, {"source_ranges": list(rule.cidrs)}))


def _first_zone(region: str, project: str, provider) -> str:
    """The region's first zone (by name) that is UP."""
    zones = gcp.compute.get_zones(region=region, status="UP", project=project,
                                  opts=pulumi.InvokeOptions(provider=provider))
    if not zones.names:
        raise ValueError(f"GCP region {region} has no zone that is UP")
    return sorted(zones.names)[0]


def _service_account(name: str, args: FleetArgs, secrets: FleetSecrets, project: str, child):
    """The VMs' service account, which may read the fleet's one Secret Manager document (and list
    instances, when a pipeline worker must find its head)."""
    secret = gcp.secretmanager.Secret(f"{name}-secrets", secret_id=f"hetinfra-{args.service}-{args.region}",
                                      replication=gcp.secretmanager.SecretReplicationArgs(
                                          auto=gcp.secretmanager.SecretReplicationAutoArgs()), opts=child)
    gcp.secretmanager.SecretVersion(f"{name}-secrets-v1", secret=secret.id, secret_data=secret_document(secrets),
                                    opts=child)
    sa = gcp.serviceaccount.Account(f"{name}-sa", account_id=f"hi-{args.service}"[:20].rstrip("-") + "-"
                                    + args.region.replace("-", "")[-9:], display_name=f"hetinfra {args.service} VMs",
                                    opts=child)
    member = sa.email.apply(lambda e: f"serviceAccount:{e}")
    gcp.secretmanager.SecretIamMember(f"{name}-sa-secret", secret_id=secret.id,
                                      role="roles/secretmanager.secretAccessor", member=member, opts=child)
    if any(fu.unit.num_nodes > 1 for fu in args.units):  # pipeline workers list instances to find their head
        gcp.projects.IAMMember(f"{name}-sa-viewer", project=project, role="roles/compute.viewer", member=member,
                               opts=child)
    return sa


def _gateway_vm(name: str, args: FleetArgs, zone: str, gw_tag: list[str], image, subnet, startup: str, sa, child):
    """The CPU VM running `hetinfra gateway`, with a public address."""
    return gcp.compute.Instance(
        f"{name}-gateway", machine_type=args.gateway_vm_type, zone=zone, tags=gw_tag,
        boot_disk=gcp.compute.InstanceBootDiskArgs(initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
            image=image, size=20, type="pd-balanced")),
        network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
            subnetwork=subnet.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()])],
        metadata_startup_script=startup,
        service_account=gcp.compute.InstanceServiceAccountArgs(email=sa.email, scopes=["cloud-platform"]),
        labels={"hetinfra-service": label(args.service), "hetinfra-role": "gateway"}, opts=child)


class GcpGpuFleet(pulumi.ComponentResource):
    """All planned groups of one GCP region; outputs ``endpoints`` (unit -> URLs), ``vms`` (groups),
    ``units`` (each unit's MIGs: hetinfra.stacks.common.unit_output) and ``images``."""

    def __init__(self, name: str, args: FleetArgs, secrets: FleetSecrets, *, project: str,
                 zone: str | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hetinfra:gcp:GpuFleet", name, None, opts)
        provider = gcp.Provider(f"{name}-provider", project=project, region=args.region,
                                opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        if zone is None:
            zone = _first_zone(args.region, project, provider)
        sa = _service_account(name, args, secrets, project, child)
        ref = SecretRef("gcp", f"hetinfra-{args.service}-{args.region}", project)
        invoke = pulumi.InvokeOptions(provider=provider)
        self.images: dict = {}

        def image(role: str) -> pulumi.Input[str]:  # the family's newest image, unless pinned
            found = gcp.compute.get_image(family=IMAGES[role]["family"], project=IMAGES[role]["project"], opts=invoke)
            return pick_image(args, self.images, role, found.self_link)

        identity = gcp.compute.InstanceTemplateServiceAccountArgs(email=sa.email, scopes=["cloud-platform"])
        net = gcp.compute.Network(f"{name}-net", auto_create_subnetworks=False, opts=child)
        subnet = gcp.compute.Subnetwork(f"{name}-subnet", network=net.id, region=args.region,
                                        ip_cidr_range=args.subnet_cidr, opts=child)
        target = [short_name(f"hetinfra-{args.service}", 63)]  # a network tag: at most 63 characters
        gw_tag = [short_name(f"hetinfra-{args.service}-gateway", 63)]
        tags = {"fleet": target, "gateway": gw_tag}
        for rule in args.firewall:
            _firewall(f"{name}-fw-{rule.name}", rule, net.id, args.subnet_cidr, tags, child)
        http = {"port": args.port, "request_path": "/health"}
        autoheal = gcp.compute.HealthCheck(
            f"{name}-hc", check_interval_sec=30, timeout_sec=10, healthy_threshold=1, unhealthy_threshold=10,
            http_health_check=gcp.compute.HealthCheckHttpHealthCheckArgs(**http), opts=child)
        lb_check = gcp.compute.RegionHealthCheck(
            f"{name}-lb-hc", region=args.region, check_interval_sec=10, timeout_sec=5, healthy_threshold=2,
            unhealthy_threshold=3, http_health_check=gcp.compute.RegionHealthCheckHttpHealthCheckArgs(**http),
            opts=child)
        ctx = FleetContext(args=args, secrets=secrets, zone=zone, network=net.id, subnet=subnet.id, target_tags=target,
                           identity=identity, ref=ref, project=project, image=image("gpu"),
                           autoheal_check=autoheal.id, lb_check=lb_check.id, opts=child)
        self.endpoints, self.vms, backends, self.units = build_units(args, lambda fu: unit_groups(ctx, fu))
        self.gateway_url = None
        if args.gateway:
            vm = _gateway_vm(name, args, zone, gw_tag, image("gateway"), subnet, gateway_user_data(args, ref, backends),
                             sa, child)
            public = vm.network_interfaces.apply(lambda nics: field(field(nics[0], "access_configs")[0], "nat_ip"))
            self.gateway_url = gateway_url(args, public)
            self.gateway_vm, self.gateway_network = vm, net.id  # for the global entry point (stacks.global_entry)
        self.register_outputs({"endpoints": self.endpoints, "vms": self.vms, "gateway": self.gateway_url})
