"""AWS GPU fleet of one region: VPC, subnets, security group, self-healing Auto Scaling groups.

Resources (children of the component, names prefixed by the component's name):
``<name>-provider`` (aws.Provider pinned to the region), ``-vpc`` (the fleet's own CIDR, distinct
per cloud/region: ``hetinfra.compile.network``), ``-igw``, ``-rt``, one ``-subnet-<az>`` per
availability zone that offers a planned instance type, ``-sg``, and:

- **secrets**: ``-secrets`` (Secrets Manager secret) and ``-secrets-v1`` (its value: one JSON
  document of the Pulumi secrets); ``-role``, ``-role-policy`` (read that one secret, find a
  pipeline's head), ``-profile``: the instances' identity. Boot data holds no secret.
- **groups**: per unit of single-node replicas one launch template ``<unit>-lt`` (the GPU AMI
  pinned by ``hetinfra:images``, else the newest: hetinfra.compile.images) and one Auto
  Scaling group ``<unit>-asg`` (desired = the planned count; with ``deploy.autoscale`` max = 2x);
  a multi-node pipeline has one group per node ``<unit>-r<replica>-n<rank>-asg`` (size 1), all of
  a replica in one cluster placement group ``<unit>-r<replica>-pg``; workers find their head by
  its group's tag. Spot units use a mixed-instances policy (price-capacity-optimized, on-demand
  base 0) with capacity rebalancing: AWS launches a replacement when a spot instance is at risk.
- **health**: per unit a network load balancer ``<unit>-nlb`` (internal unless clients or
  ``management_cidrs`` must reach it from outside and there is no gateway), a target group
  ``<unit>-tg`` with an HTTP health check on vLLM's ``/health`` and a listener; the head groups
  use ELB health checks, so a replica whose vLLM stops answering is replaced (grace: the unit's
  ``health_grace_s``, at least 30 min, for the weight download and CUDA graphs; at most 2 h). The
  unit's endpoint is the load balancer.

A prefill/decode bundle across nodes (hetinfra.compile.bundle_nodes) uses the pipeline's shape: per
replica a cluster placement group and a one-VM group per node, each of its role's instance type; its
launch templates carry every EFA interface the type has (``EFA_INTERFACES``), so its nodes sit in
``-subnet-private-<az>`` behind ``-nat-<az>`` (several interfaces get no public IP), and the security
group gains EFA's self egress rule. Its head (rank 0, behind the load balancer) looks the other nodes up.

The security group lets the VMs talk to each other (Ray, pipeline stages), admits the vLLM port
from the VPC (the load balancer's health checks), from ``ingress_cidrs`` (no gateway) and
``management_cidrs``, and SSH only from ``ssh_cidrs``; IMDSv2 is required.
"""
from __future__ import annotations

import base64

import pulumi
import pulumi_aws as aws

import json

from hetinfra.compile.bundle_nodes import EFA_INTERFACES
from hetinfra.compile.images import AWS as AMIS
from hetinfra.compile.network import subnet as nth_subnet
from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import (FleetSecrets, gateway_tags, gateway_url, gateway_user_data, node_script,
                                    pick_image, secret_document, tags, unit_output)
from hetinfra.stacks.fleet import FleetArgs
from hetinfra.compile.network import FirewallRule
from hetinfra.facts import SSH_PORT

MAX_HEALTH_GRACE_S = 7200  # the units' health_grace_s, capped
ASSUME_EC2 = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})


#: the /20 of the fleet's network where the EFA nodes' private subnets start (public ones count from 0)
PRIVATE_SUBNET_BASE = 8


def _efa_unit(fu) -> bool:
    """A prefill/decode bundle across nodes whose KV moves over EFA."""
    return bool(fu.unit.role_nodes) and fu.unit.link == "efa"


