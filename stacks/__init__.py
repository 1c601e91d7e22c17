"""Pulumi ComponentResources per cloud (installed as ``hetinfra.stacks``).

Only imported by generated Pulumi projects and ``hetinfra apply``; never by ``hetinfra plan``.
"""
