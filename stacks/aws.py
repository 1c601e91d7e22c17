"""AWS GPU fleet of one region: VPC, subnets, security group, GPU instances running vLLM.

Resources (children of the component, names prefixed by the component's name):
``<name>-provider`` (aws.Provider pinned to the region), ``-vpc``, ``-igw``, ``-rt``, one
``-subnet-<az>`` (+ route table association) per availability zone that offers a planned
instance type (``ec2.get_instance_type_offerings``), ``-sg`` and one ``aws.ec2.Instance`` per VM
(``<unit>-r<replica>-n<rank>``) on the newest "Deep Learning Base OSS Nvidia Driver GPU AMI
(Ubuntu 22.04)". The security group lets the VMs talk to each other (Ray, pipeline stages) and
opens the vLLM port and SSH only to the declared CIDRs; IMDSv2 is required.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from hetinfra.stacks.common import (FleetSecrets, build_units, gateway_tags, gateway_url, gateway_user_data, tags,
                                    user_data)
from hetinfra.stacks.fleet import FleetArgs

DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*"
UBUNTU_NAME = "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"
CANONICAL = "099720109477"


def _ingress(args: FleetArgs) -> list[aws.ec2.SecurityGroupIngressArgs]:
    rules = [aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True,
                                              description="fleet-internal: Ray and pipeline stages")]
    if args.ingress_cidrs and not args.gateway:  # with a gateway, clients reach only the gateway
        rules.append(aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=args.port, to_port=args.port,
                                                      cidr_blocks=list(args.ingress_cidrs), description="vLLM API"))
    if args.ssh_cidrs:
        rules.append(aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=22, to_port=22,
                                                      cidr_blocks=list(args.ssh_cidrs), description="SSH"))
    return rules


class AwsGpuFleet(pulumi.ComponentResource):
    """All planned VMs of one AWS region; outputs ``endpoints`` (unit -> URLs) and ``vms``."""

    def __init__(self, name: str, args: FleetArgs, secrets: FleetSecrets,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hetinfra:aws:GpuFleet", name, None, opts)
        provider = aws.Provider(f"{name}-provider", region=args.region, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        invoke = pulumi.InvokeOptions(provider=provider)

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.network_cidr, enable_dns_hostnames=True,
                          enable_dns_support=True, tags={"Name": f"{name}-vpc"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=child)
        table = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc.id, opts=child,
                                   routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)])

        types = sorted({fu.unit.node_instance_type(k) for fu in args.units for k in range(fu.unit.pp)})
        zones_of: dict[str, set[str]] = {}
        for itype in types:
            offered = aws.ec2.get_instance_type_offerings(
                location_type="availability-zone", opts=invoke,
                filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[itype])])
            zones_of[itype] = set(offered.locations or [])
            if not zones_of[itype]:
                raise ValueError(f"AWS offers {itype} in no availability zone of {args.region}; re-plan without it")
        zone_of: dict[str, str] = {}  # unit -> the first zone offering every node type of it
        for fu in args.units:
            common = set.intersection(*(zones_of[fu.unit.node_instance_type(k)] for k in range(fu.unit.pp)))
            if not common:
                raise ValueError(f"no availability zone of {args.region} offers every node type of {fu.name}; "
                                 "re-plan with allow_mixed_pipelines: false")
            zone_of[fu.name] = sorted(common)[0]
        subnets = {}
        for i, zone in enumerate(sorted(set(zone_of.values()))):
            subnets[zone] = aws.ec2.Subnet(f"{name}-subnet-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                           cidr_block=f"10.42.{i}.0/24", map_public_ip_on_launch=True, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-rta-{zone}", subnet_id=subnets[zone].id,
                                          route_table_id=table.id, opts=child)
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=vpc.id, description=f"hetinfra {args.service} vLLM fleet",
            ingress=_ingress(args), opts=child,
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])])
        ami = aws.ec2.get_ami(most_recent=True, owners=["amazon"], opts=invoke, filters=[
            aws.ec2.GetAmiFilterArgs(name="name", values=[DLAMI_NAME]),
            aws.ec2.GetAmiFilterArgs(name="architecture", values=["x86_64"])])

        private_heads: list[tuple[str, pulumi.Output]] = []

        def make_vm(fu, replica, rank, vm_name, head_ip):
            market = None
            if fu.unit.spot:
                market = aws.ec2.InstanceInstanceMarketOptionsArgs(
                    market_type="spot", spot_options=aws.ec2.InstanceInstanceMarketOptionsSpotOptionsArgs(
                        instance_interruption_behavior="terminate", spot_instance_type="one-time"))
            vm = aws.ec2.Instance(
                vm_name, ami=ami.id, instance_type=fu.unit.node_instance_type(rank),
                subnet_id=subnets[zone_of[fu.name]].id, vpc_security_group_ids=[sg.id],
                user_data=user_data(fu, rank, args, secrets, head_ip), user_data_replace_on_change=True,
                root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(volume_size=fu.disk_gb, volume_type="gp3"),
                metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
                instance_market_options=market, tags=tags(args, fu, vm_name), opts=child)
            if rank == 0:
                private_heads.append((fu.name, vm.private_ip))
            return vm, vm.private_ip, vm.public_ip

        self.endpoints, self.vms = build_units(args, make_vm)
        self.gateway_url = None
        if args.gateway:
            self.gateway_url = self._gateway(name, args, secrets, vpc, sg, subnets[sorted(subnets)[0]],
                                             private_heads, child, invoke)
        self.register_outputs({"endpoints": self.endpoints, "vms": self.vms, "gateway": self.gateway_url})

    def _gateway(self, name, args: FleetArgs, secrets: FleetSecrets, vpc, fleet_sg, subnet, heads, child, invoke):
        """A CPU VM running `hetinfra gateway`: clients (ingress_cidrs) reach its port; the fleet's
        vLLM port is open to the gateway's security group only."""
        g = args.gateway
        port = int(g.get("port", 8080))
        clients = list(args.ingress_cidrs)
        gw_sg = aws.ec2.SecurityGroup(
            f"{name}-gateway-sg", vpc_id=vpc.id, description=f"hetinfra {args.service} gateway", opts=child,
            ingress=([aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=port, to_port=port, cidr_blocks=clients,
                                                       description="gateway API (clients)")] if clients else [])
            + ([aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=22, to_port=22,
                                                 cidr_blocks=list(args.ssh_cidrs), description="SSH")]
               if args.ssh_cidrs else []),
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])])
        aws.ec2.SecurityGroupRule(f"{name}-vllm-from-gateway", type="ingress", protocol="tcp", from_port=args.port,
                                  to_port=args.port, security_group_id=fleet_sg.id,
                                  source_security_group_id=gw_sg.id, description="vLLM API from the gateway only",
                                  opts=child)
        ami = aws.ec2.get_ami(most_recent=True, owners=[CANONICAL], opts=invoke, filters=[
            aws.ec2.GetAmiFilterArgs(name="name", values=[UBUNTU_NAME])])
        vm = aws.ec2.Instance(
            f"{name}-gateway", ami=ami.id, instance_type=g.get("aws_instance_type") or "c7i.large",
            subnet_id=subnet.id, vpc_security_group_ids=[gw_sg.id], user_data=gateway_user_data(args, secrets, heads),
            user_data_replace_on_change=True,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
            tags=gateway_tags(args, f"{name}-gateway"), opts=child)
        return gateway_url(args, vm.public_ip)
