"""CLI subcommands that live outside hetinfra/cli.py (each module imports only click at top level)."""