def _efa_interfaces(itype: str, sg) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """Every EFA interface the type has: the primary "efa" (EFA with ENA: the node's IP) on card 0,
    device 0, then one "efa-only" per further card on device 1, as AWS recommends for P5. A node with
    several network interfaces gets no public IP: it sits in the private subnet behind the NAT gateway."""
    return [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
        network_card_index=card, device_index=0 if card == 0 else 1, interface_type="efa" if card == 0 else "efa-only",
        security_groups=[sg.id], delete_on_termination="true") for card in range(EFA_INTERFACES.get(itype, 1))]


def _ingress(args: FleetArgs, target: str) -> list[aws.ec2.SecurityGroupIngressArgs]:
    """The inline rules of the ``target`` VMs' security group (hetinfra.compile.network.firewall_rules);
    the gateway's access to the fleet is a separate rule (:meth:`AwsGpuFleet._gateway`). SSH comes last,
    as earlier releases wrote it, so an existing group sees no change."""
    rules = [r for r in args.firewall if r.target == target and r.source != "gateway"]
    return [_rule_args(r, args) for r in sorted(rules, key=lambda r: r.port == SSH_PORT)]


def _rule_args(rule: FirewallRule, args: FleetArgs) -> aws.ec2.SecurityGroupIngressArgs:
    ports = {"protocol": "-1", "from_port": 0, "to_port": 0} if rule.port is None else \
        {"protocol": "tcp", "from_port": rule.port, "to_port": rule.port}
    if rule.source == "fleet":
        return aws.ec2.SecurityGroupIngressArgs(**ports, self=True, description=rule.description)
    if rule.source == "probers" and not rule.cidrs:  # the network load balancers check from inside the VPC
        return aws.ec2.SecurityGroupIngressArgs(**ports, cidr_blocks=[args.network_cidr],
                                                description=f"{rule.description} (VPC)")
    return aws.ec2.SecurityGroupIngressArgs(**ports, cidr_blocks=list(rule.cidrs), description=rule.description)


def _newest_ami(role: str, invoke: pulumi.InvokeOptions) -> str:
    """The lookup of hetinfra.compile.images: the newest x86_64 AMI of the role's owner and name."""
    src = AMIS[role]
    return aws.ec2.get_ami(most_recent=True, owners=[src["owner"]], opts=invoke, filters=[
        aws.ec2.GetAmiFilterArgs(name="name", values=[src["name"]]),
        aws.ec2.GetAmiFilterArgs(name="architecture", values=["x86_64"])]).id


def _zones(args: FleetArgs, invoke) -> dict[str, str]:
    """Unit -> the first availability zone of the region that offers every node type of it."""
    types = sorted({fu.unit.node_instance_type(k) for fu in args.units for k in range(fu.unit.num_nodes)})
    zones_of: dict[str, set[str]] = {}
    for itype in types:
        offered = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone", opts=invoke,
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[itype])])
        zones_of[itype] = set(offered.locations or [])
        if not zones_of[itype]:
            raise ValueError(f"AWS offers {itype} in no availability zone of {args.region}; re-plan without it")
    zone_of: dict[str, str] = {}
    for fu in args.units:
        common = set.intersection(*(zones_of[fu.unit.node_instance_type(k)] for k in range(fu.unit.num_nodes)))
        if not common:
            raise ValueError(f"no availability zone of {args.region} offers every node type of {fu.name}; "
                             "re-plan with allow_mixed_pipelines: false")
        zone_of[fu.name] = sorted(common)[0]
    return zone_of


