"""GCP GPU fleet of one region: VPC network, subnetwork, firewalls, GPU instances running vLLM.

Resources (children, names prefixed by the component's name): ``<name>-provider`` (gcp.Provider
with the project and region), ``-secrets``/``-secrets-v1`` (Secret Manager: the fleet's secrets as
one JSON document), ``-sa`` (the VMs' service account) with ``-sa-secret`` (secretAccessor on that
secret only): VMs read their secrets at boot with their identity, never from metadata; ``-net`` (custom-mode network), ``-subnet``, ``-fw-internal``
(fleet-internal traffic: Ray, pipeline stages), ``-fw-vllm``, ``-fw-ssh`` and ``-fw-mgmt``
(``management_cidrs`` to the vLLM port; each only when CIDRs are declared), and one ``gcp.compute.Instance`` per VM with its guest accelerators,
``on_host_maintenance: TERMINATE`` (GPU VMs cannot live-migrate), SPOT provisioning for spot
units, the Deep Learning VM image with the driver installed at first boot, and the startup script.

With ``deploy.gateway.enabled``: ``-gateway`` (a CPU VM, ``deploy.gateway.gcp_machine_type``, on
Ubuntu 22.04, running ``hetinfra gateway`` against the units' private addresses), ``-fw-gateway``
(clients from ``deploy.ingress_cidrs`` to the gateway port only) and ``-fw-vllm-from-gateway``
(the vLLM port from the gateway's network tag); ``-fw-vllm`` (clients to the vLLM port) is then
not created, so no backend port is open to clients. ``gateway_url`` is its client URL.

The zone is the region's first zone (``compute.get_zones``) unless the ``hetinfra:zones`` config
maps the region to one, e.g. ``{"us-central1": "us-central1-c"}``: GPUs are not offered in every zone.
"""

from __future__ import annotations

import re

import pulumi
import pulumi_gcp as gcp

from hetinfra.compile.images import GCP as IMAGES
from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import (FleetSecrets, build_units, field, gateway_url, gateway_user_data, secret_document,
                                    pick_image, user_data, vm_units)
from hetinfra.stacks.fleet import FleetArgs

# SkyPilot accelerator name -> GCE accelerator type.
ACCELERATORS = {
    "T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100", "P100": "nvidia-tesla-p100", "P4": "nvidia-tesla-p4",
    "L4": "nvidia-l4", "A100": "nvidia-tesla-a100", "A100-80GB": "nvidia-a100-80gb",
    "H100": "nvidia-h100-80gb", "H100-MEGA": "nvidia-h100-mega-80gb", "H200": "nvidia-h200-141gb",
    "B200": "nvidia-b200",
}


