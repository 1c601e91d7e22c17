"""The command line: ``hetinfra.cli.app`` holds the group and registers every command; each other
module of this package defines the commands of one stage (plan, estimate, profile, feeds, deploy,
replan). Nothing below the CLI imports it."""

from hetinfra.cli.app import cli, main

__all__ = ["cli", "main"]
