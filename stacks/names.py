"""Names the clouds accept, for every resource the stacks leave Pulumi to name: one stack transformation.

Pulumi names a resource given no name ``<logical name>-<7 characters>``. The stacks' logical names carry
``<service>-<cloud>-<region>``, so a long service name (the spec allows 63 characters) gave a 71-character
GCE subnet name, an IAM role or an Azure virtual network name past its cloud's limit, which `pulumi up`
refuses. :func:`fit_names` gives such a resource a name of its own only where Pulumi's would not fit
(``stacks.fleet.fitted``: the logical name cut to the limit with a hash): a deployed stack whose names
fit keeps them, so nothing is replaced. The rule lived at each call site before (25 of them); a
transformation applies it to every resource of a limited type, including ones added later.

:func:`install` registers it on the stack's root resource, once per program (``program.build`` and
``global_entry.global_entry`` call it: the fleets' resources and the global entry's, which has no
component parent, inherit it from the root).
"""

from __future__ import annotations

import pulumi

from hetinfra.stacks.fleet import fitted

__all__ = ["NAME_LIMITS", "fit_names", "install"]

#: GCE resource names: at most 63 characters (RFC 1035 labels)
GCE = 63

#: resource type -> (its name argument as the Python SDK spells it, the cloud's limit on that name)
NAME_LIMITS: dict[str, tuple[str, int]] = {
    **{t: ("name", GCE) for t in (
        "gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork", "gcp:compute/firewall:Firewall",
        "gcp:compute/healthCheck:HealthCheck", "gcp:compute/regionHealthCheck:RegionHealthCheck",
        "gcp:compute/instance:Instance", "gcp:compute/instanceGroup:InstanceGroup",
        "gcp:compute/backendService:BackendService", "gcp:compute/uRLMap:URLMap",
        "gcp:compute/targetHttpProxy:TargetHttpProxy", "gcp:compute/globalAddress:GlobalAddress",
        "gcp:compute/globalForwardingRule:GlobalForwardingRule")},
    "aws:iam/role:Role": ("name", 64),
    "azure-native:resources:ResourceGroup": ("resource_group_name", 90),
    "azure-native:network:VirtualNetwork": ("virtual_network_name", 64),
    "azure-native:network:NetworkSecurityGroup": ("network_security_group_name", 80),
    "azure-native:network:Subnet": ("subnet_name", 80),
    "azure-native:network:PublicIPAddress": ("public_ip_address_name", 80),
    "azure-native:network:NetworkInterface": ("network_interface_name", 80),
    "azure-native:trafficmanager:Profile": ("profile_name", 63),
}


def fit_names(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """The resource ``args`` with a name its cloud accepts where it has none and Pulumi's would not fit
    (NAME_LIMITS); None (unchanged) otherwise."""
    limit = NAME_LIMITS.get(args.type_)
    if limit is None or args.props.get(limit[0]) is not None:
        return None
    given = fitted(args.name, limit[1], limit[0])
    if not given:
        return None
    return pulumi.ResourceTransformationResult(props={**args.props, **given}, opts=args.opts)


def install() -> None:
    """Register :func:`fit_names` on the stack's root resource unless it is there already."""
    root = pulumi.runtime.get_root_resource()
    if root is None or fit_names not in (root._transformations or []):  # noqa: SLF001 (Pulumi keeps them there)
        pulumi.runtime.register_stack_transformation(fit_names)
