"""GCP self-healing groups of one deployment unit (built by :class:`hetinfra.stacks.gcp.GcpGpuFleet`).

Per group of ``VMGroup.groups`` (all replicas of a single-node unit, or one node of a pipeline
replica): ``<group>-it``, an instance template (the GPU machine type and its accelerators,
``on_host_maintenance: TERMINATE``, SPOT provisioning with termination action DELETE for spot
units, the Deep Learning VM image (pinned by ``hetinfra:images``, else the family's newest:
hetinfra.compile.images), the boot script, the fleet's service account), and
``<group>-mig``, a zonal managed instance group of ``size`` VMs named ``<group>-xxxx`` in the
fleet's zone. The group keeps its target size: a preempted, stopped or deleted VM is recreated.
A head's group (rank 0) also has an **autohealer** on the fleet's ``-hc`` (HTTP ``/health`` at the
vLLM port) with an initial delay of the unit's ``health_grace_s`` (capped at GCE's 3600 s), so a VM
whose vLLM stops answering is recreated. Repairs use the current template
(``force_update_on_repair``); a changed template reaches running VMs only when they are recreated
(update policy OPPORTUNISTIC: no GPU VM is replaced behind the user's back, as on AWS).

Per unit: ``<unit>-bes``, a regional backend service over its heads' groups, checked by the
fleet's ``-lb-hc``, and ``<unit>-fr``, a passthrough forwarding rule on the vLLM port (external
when ``FleetArgs.public_lb``, else internal): the unit's endpoint and the gateway's backend, a
stable address while the groups replace VMs. Passthrough keeps the client's address, so the
fleet's firewall rules still decide who reaches vLLM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from hetinfra.facts import GCP as GCP_FACTS
from hetinfra.stacks.boot import SecretRef
from hetinfra.stacks.common import FleetSecrets, node_script
from hetinfra.stacks.fleet import MAX_VM_NAME, FleetArgs, VMGroup, short_name

# SkyPilot accelerator name -> GCE accelerator type.
ACCELERATORS = GCP_FACTS.gpu_labels  # catalog GPU -> GCE accelerator type (hetinfra.facts)
MAX_INITIAL_DELAY_S = 3600  # GCE's limit on an autohealer's initial delay


def label(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def gce_name(base: str, suffix: str = "") -> str:
    """A GCE resource name (at most 63 characters) ending in ``suffix``."""
    return short_name(base, 63 - len(suffix)) + suffix


@dataclass(frozen=True)
class FleetContext:
    """What every group of one GCP fleet shares."""

    args: FleetArgs
    secrets: FleetSecrets
    zone: str
    network: pulumi.Input[str]
    subnet: pulumi.Input[str]
    target_tags: list[str]
    identity: gcp.compute.InstanceTemplateServiceAccountArgs
    ref: SecretRef
    project: str
    image: pulumi.Input[str]  # the GPU image: pinned, else the family's newest (hetinfra.compile.images)
    autoheal_check: pulumi.Input[str]  # global HTTP health check of the autohealers
    lb_check: pulumi.Input[str]  # regional HTTP health check of the load balancers
    opts: pulumi.ResourceOptions


def _template(ctx: FleetContext, fu: VMGroup, replica, rank: int, gname: str) -> gcp.compute.InstanceTemplate:
    u, args = fu.unit, ctx.args
    gpu = u.node_gpu(rank)
    if gpu not in ACCELERATORS:
        raise ValueError(f"no GCE accelerator type known for {gpu} (unit {u.name})")
    return gcp.compute.InstanceTemplate(
        f"{gname}-it", name_prefix=short_name(gname, 36) + "-", machine_type=u.node_instance_type(rank),
        disks=[gcp.compute.InstanceTemplateDiskArgs(source_image=ctx.image, disk_size_gb=fu.disk_gb,
                                                    disk_type="pd-balanced", boot=True, auto_delete=True)],
        network_interfaces=[gcp.compute.InstanceTemplateNetworkInterfaceArgs(
            subnetwork=ctx.subnet, access_configs=[gcp.compute.InstanceTemplateNetworkInterfaceAccessConfigArgs()])],
        guest_accelerators=[gcp.compute.InstanceTemplateGuestAcceleratorArgs(type=ACCELERATORS[gpu],
                                                                             count=u.node_gpus(rank))],
        scheduling=gcp.compute.InstanceTemplateSchedulingArgs(
            on_host_maintenance="TERMINATE", automatic_restart=not u.spot, preemptible=u.spot,
            provisioning_model="SPOT" if u.spot else "STANDARD",
            instance_termination_action="DELETE" if u.spot else None),
        metadata={"install-nvidia-driver": "True"},
        metadata_startup_script=node_script(fu, replica, rank, args, ctx.ref, ctx.secrets, ctx.project),
        service_account=ctx.identity, tags=ctx.target_tags,
        labels={"hetinfra-service": label(args.service), "hetinfra-unit": label(fu.name),
                "hetinfra-group": label(gname)},
        opts=ctx.opts)


def unit_groups(ctx: FleetContext, fu: VMGroup) -> tuple[pulumi.Output, dict[str, dict]]:
    """Create the unit's groups and load balancer; returns (the load balancer's address, the
    ``units`` output member of each group: its MIG, by name, project and zone)."""
    args = ctx.args
    replace = pulumi.ResourceOptions.merge(ctx.opts, pulumi.ResourceOptions(delete_before_replace=True))
    groups: dict[str, dict] = {}
    heads = []
    for replica, rank, gname, size in fu.groups:
        template = _template(ctx, fu, replica, rank, gname)
        healing = (gcp.compute.InstanceGroupManagerAutoHealingPoliciesArgs(
            health_check=ctx.autoheal_check, initial_delay_sec=min(fu.health_grace_s, MAX_INITIAL_DELAY_S))
            if rank == 0 else None)  # workers serve no /health; their group recreates them when they stop
        mig = gcp.compute.InstanceGroupManager(
            f"{gname}-mig", name=gce_name(gname), zone=ctx.zone, base_instance_name=short_name(gname, MAX_VM_NAME),
            versions=[gcp.compute.InstanceGroupManagerVersionArgs(name="primary",
                                                                  instance_template=template.self_link_unique)],
            target_size=size, auto_healing_policies=healing,
            named_ports=[gcp.compute.InstanceGroupManagerNamedPortArgs(name="vllm", port=args.port)] if rank == 0 else None,
            update_policy=gcp.compute.InstanceGroupManagerUpdatePolicyArgs(
                type="OPPORTUNISTIC", minimal_action="REPLACE", max_surge_fixed=0, max_unavailable_fixed=1),
            instance_lifecycle_policy=gcp.compute.InstanceGroupManagerInstanceLifecyclePolicyArgs(
                default_action_on_failure="REPAIR", force_update_on_repair="YES"),
            wait_for_instances=False, opts=replace)
        groups[gname] = {"resource": f"{gname}-mig", "type": "gcp:compute/instanceGroupManager:InstanceGroupManager",
                         "name": mig.name, "project": ctx.project, "zone": ctx.zone}
        if rank == 0:
            heads.append(mig)
    scheme = "EXTERNAL" if args.public_lb else "INTERNAL"
    backend = gcp.compute.RegionBackendService(
        f"{fu.name}-bes", name=gce_name(fu.name, "-bes"), region=args.region, load_balancing_scheme=scheme,
        protocol="TCP", health_checks=ctx.lb_check, connection_draining_timeout_sec=30,
        backends=[gcp.compute.RegionBackendServiceBackendArgs(group=m.instance_group, balancing_mode="CONNECTION")
                  for m in heads], opts=replace)
    where = ({"port_range": str(args.port)} if args.public_lb else
             {"ports": [str(args.port)], "network": ctx.network, "subnetwork": ctx.subnet})
    rule = gcp.compute.ForwardingRule(
        f"{fu.name}-fr", name=gce_name(fu.name, "-fr"), region=args.region, load_balancing_scheme=scheme,
        backend_service=backend.id, ip_protocol="TCP", opts=replace, **where)
    return rule.ip_address, groups
