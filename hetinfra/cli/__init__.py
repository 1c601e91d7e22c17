"""The command line: ``hetinfra.cli.app`` holds the group and registers every command; each other
module of this package defines the commands of one stage (plan, estimate, profile, feeds, deploy,
replan). Nothing below the CLI imports it.

:func:`main` (the ``hetinfra`` entry point) installs the stop signals' exits (hetinfra.cli.stops)
before it imports the group, so a signal during those imports is already the shell's status;
``cli`` is imported on first use for the same reason."""

from __future__ import annotations

import sys

from hetinfra.cli.stops import finish, install_signal_exits, stopped_status

__all__ = ["cli", "main"]


def main() -> None:
    install_signal_exits(sys.argv)
    try:
        from hetinfra.cli import app
    except BaseException:
        status = stopped_status()  # the stop's SystemExit can surface wrapped by a module being loaded
        if status is None:
            raise
        sys.exit(status)
    try:
        app.main()
    except SystemExit as done:
        finish(done.code)  # the process is the command's: no interpreter teardown (hetinfra.cli.stops.finish)
    finish(0)


def __getattr__(name: str):
    if name == "cli":
        from hetinfra.cli.app import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