def _label(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


class GcpGpuFleet(pulumi.ComponentResource):
    """All planned VMs of one GCP region; outputs ``endpoints`` (unit -> URLs) and ``vms``."""

    def __init__(self, name: str, args: FleetArgs, secrets: FleetSecrets, *, project: str,
                 zone: str | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hetinfra:gcp:GpuFleet", name, None, opts)
        provider = gcp.Provider(f"{name}-provider", project=project, region=args.region,
                                opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        if zone is None:
            zones = gcp.compute.get_zones(region=args.region, status="UP", project=project,
                                          opts=pulumi.InvokeOptions(provider=provider))
            if not zones.names:
                raise ValueError(f"GCP region {args.region} has no zone that is UP")
            zone = sorted(zones.names)[0]
        # Secrets: one Secret Manager document; the VMs' service account may read it (and list
        # instances: pipeline workers find their head).
        secret = gcp.secretmanager.Secret(f"{name}-secrets", secret_id=f"hetinfra-{args.service}-{args.region}",
                                          replication=gcp.secretmanager.SecretReplicationArgs(
                                              auto=gcp.secretmanager.SecretReplicationAutoArgs()), opts=child)
        gcp.secretmanager.SecretVersion(f"{name}-secrets-v1", secret=secret.id, secret_data=secret_document(secrets),
                                        opts=child)
        sa = gcp.serviceaccount.Account(f"{name}-sa", account_id=f"hi-{args.service}"[:20].rstrip("-") + "-"
                                        + args.region.replace("-", "")[-9:], display_name=f"hetinfra {args.service} VMs",
                                        opts=child)
        gcp.secretmanager.SecretIamMember(f"{name}-sa-secret", secret_id=secret.id,
                                          role="roles/secretmanager.secretAccessor",
                                          member=sa.email.apply(lambda e: f"serviceAccount:{e}"), opts=child)
        ref = SecretRef("gcp", f"hetinfra-{args.service}-{args.region}", project)
        invoke = pulumi.InvokeOptions(provider=provider)
        self.images: dict = {}

        def image(role: str) -> pulumi.Input[str]:  # the family's newest image, unless pinned
            found = gcp.compute.get_image(family=IMAGES[role]["family"], project=IMAGES[role]["project"], opts=invoke)
            return pick_image(args, self.images, role, found.self_link)

        gpu_image = image("gpu")
        identity = [gcp.compute.InstanceServiceAccountArgs(email=sa.email, scopes=["cloud-platform"])]
        net = gcp.compute.Network(f"{name}-net", auto_create_subnetworks=False, opts=child)
        subnet = gcp.compute.Subnetwork(f"{name}-subnet", network=net.id, region=args.region,
                                        ip_cidr_range=args.subnet_cidr, opts=child)
        target = [f"hetinfra-{args.service}"]
        gcp.compute.Firewall(f"{name}-fw-internal", network=net.id, direction="INGRESS",
                             source_ranges=[args.subnet_cidr], target_tags=target, opts=child,
                             allows=[gcp.compute.FirewallAllowArgs(protocol="tcp"),
                                     gcp.compute.FirewallAllowArgs(protocol="udp"),
                                     gcp.compute.FirewallAllowArgs(protocol="icmp")])
        gw = args.gateway
        gw_tag = [f"hetinfra-{args.service}-gateway"]
        for suffix, cidrs, port in (("vllm", args.ingress_cidrs, args.port), ("ssh", args.ssh_cidrs, 22),
                                    ("mgmt", args.management_cidrs, args.port)):
            if suffix == "vllm" and gw:
                continue  # with a gateway, clients reach only the gateway
            if cidrs:
                gcp.compute.Firewall(f"{name}-fw-{suffix}", network=net.id, direction="INGRESS",
                                     source_ranges=list(cidrs), target_tags=target, opts=child,
                                     allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(port)])])

        def make_vm(fu, replica, rank, vm_name, head_ip):
            u = fu.unit
            gpu = u.node_gpu(rank)
            if gpu not in ACCELERATORS:
                raise ValueError(f"no GCE accelerator type known for {gpu} (unit {u.name})")
            sched = gcp.compute.InstanceSchedulingArgs(
                on_host_maintenance="TERMINATE", automatic_restart=not u.spot, preemptible=u.spot,
                provisioning_model="SPOT" if u.spot else "STANDARD",
                instance_termination_action="DELETE" if u.spot else None)
            vm = gcp.compute.Instance(
                vm_name, machine_type=u.node_instance_type(rank), zone=zone, tags=target,
                boot_disk=gcp.compute.InstanceBootDiskArgs(initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=gpu_image, size=fu.disk_gb, type="pd-balanced")),
                network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=subnet.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()])],
                guest_accelerators=[gcp.compute.InstanceGuestAcceleratorArgs(type=ACCELERATORS[gpu],
                                                                             count=u.gpus_per_instance)],
                scheduling=sched, metadata={"install-nvidia-driver": "True"},
                metadata_startup_script=user_data(fu, rank, args, secrets, ref, head_ip), service_account=identity[0],
                labels={"hetinfra-service": _label(args.service), "hetinfra-unit": _label(fu.name)}, opts=child)
            private = vm.network_interfaces.apply(lambda nics: field(nics[0], "network_ip"))
            public = vm.network_interfaces.apply(lambda nics: field(field(nics[0], "access_configs")[0], "nat_ip"))
            return vm, private, public

        self.zone = zone
        self.endpoints, self.vms, heads = build_units(args, make_vm)
        self.units = vm_units(args, "gcp:compute/instance:Instance")
        self.gateway_url = None
        if gw:
            port = int(gw.get("port", 8080))
            if args.ingress_cidrs:
                gcp.compute.Firewall(f"{name}-fw-gateway", network=net.id, direction="INGRESS",
                                     source_ranges=list(args.ingress_cidrs), target_tags=gw_tag, opts=child,
                                     allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(port)])])
            if args.ssh_cidrs:
                gcp.compute.Firewall(f"{name}-fw-gateway-ssh", network=net.id, direction="INGRESS",
                                     source_ranges=list(args.ssh_cidrs), target_tags=gw_tag, opts=child,
                                     allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])])
            gcp.compute.Firewall(f"{name}-fw-vllm-from-gateway", network=net.id, direction="INGRESS",
                                 source_tags=gw_tag, target_tags=target, opts=child,
                                 allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(args.port)])])
            vm = gcp.compute.Instance(
                f"{name}-gateway", machine_type=gw.get("gcp_machine_type") or "e2-standard-2", zone=zone, tags=gw_tag,
                boot_disk=gcp.compute.InstanceBootDiskArgs(initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=image("gateway"), size=20, type="pd-balanced")),
                network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=subnet.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()])],
                metadata_startup_script=gateway_user_data(args, ref, heads), service_account=identity[0],
                labels={"hetinfra-service": _label(args.service), "hetinfra-role": "gateway"}, opts=child)
            public = vm.network_interfaces.apply(lambda nics: field(field(nics[0], "access_configs")[0], "nat_ip"))
            self.gateway_url = gateway_url(args, public)
        self.register_outputs({"endpoints": self.endpoints, "vms": self.vms, "gateway": self.gateway_url})
