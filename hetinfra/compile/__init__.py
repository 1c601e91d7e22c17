"""Compilers from a solved plan to deployable artifacts (SkyPilot YAML, Pulumi projects, router weights)."""
