"""CrossGuard policies over the fleets' resources (pulumi-policy validation functions).

Run with the real CLI: ``pulumi preview --policy-pack <site-packages>/hetinfra/stacks/policy``
(the pack's ``__main__.py`` builds a ``PolicyPack`` from :data:`POLICIES`). The tests call the
same ``validate`` functions on the inputs captured under Pulumi mocks. Props use the engine's
wire names (camelCase), which is what analyzers receive.

Policy config (``config_schema``): ``port`` (the vLLM port, default 8000) and
``allowedCidrs`` (the spec's ``deploy.ingress_cidrs``): a world-open rule on the vLLM port is a
violation unless 0.0.0.0/0 was declared there.
"""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from hetinfra.facts import VLLM_PORT

WORLD = {"0.0.0.0/0", "::/0", "*", "Internet", "Any"}
# Resources that make VMs: bare VMs (the gateways) and the fleets' groups' VM shapes.
GPU_VM_TYPES = {"aws:ec2/instance:Instance", "gcp:compute/instance:Instance", "azure-native:compute:VirtualMachine",
                "gcp:compute/instanceTemplate:InstanceTemplate", "azure-native:compute:VirtualMachineScaleSet"}
GCE_VM_TYPES = {"gcp:compute/instance:Instance", "gcp:compute/instanceTemplate:InstanceTemplate"}
CONFIG = PolicyConfigSchema(properties={
    "port": {"type": "integer", "default": VLLM_PORT},
    "allowedCidrs": {"type": "array", "items": {"type": "string"}, "default": []},
})


def _config(args: ResourceValidationArgs) -> tuple[int, set[str]]:
    cfg = args.get_config() or {}
    return int(cfg.get("port", VLLM_PORT)), set(cfg.get("allowedCidrs", []))


def _covers(lo, hi, port: int) -> bool:
    try:
        return float(lo) <= port <= float(hi)
    except (TypeError, ValueError):
        return False


def _open_rules(args: ResourceValidationArgs, port: int) -> list[set[str]]:
    """Source ranges of every inbound rule of the resource that reaches ``port``."""
    p, typ = args.props, args.resource_type
    out = []
    if typ == "aws:ec2/securityGroup:SecurityGroup":
        for r in p.get("ingress") or []:
            if r.get("protocol") == "-1" and not r.get("cidrBlocks") and not r.get("ipv6CidrBlocks"):
                continue  # self/SG-referenced rule: no CIDR source
            if r.get("protocol") == "-1" or _covers(r.get("fromPort"), r.get("toPort"), port):
                out.append(set(r.get("cidrBlocks") or []) | set(r.get("ipv6CidrBlocks") or []))
    elif typ == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        if p.get("ipProtocol") == "-1" or _covers(p.get("fromPort"), p.get("toPort"), port):
            out.append({p.get("cidrIpv4"), p.get("cidrIpv6")} - {None})
    elif typ == "gcp:compute/firewall:Firewall" and p.get("direction", "INGRESS") == "INGRESS":
        for a in p.get("allows") or []:
            ports = a.get("ports")
            hit = not ports or any(_covers(*(x.split("-") * 2)[:2], port) for x in ports)
            if a.get("protocol") in ("tcp", "all") and hit:
                out.append(set(p.get("sourceRanges") or []))
    elif typ == "azure-native:network:NetworkSecurityGroup":
        for r in p.get("securityRules") or []:
            if r.get("direction") != "Inbound" or r.get("access") != "Allow":
                continue
            rng = r.get("destinationPortRange") or ""
            ranges = [rng] + list(r.get("destinationPortRanges") or [])
            if any(x == "*" or _covers(*(x.split("-") * 2)[:2], port) for x in ranges if x):
                out.append({r.get("sourceAddressPrefix")} - {None} | set(r.get("sourceAddressPrefixes") or []))
    return out


def _no_world_port(args: ResourceValidationArgs, report: ReportViolation) -> None:
    port, allowed = _config(args)
    for sources in _open_rules(args, port):
        world = sources & WORLD
        if world and not world <= allowed:
            report(f"port {port} (vLLM) is open to {', '.join(sorted(world))}; list it in deploy.ingress_cidrs "
                   "if that is intended, or restrict the rule to your router's CIDRs")


def _no_world_ssh(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for sources in _open_rules(args, 22):
        if sources & WORLD:
            report("SSH (22) is open to the world; set deploy.ssh_cidrs to your bastion's CIDR")


def _gpu_vm_checks(args: ResourceValidationArgs, report: ReportViolation) -> None:
    p, typ = args.props, args.resource_type
    if typ not in GPU_VM_TYPES:
        return
    tags = p.get("labels") if typ.startswith("gcp:") else p.get("tags")
    if (tags or {}).get("hetinfra-role") == "gateway":  # the fleet's CPU gateway VM: no unit, no GPU
        if "hetinfra-service" not in tags:
            report("gateway VM lacks the hetinfra-service tag")
    elif not tags or not {"hetinfra-service", "hetinfra-unit"} <= set(tags):
        report("GPU VM lacks the hetinfra-service/hetinfra-unit tags that replan and cost reports rely on")
    if typ in GCE_VM_TYPES and p.get("guestAccelerators"):
        if (p.get("scheduling") or {}).get("onHostMaintenance") != "TERMINATE":
            report("a GCE VM with GPUs must set scheduling.onHostMaintenance = TERMINATE (GPUs cannot live-migrate)")
    if typ == "aws:ec2/instance:Instance" and (p.get("metadataOptions") or {}).get("httpTokens") != "required":
        report("EC2 instances must require IMDSv2 (metadataOptions.httpTokens = required)")


POLICIES = [
    ResourceValidationPolicy(
        name="vllm-port-not-open-to-world", description="The vLLM port is reachable only from declared CIDRs.",
        validate=_no_world_port, enforcement_level=EnforcementLevel.MANDATORY, config_schema=CONFIG),
    ResourceValidationPolicy(
        name="ssh-not-open-to-world", description="SSH is never open to 0.0.0.0/0.",
        validate=_no_world_ssh, enforcement_level=EnforcementLevel.MANDATORY),
    ResourceValidationPolicy(
        name="gpu-vm-hygiene", description="GPU VMs are tagged, GCE GPU VMs terminate on host maintenance, "
                                            "EC2 requires IMDSv2.",
        validate=_gpu_vm_checks, enforcement_level=EnforcementLevel.MANDATORY),
]
