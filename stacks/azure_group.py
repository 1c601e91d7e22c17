"""Azure self-healing scale sets of one deployment unit (built by :class:`hetinfra.stacks.azure.AzureGpuFleet`).

Per group of ``VMGroup.groups`` (all replicas of a single-node unit, or one node of a pipeline
replica): ``<group>-vmss``, a VM scale set named ``<group>`` in **Uniform** orchestration of
``size`` VMs of the planned size on the Ubuntu HPC image (which ships the NVIDIA driver; its
version pinned by ``hetinfra:images``, hetinfra.compile.images),
cloud-init custom data = the boot script (no secret in it), a system-assigned identity shared by
its VMs (``<group>-kv-reader``: Key Vault Secrets User on the fleet's vault, read at boot through
IMDS), an instance-level public IP each (outbound traffic for the image and weights; SSH only
where ``ssh_cidrs`` allow), no overprovisioning (extra GPU VMs would cost and eat quota), and
upgrade mode Manual: a changed model reaches running VMs when they are repaired or reimaged, as
on AWS and GCP. Spot units: priority Spot, eviction Delete, max price -1 (never evicted for
price) and Spot Try & Restore (``SPOT_RESTORE``), which brings evicted VMs back to the capacity.

A head's scale set (rank 0) carries the **Application Health extension** (``ApplicationHealthLinux``
1.0, binary states: vLLM's ``/health`` answers 200 with an empty body, which the rich-states
version would read as Unknown and never repair) probing ``http://localhost:<port>/health``, and an
**automatic repairs** policy (Replace, grace = the unit's ``health_grace_s`` within Azure's 10-90
minutes). Uniform is chosen over Flexible because its instances share the scale set's identity
(one Key Vault grant per group, as the boot scripts expect), it keeps default outbound through the
instance public IPs without a NAT gateway, and pipeline workers find their head through the
Uniform-only ``virtualMachineScaleSets/<group>/networkInterfaces`` API (``<group>-head-reader``:
Reader on the head's scale set). Workers have no health extension (they serve no ``/health``):
Azure's service healing restarts them after a host failure and a lost worker makes its head
unhealthy, which repairs the head.

Per pipeline replica ``<unit>-r<replica>-ppg``, a proximity placement group holding its nodes.
Per unit ``<unit>-lb``, a Standard load balancer (public frontend ``<unit>-lb-ip`` when
``FleetArgs.public_lb``, else a private address in the fleet subnet) with an HTTP probe of
``/health`` and a TCP rule on the vLLM port over its heads' scale sets: the unit's endpoint and
the gateway's backend, a stable address while the scale sets replace VMs. It keeps the client's
address, so the fleet's NSG still decides who reaches vLLM.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Callable

import pulumi
from pulumi_azure_native import authorization, compute, network

from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import FleetSecrets, field, node_script, tags
from hetinfra.stacks.fleet import FleetArgs, VMGroup, short_name

ADMIN = "hetinfra"
READER = "acdd72a7-3385-48ef-bd42-f606fba81ae7"  # built-in role "Reader"
HEALTH_EXTENSION = {"name": "health", "publisher": "Microsoft.ManagedServices", "type": "ApplicationHealthLinux",
                    "type_handler_version": "1.0"}
SPOT_RESTORE = "PT1H"  # how long Azure keeps trying to restore evicted spot VMs (its default)
REPAIR_GRACE_MIN, REPAIR_GRACE_MAX = 10, 90  # minutes: Azure's bounds of a repair grace period


@dataclass(frozen=True)
class FleetContext:
    """What every scale set of one Azure fleet shares."""

    args: FleetArgs
    secrets: FleetSecrets
    rg_name: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    subscription: str
    ref: SecretRef
    grant: Callable[[str, object], None]  # Key Vault Secrets User for a resource's identity
    image: dict  # the GPU image reference, its version pinned (hetinfra.compile.images) or 'latest'
    opts: pulumi.ResourceOptions


def repair_grace(seconds: int) -> str:
    """The repair grace period (ISO 8601) for ``seconds``, within Azure's 10-90 minutes."""
    return f"PT{max(REPAIR_GRACE_MIN, min(REPAIR_GRACE_MAX, math.ceil(seconds / 60)))}M"


