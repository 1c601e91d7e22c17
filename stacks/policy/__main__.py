"""Policy pack entry point for the Pulumi CLI: `pulumi preview --policy-pack <this folder>`."""
from pulumi_policy import EnforcementLevel, PolicyPack

from hetinfra.stacks.policies import POLICIES

PolicyPack(name="hetinfra", enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)