def _group(fu, rank, gname, size, args: FleetArgs, lt, tg, subnet_ids, placement, child):
    """One auto scaling group: spot with capacity rebalancing, or on-demand; rank 0's instances
    behind the unit's target group and replaced on its health (ELB), the others on EC2's."""
    u = fu.unit
    lt_spec = aws.autoscaling.GroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str))
    mixed = None
    if u.spot:  # spot with capacity rebalancing; the launch template is the only override
        mixed = aws.autoscaling.GroupMixedInstancesPolicyArgs(
            instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
                on_demand_base_capacity=0, on_demand_percentage_above_base_capacity=0,
                spot_allocation_strategy="price-capacity-optimized"),
            launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
                launch_template_specification=aws.autoscaling
                .GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                    launch_template_id=lt.id, version=lt.latest_version.apply(str)),
                overrides=[aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(
                    instance_type=u.node_instance_type(rank))]))
    # a single-node unit's group holds all its replicas: DeployedUnit knows the autoscaling bound
    return aws.autoscaling.Group(
        f"{gname}-asg", name_prefix=f"{gname}-", desired_capacity=size, min_size=size,
        max_size=u.max_replicas if u.num_nodes == 1 else size, vpc_zone_identifiers=subnet_ids,
        launch_template=None if mixed else lt_spec, mixed_instances_policy=mixed,
        capacity_rebalance=u.spot, placement_group=placement,
        health_check_type="ELB" if rank == 0 else "EC2",
        health_check_grace_period=min(fu.health_grace_s, MAX_HEALTH_GRACE_S),
        target_group_arns=[tg.arn] if rank == 0 else [], wait_for_capacity_timeout="0",
        tags=[aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True)
              for k, v in dict(tags(args, fu, gname), **{"hetinfra-group": gname}).items()],
        opts=child)


