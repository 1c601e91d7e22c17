"""Azure GPU fleet of one region: resource group, VNet, subnet, NSG, self-healing VM scale sets.

Resources (children, names prefixed by the component's name): ``<name>-provider``
(azure-native Provider in the location), ``-rg``, ``-vnet``, ``-nsg`` (inbound: the vLLM port
and SSH only from declared CIDRs; Azure's default rules already allow VNet-internal traffic, the
load balancers' probes, and deny the internet), ``-subnet`` bound to the NSG, and per unit the
scale sets and load balancer of :mod:`hetinfra.stacks.azure_group`; ``endpoints`` are the units'
load balancers, ``vms`` the scale sets. Azure VMs need an admin SSH key: ``deploy.ssh_public_key``.
Secrets: ``-kv`` (Key Vault, RBAC) with ``-secrets`` (the fleet's secrets as one JSON document) and
per scale set ``<group>-kv-reader`` (Key Vault Secrets User for its identity): VMs read them at
boot through IMDS, never from custom data. ``deploy.autoscale`` keeps the planned capacity (docs/guides/pulumi.md,
"The stacks": Azure autoscale has no request-rate or GPU signal without an in-VM agent).

With ``deploy.gateway.enabled``: ``-gateway-nsg`` (inbound: clients from ``deploy.ingress_cidrs``
to the gateway port, SSH from ``ssh_cidrs``), ``-gateway-subnet`` (``gateway_subnet_cidr``) bound to
it, and ``-gateway-ip``, ``-gateway-nic``, ``-gateway`` (a CPU VM, ``deploy.gateway.azure_vm_size``,
on Ubuntu 22.04, running ``hetinfra gateway`` against the units' internal load balancers). The
fleet's NSG then admits the vLLM port from the gateway subnet only, never from client CIDRs.
``gateway_url`` is its client URL.
"""

from __future__ import annotations

import base64
import hashlib

import pulumi
import pulumi_azure_native as azure_native
from pulumi_azure_native import authorization, compute, keyvault, network, resources

from hetinfra.compile.images import AZURE as IMAGES
from hetinfra.stacks.azure_group import ADMIN, FleetContext, unit_scale_sets
from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import (FleetSecrets, build_units, field, gateway_tags, gateway_url, gateway_user_data,
                                    pick_image, secret_document)
from hetinfra.stacks.fleet import FleetArgs

SECRET_NAME = "hetinfra-secrets"
KV_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"  # built-in role "Key Vault Secrets User"


def _vault_name(args: FleetArgs) -> str:
    """Key Vault names are global, 3-24 characters: ``hi-<service>-<hash of service/region>``."""
    digest = hashlib.sha1(f"{args.service}/{args.region}".encode()).hexdigest()[:8]
    return f"hi-{args.service[:11].rstrip('-')}-{digest}"


def _rules(args: FleetArgs, target: str) -> list[network.SecurityRuleArgs]:
    """The NSG of the ``target`` VMs (``fleet``, ``gateway``): the rules of
    hetinfra.compile.network.firewall_rules that Azure's default rules do not already cover (those allow
    the VNet, hence the fleet itself, and the load balancers' probes), in order, priorities from 100 in
    steps of 10. The gateway reaches the fleet from its own subnet; within the gateway's NSG its rules
    drop the ``gateway-`` of their names."""
    rules = []
    for rule in (r for r in args.firewall if r.target == target and r.source in ("cidrs", "gateway")):
        sources = [args.gateway_subnet_cidr] if rule.source == "gateway" else list(rule.cidrs)
        rules.append(network.SecurityRuleArgs(
            name=f"allow-{rule.name.removeprefix('gateway-')}", priority=100 + 10 * len(rules), direction="Inbound",
            access="Allow", protocol="Tcp", source_address_prefixes=sources, source_port_range="*",
            destination_address_prefix="*", destination_port_range=str(rule.port)))
    return rules