def _load_balancer(ctx: FleetContext, fu: VMGroup) -> tuple[pulumi.Output, pulumi.Output]:
    """The unit's load balancer: (its backend pool's id, its frontend address)."""
    args = ctx.args
    lb_name = f"{fu.name}-lb"

    def child(kind: str, name: str) -> pulumi.Output:
        return pulumi.Output.concat(f"/subscriptions/{ctx.subscription}/resourceGroups/", ctx.rg_name,
                                    f"/providers/Microsoft.Network/loadBalancers/{lb_name}/{kind}/{name}")

    ip = None
    if args.public_lb:
        ip = network.PublicIPAddress(f"{fu.name}-lb-ip", resource_group_name=ctx.rg_name, location=args.region,
                                     public_ip_allocation_method="Static",
                                     sku=network.PublicIPAddressSkuArgs(name="Standard"), opts=ctx.opts)
        frontend = network.FrontendIPConfigurationArgs(name="fe", public_ip_address=network.PublicIPAddressArgs(id=ip.id))
    else:
        frontend = network.FrontendIPConfigurationArgs(name="fe", private_ip_allocation_method="Dynamic",
                                                       subnet=network.SubnetArgs(id=ctx.subnet_id))
    lb = network.LoadBalancer(
        lb_name, load_balancer_name=lb_name, resource_group_name=ctx.rg_name, location=args.region,
        sku=network.LoadBalancerSkuArgs(name="Standard", tier="Regional"), frontend_ip_configurations=[frontend],
        backend_address_pools=[network.BackendAddressPoolArgs(name="heads")],
        probes=[network.ProbeArgs(name="health", protocol="Http", port=args.port, request_path="/health",
                                  interval_in_seconds=10, probe_threshold=3)],
        load_balancing_rules=[network.LoadBalancingRuleArgs(
            name="vllm", protocol="Tcp", frontend_port=args.port, backend_port=args.port, idle_timeout_in_minutes=30,
            disable_outbound_snat=True, frontend_ip_configuration=network.SubResourceArgs(id=child("frontendIPConfigurations", "fe")),
            backend_address_pool=network.SubResourceArgs(id=child("backendAddressPools", "heads")),
            probe=network.SubResourceArgs(id=child("probes", "health")))],
        opts=pulumi.ResourceOptions.merge(ctx.opts, pulumi.ResourceOptions(delete_before_replace=True)))
    address = ip.ip_address if ip else lb.frontend_ip_configurations.apply(lambda f: field(f[0], "private_ip_address"))
    # The pool's id, known only once the load balancer exists: the scale sets wait for it.
    return pulumi.Output.all(lb.id, child("backendAddressPools", "heads")).apply(lambda v: v[1]), address


