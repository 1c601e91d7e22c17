"""What every command shares: how a HetinfraError becomes the exit code and the message (the one
place errors are turned into output; see hetinfra.errors for the classes and their codes)."""

from __future__ import annotations

import json
import sys

import click

from hetinfra.errors import HetinfraError


def fail(exc: HetinfraError, as_json: bool) -> None:
    """Print ``exc`` (``error:``/``hint:`` on stderr; with ``as_json`` also ``{"error": ...}`` on
    stdout) and exit with its code."""
    if as_json:
        click.echo(json.dumps({"error": {"type": type(exc).__name__, "exit_code": exc.exit_code,
                                         "message": exc.message, "hint": exc.hint, **exc.details}}, indent=2))
    click.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"  hint: {exc.hint}", err=True)
    sys.exit(exc.exit_code)


def summary_console():
    """A Rich console for a command's tables: the terminal's, or one 132 columns wide for pipes and
    logs, so that tables do not wrap."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=132)