class AzureGpuFleet(pulumi.ComponentResource):
    """All planned scale sets of one Azure location; outputs ``endpoints`` (unit -> URLs), ``vms``
    (groups), ``units`` (each unit's scale sets: hetinfra.stacks.common.unit_output) and ``images``."""

    def __init__(self, name: str, args: FleetArgs, secrets: FleetSecrets,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hetinfra:azure:GpuFleet", name, None, opts)
        if not args.ssh_public_key:
            raise ValueError("Azure VMs need an admin SSH key: set deploy.ssh_public_key in the service spec "
                             "and plan again")
        provider = azure_native.Provider(f"{name}-provider", location=args.region,
                                         opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        rg = resources.ResourceGroup(f"{name}-rg", location=args.region, opts=child)
        # Secrets: a Key Vault (RBAC) holding the fleet's secrets as one JSON document; each scale
        # set's (and the gateway's) system-assigned identity gets "Key Vault Secrets User" on it.
        client = azure_native.authorization.get_client_config(opts=pulumi.InvokeOptions(provider=provider))
        vault_name = _vault_name(args)
        vault = keyvault.Vault(f"{name}-kv", resource_group_name=rg.name, location=args.region, vault_name=vault_name,
                               properties=keyvault.VaultPropertiesArgs(
                                   tenant_id=client.tenant_id, enable_rbac_authorization=True,
                                   sku=keyvault.SkuArgs(family="A", name="standard")), opts=child)
        keyvault.Secret(f"{name}-secrets", resource_group_name=rg.name, vault_name=vault.name, secret_name=SECRET_NAME,
                        properties=keyvault.SecretPropertiesArgs(value=secret_document(secrets)), opts=child)
        ref = SecretRef("azure", SECRET_NAME, vault_name)
        # the pinned version (hetinfra apply resolves 'latest' through the ARM API first), else 'latest'
        self.images: dict = {}
        image = {role: dict(IMAGES[role], version=pick_image(args, self.images, role, "latest")) for role in IMAGES}

        def grant(owner: str, vm) -> None:
            authorization.RoleAssignment(
                f"{owner}-kv-reader", scope=vault.id, principal_type="ServicePrincipal",
                principal_id=vm.identity.apply(lambda i: field(i, "principal_id") if i else None),
                role_definition_id=f"/subscriptions/{client.subscription_id}/providers/Microsoft.Authorization/"
                                   f"roleDefinitions/{KV_SECRETS_USER}", opts=child)

        vnet = network.VirtualNetwork(f"{name}-vnet", resource_group_name=rg.name, location=args.region,
                                      address_space=network.AddressSpaceArgs(address_prefixes=[args.network_cidr]),
                                      opts=child)
        nsg = network.NetworkSecurityGroup(f"{name}-nsg", resource_group_name=rg.name, location=args.region,
                                           security_rules=_rules(args, "fleet"), opts=child)
        subnet = network.Subnet(f"{name}-subnet", resource_group_name=rg.name, virtual_network_name=vnet.name,
                                address_prefix=args.subnet_cidr,
                                network_security_group=network.NetworkSecurityGroupArgs(id=nsg.id), opts=child)

        ctx = FleetContext(args=args, secrets=secrets, rg_name=rg.name, subnet_id=subnet.id,
                           subscription=client.subscription_id, ref=ref, grant=grant, image=image["gpu"], opts=child)
        self.endpoints, self.vms, backends, self.units = build_units(args, lambda fu: unit_scale_sets(ctx, fu))
        self.gateway_url = None
        if args.gateway:
            self.gateway_url = self._gateway(name, args, ref, grant, rg, vnet, backends, child, image["gateway"])
        self.register_outputs({"endpoints": self.endpoints, "vms": self.vms, "gateway": self.gateway_url})

    def _gateway(self, name, args: FleetArgs, ref, grant, rg, vnet, heads, child, image: dict) -> pulumi.Output:
        """A CPU VM running `hetinfra gateway` in its own subnet and NSG."""
        nsg = network.NetworkSecurityGroup(f"{name}-gateway-nsg", resource_group_name=rg.name, location=args.region,
                                           security_rules=_rules(args, "gateway"), opts=child)
        subnet = network.Subnet(f"{name}-gateway-subnet", resource_group_name=rg.name, virtual_network_name=vnet.name,
                                address_prefix=args.gateway_subnet_cidr,
                                network_security_group=network.NetworkSecurityGroupArgs(id=nsg.id), opts=child)
        ip = network.PublicIPAddress(f"{name}-gateway-ip", resource_group_name=rg.name, location=args.region,
                                     public_ip_allocation_method="Static",
                                     sku=network.PublicIPAddressSkuArgs(name="Standard"), opts=child)
        nic = network.NetworkInterface(
            f"{name}-gateway-nic", resource_group_name=rg.name, location=args.region, opts=child,
            network_security_group=network.NetworkSecurityGroupArgs(id=nsg.id),
            ip_configurations=[network.NetworkInterfaceIPConfigurationArgs(
                name="primary", subnet=network.SubnetArgs(id=subnet.id), private_ip_allocation_method="Dynamic",
                public_ip_address=network.PublicIPAddressArgs(id=ip.id))])
        custom = gateway_user_data(args, ref, heads).apply(lambda s: base64.b64encode(s.encode()).decode())
        vm_name = f"{name}-gateway"
        gw_vm = _linux_vm(vm_name, args, rg, nic, custom, size=args.gateway_vm_type,
                          image=image, disk_gb=30, disk_type="StandardSSD_LRS",
                          vm_tags=gateway_tags(args, vm_name), opts=child)
        grant(vm_name, gw_vm)
        return gateway_url(args, ip.ip_address)


def _linux_vm(vm_name: str, args: FleetArgs, rg, nic, custom_data, *, size: str, image: dict, disk_gb: int,
              disk_type: str, vm_tags: dict, opts, **extra) -> compute.VirtualMachine:
    """A Linux VM with SSH-key login only, one NIC and a system-assigned identity (it reads the
    fleet's Key Vault with it): the gateway's shape."""
    return compute.VirtualMachine(
        vm_name, resource_group_name=rg.name, location=args.region, opts=opts,
        hardware_profile=compute.HardwareProfileArgs(vm_size=size),
        storage_profile=compute.StorageProfileArgs(
            image_reference=compute.ImageReferenceArgs(**image),
            os_disk=compute.OSDiskArgs(create_option="FromImage", disk_size_gb=disk_gb,
                                       managed_disk=compute.ManagedDiskParametersArgs(storage_account_type=disk_type))),
        os_profile=compute.OSProfileArgs(
            computer_name=vm_name[:64], admin_username=ADMIN, custom_data=custom_data,
            linux_configuration=compute.LinuxConfigurationArgs(
                disable_password_authentication=True,
                ssh=compute.SshConfigurationArgs(public_keys=[compute.SshPublicKeyArgs(
                    path=f"/home/{ADMIN}/.ssh/authorized_keys", key_data=args.ssh_public_key)]))),
        network_profile=compute.NetworkProfileArgs(
            network_interfaces=[compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]),
        identity=compute.VirtualMachineIdentityArgs(type="SystemAssigned"),
        tags=vm_tags, **extra)