def _scale_set(ctx: FleetContext, fu: VMGroup, replica, rank: int, gname: str, size: int, pool, ppg
               ) -> compute.VirtualMachineScaleSet:
    u, args = fu.unit, ctx.args
    custom = base64.b64encode(node_script(fu, replica, rank, args, ctx.ref, ctx.secrets, "").encode()).decode()
    head = rank == 0
    spot = {"priority": "Spot", "eviction_policy": "Delete",
            "billing_profile": compute.BillingProfileArgs(max_price=-1)} if u.spot else {}
    ipc = compute.VirtualMachineScaleSetIPConfigurationArgs(
        name="ipc", primary=True, subnet=compute.ApiEntityReferenceArgs(id=ctx.subnet_id),
        public_ip_address_configuration=compute.VirtualMachineScaleSetPublicIPAddressConfigurationArgs(
            name="pip", sku=compute.PublicIPAddressSkuArgs(name="Standard", tier="Regional")),
        load_balancer_backend_address_pools=[compute.SubResourceArgs(id=pool)] if head else None)
    extensions = compute.VirtualMachineScaleSetExtensionProfileArgs(extensions=[compute.VirtualMachineScaleSetExtensionArgs(
        auto_upgrade_minor_version=True, settings={"protocol": "http", "port": args.port, "requestPath": "/health",
                                                   "intervalInSeconds": 30, "numberOfProbes": 3},
        **HEALTH_EXTENSION)]) if head else None
    return compute.VirtualMachineScaleSet(
        f"{gname}-vmss", vm_scale_set_name=gname, resource_group_name=ctx.rg_name, location=args.region,
        sku=compute.SkuArgs(name=u.node_instance_type(rank), tier="Standard", capacity=size),
        orchestration_mode="Uniform", overprovision=False, upgrade_policy=compute.UpgradePolicyArgs(mode="Manual"),
        automatic_repairs_policy=compute.AutomaticRepairsPolicyArgs(
            enabled=True, grace_period=repair_grace(fu.health_grace_s), repair_action="Replace") if head else None,
        spot_restore_policy=compute.SpotRestorePolicyArgs(enabled=True, restore_timeout=SPOT_RESTORE) if u.spot else None,
        proximity_placement_group=compute.SubResourceArgs(id=ppg.id) if ppg else None,
        identity=compute.VirtualMachineScaleSetIdentityArgs(type="SystemAssigned"),
        virtual_machine_profile=compute.VirtualMachineScaleSetVMProfileArgs(
            os_profile=compute.VirtualMachineScaleSetOSProfileArgs(
                computer_name_prefix=short_name(gname, 40) + "-", admin_username=ADMIN,
                custom_data=custom, linux_configuration=compute.LinuxConfigurationArgs(
                    disable_password_authentication=True,
                    ssh=compute.SshConfigurationArgs(public_keys=[compute.SshPublicKeyArgs(
                        path=f"/home/{ADMIN}/.ssh/authorized_keys", key_data=args.ssh_public_key)]))),
            storage_profile=compute.VirtualMachineScaleSetStorageProfileArgs(
                image_reference=compute.ImageReferenceArgs(**ctx.image),
                os_disk=compute.VirtualMachineScaleSetOSDiskArgs(
                    create_option="FromImage", disk_size_gb=fu.disk_gb,
                    managed_disk=compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                        storage_account_type="Premium_LRS"))),
            network_profile=compute.VirtualMachineScaleSetNetworkProfileArgs(network_interface_configurations=[
                compute.VirtualMachineScaleSetNetworkConfigurationArgs(name="nic", primary=True, ip_configurations=[ipc])]),
            extension_profile=extensions, **spot),
        tags=dict(tags(args, fu, gname), **{"hetinfra-group": gname}),
        opts=pulumi.ResourceOptions.merge(ctx.opts, pulumi.ResourceOptions(delete_before_replace=True)))


def unit_scale_sets(ctx: FleetContext, fu: VMGroup) -> tuple[pulumi.Output, dict[str, dict]]:
    """Create the unit's scale sets and load balancer; returns (the load balancer's address, the
    ``units`` output member of each group: its scale set, by name and ARM id)."""
    pool, address = _load_balancer(ctx, fu)
    groups: dict[str, dict] = {}
    ppgs: dict[int, compute.ProximityPlacementGroup] = {}
    heads: dict[int, compute.VirtualMachineScaleSet] = {}
    for replica, rank, gname, size in fu.groups:
        if replica is not None and replica not in ppgs:
            ppgs[replica] = compute.ProximityPlacementGroup(
                f"{fu.name}-r{replica}-ppg", resource_group_name=ctx.rg_name, location=ctx.args.region,
                proximity_placement_group_type="Standard", opts=ctx.opts)
        vmss = _scale_set(ctx, fu, replica, rank, gname, size, pool, ppgs.get(replica))
        ctx.grant(gname, vmss)
        if rank == 0:
            heads[replica] = vmss
        else:  # the worker lists its head's NICs with its own identity (boot.find_head_script)
            authorization.RoleAssignment(
                f"{gname}-head-reader", scope=heads[replica].id, principal_type="ServicePrincipal",
                principal_id=vmss.identity.apply(lambda i: field(i, "principal_id") if i else None),
                role_definition_id=f"/subscriptions/{ctx.subscription}/providers/Microsoft.Authorization/"
                                   f"roleDefinitions/{READER}", opts=ctx.opts)
        groups[gname] = {"resource": f"{gname}-vmss", "type": "azure-native:compute:VirtualMachineScaleSet",
                         "name": vmss.name, "id": vmss.id}
    return address, groups