class AwsGpuFleet(pulumi.ComponentResource):
    """All planned groups of one AWS region; outputs ``endpoints`` (unit -> URLs), ``vms`` (groups),
    ``units`` (each unit's groups and target group: hetinfra.stacks.common.unit_output) and ``images``."""

    def __init__(self, name: str, args: FleetArgs, secrets: FleetSecrets,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hetinfra:aws:GpuFleet", name, None, opts)
        provider = aws.Provider(f"{name}-provider", region=args.region, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        invoke = pulumi.InvokeOptions(provider=provider)
        vpc, sg, subnets, private, zone_of = self._network(name, args, child, invoke)
        self.images: dict = {}
        ami_id = pick_image(args, self.images, "gpu", _newest_ami("gpu", invoke))
        secret, profile = self._secret_and_profile(name, args, secrets, child)
        private_heads: list[tuple[str, pulumi.Output]] = []
        self.endpoints, self.vms, self.units = {}, {}, {}
        for fu in args.units:
            zone = zone_of[fu.name]
            subnet_ids = [(private[zone] if _efa_unit(fu) else subnets[zone]).id]
            tg, dns_name = self._load_balancer(fu, args, vpc, [subnets[zone].id], child)
            self.endpoints[fu.name] = [pulumi.Output.concat("http://", dns_name, f":{args.port}/v1")]
            private_heads.append((fu.name, dns_name))
            pgs, members = {}, {}
            for replica, rank, gname, size in fu.groups:
                lt = self._launch_template(fu, replica, rank, gname, args, secrets, secret, ami_id, sg, profile, child)
                placement = None
                if replica is not None:
                    if replica not in pgs:
                        pgs[replica] = aws.ec2.PlacementGroup(f"{fu.name}-r{replica}-pg", strategy="cluster",
                                                              opts=child)
                    placement = pgs[replica].id
                asg = _group(fu, rank, gname, size, args, lt, tg, subnet_ids, placement, child)
                self.vms[gname] = asg.name
                members[gname] = {"resource": f"{gname}-asg", "type": "aws:autoscaling/group:Group", "name": asg.name}
            # the target group's health is vLLM's /health as the load balancer sees it: the readiness signal
            self.units[fu.name] = unit_output(fu, members, target_group=tg.arn)
        self.gateway_url = None
        if args.gateway:
            self.gateway_url = self._gateway(name, args, secret.arn, profile, vpc, sg,
                                             subnets[sorted(subnets)[0]],
                                             private_heads, child, invoke)
        self.register_outputs({"endpoints": self.endpoints, "vms": self.vms, "gateway": self.gateway_url})

    @staticmethod
    def _network(name: str, args: FleetArgs, child, invoke):
        """(VPC, the fleet's security group, a public subnet per zone used, a private subnet per zone of
        an EFA bundle across nodes, unit -> its zone): each unit in the first zone that offers every
        node type of it."""
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.network_cidr, enable_dns_hostnames=True,
                          enable_dns_support=True, tags={"Name": f"{name}-vpc"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=child)
        table = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc.id, opts=child,
                                   routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)])
        zone_of = _zones(args, invoke)
        subnets = {}
        for i, zone in enumerate(sorted(set(zone_of.values()))):
            subnets[zone] = aws.ec2.Subnet(f"{name}-subnet-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                           cidr_block=nth_subnet(args.network_cidr, i), map_public_ip_on_launch=True,
                                           opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-rta-{zone}", subnet_id=subnets[zone].id,
                                          route_table_id=table.id, opts=child)
        efa_zones = sorted({zone_of[fu.name] for fu in args.units if _efa_unit(fu)})
        private = {zone: AwsGpuFleet._private_subnet(name, args, vpc, subnets[zone], zone, i, child)
                   for i, zone in enumerate(efa_zones)}
        # EFA needs every inbound and outbound protocol to and from the group itself (AWS EFA guide)
        self_egress = [aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True,
                                                       description="EFA: all traffic within the fleet")] if efa_zones else []
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=vpc.id, description=f"hetinfra {args.service} vLLM fleet",
            ingress=_ingress(args, "fleet"), opts=child,
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]),
                    *self_egress])
        return vpc, sg, subnets, private, zone_of

    @staticmethod
    def _private_subnet(name: str, args: FleetArgs, vpc, public, zone: str, i: int, child):
        """The private subnet of ``zone`` for nodes with several EFA interfaces (no public IP there):
        its way out (the weights, the image) is a NAT gateway in the zone's public subnet."""
        eip = aws.ec2.Eip(f"{name}-nat-eip-{zone}", domain="vpc", opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat-{zone}", allocation_id=eip.id, subnet_id=public.id, opts=child)
        table = aws.ec2.RouteTable(f"{name}-rt-private-{zone}", vpc_id=vpc.id, opts=child,
                                   routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)])
        subnet = aws.ec2.Subnet(f"{name}-subnet-private-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                cidr_block=nth_subnet(args.network_cidr, PRIVATE_SUBNET_BASE + i), opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-rta-private-{zone}", subnet_id=subnet.id, route_table_id=table.id,
                                      opts=child)
        return subnet

    @staticmethod
    def _secret_and_profile(name: str, args: FleetArgs, secrets: FleetSecrets, child):
        """One Secrets Manager document, read at boot through the instance profile (which may also
        list instances: a pipeline worker finds its head)."""
        secret = aws.secretsmanager.Secret(f"{name}-secrets", name_prefix=f"hetinfra-{args.service}-{args.region}-",
                                           description=f"hetinfra {args.service}: vLLM API key and tokens",
                                           recovery_window_in_days=0, opts=child)
        aws.secretsmanager.SecretVersion(f"{name}-secrets-v1", secret_id=secret.id,
                                         secret_string=secret_document(secrets), opts=child)
        role = aws.iam.Role(f"{name}-role", assume_role_policy=ASSUME_EC2, opts=child)
        aws.iam.RolePolicy(f"{name}-role-policy", role=role.id, opts=child, policy=secret.arn.apply(lambda arn: json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": arn},
                {"Effect": "Allow", "Action": ["ec2:DescribeInstances"], "Resource": "*"}]})))
        return secret, aws.iam.InstanceProfile(f"{name}-profile", role=role.name, opts=child)

    @staticmethod
    def _load_balancer(fu, args: FleetArgs, vpc, subnet_ids, child):
        """The unit's network load balancer and target group (health: vLLM's /health): (target group, DNS name)."""
        lb = aws.lb.LoadBalancer(f"{fu.name}-nlb", name_prefix="hi-", load_balancer_type="network",
                                 internal=not args.public_lb, subnets=subnet_ids, opts=child,
                                 tags=tags(args, fu, f"{fu.name}-nlb"))
        tg = aws.lb.TargetGroup(f"{fu.name}-tg", name_prefix="hi-", port=args.port, protocol="TCP",
                                vpc_id=vpc.id, target_type="instance", deregistration_delay=30, opts=child,
                                health_check=aws.lb.TargetGroupHealthCheckArgs(
                                    protocol="HTTP", path="/health", port=str(args.port), interval=30,
                                    healthy_threshold=2, unhealthy_threshold=3, matcher="200"))
        aws.lb.Listener(f"{fu.name}-listener", load_balancer_arn=lb.arn, port=args.port, protocol="TCP",
                        default_actions=[aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=tg.arn)],
                        opts=child)
        return tg, lb.dns_name

    @staticmethod
    def _launch_template(fu, replica, rank, gname, args: FleetArgs, secrets, secret, ami_id, sg, profile, child):
        """The launch template of one group: the node's boot script (the secret's ARN filled in), IMDSv2,
        the boot disk."""
        text = node_script(fu, replica, rank, args, SecretRef("aws", "@@SECRET@@", args.region), secrets, args.region)
        user_data = secret.arn.apply(lambda arn, t=text: base64.b64encode(t.replace("@@SECRET@@", arn).encode()).decode())
        itype = fu.unit.node_instance_type(rank)
        # a bundle across nodes over EFA: every EFA interface of the type (the security group goes on them)
        nics = _efa_interfaces(itype, sg) if _efa_unit(fu) else None
        return aws.ec2.LaunchTemplate(
            f"{gname}-lt", name_prefix=f"{gname[:100]}-", image_id=ami_id,
            instance_type=itype, user_data=user_data, network_interfaces=nics,
            vpc_security_group_ids=None if nics else [sg.id], update_default_version=True,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required",
                                                                       http_endpoint="enabled"),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=fu.disk_gb, volume_type="gp3", delete_on_termination="true"))],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type="instance", tags=dict(tags(args, fu, gname), **{"hetinfra-group": gname}))],
            opts=child)

    def _gateway(self, name, args: FleetArgs, secret_arn, profile, vpc, fleet_sg, subnet, heads, child, invoke):
        """A CPU VM running `hetinfra gateway`: clients (ingress_cidrs) reach its port; the fleet's
        vLLM port is open to the gateway's security group only."""
        gw_sg = aws.ec2.SecurityGroup(
            f"{name}-gateway-sg", vpc_id=vpc.id, description=f"hetinfra {args.service} gateway", opts=child,
            ingress=_ingress(args, "gateway"),
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])])
        for rule in (r for r in args.firewall if r.source == "gateway"):
            aws.ec2.SecurityGroupRule(f"{name}-{rule.name}", type="ingress", protocol="tcp", from_port=rule.port,
                                      to_port=rule.port, security_group_id=fleet_sg.id,
                                      source_security_group_id=gw_sg.id, description=rule.description, opts=child)
        vm = aws.ec2.Instance(
            f"{name}-gateway", ami=pick_image(args, self.images, "gateway", _newest_ami("gateway", invoke)),
            instance_type=args.gateway_vm_type,
            subnet_id=subnet.id, vpc_security_group_ids=[gw_sg.id], iam_instance_profile=profile.name,
            user_data=secret_arn.apply(lambda arn: gateway_user_data(args, SecretRef("aws", arn, args.region), heads)),
            user_data_replace_on_change=True,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
            tags=gateway_tags(args, f"{name}-gateway"), opts=child)
        return gateway_url(args, vm.public_ip)
