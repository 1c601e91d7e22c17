"""The command line: ``hetinfra.cli.app`` holds the group and registers every command; each other
module of this package defines the commands of one stage (plan, estimate, profile, feeds, deploy,
replan). Nothing below the CLI imports it.

:func:`main` (the ``hetinfra`` entry point) installs the stop signals' exits (hetinfra.cli.stops)
before it imports the group, so a signal during those imports is already the shell's status;
``cli`` is imported on first use for the same reason. It also keeps numpy's OpenBLAS to one thread
(:data:`BLAS_THREADS`)."""

from __future__ import annotations

import os
import sys

from hetinfra.cli.stops import finish, install_signal_exits, stopped_status

__all__ = ["cli", "main"]

#: The environment the entry point sets where the user has not (their value wins). numpy's OpenBLAS
#: starts a thread for every further core as numpy loads, and each spins about 0.12 s of CPU waiting
#: for work. hetinfra calls no BLAS routine on arrays large enough to split (the simulator's
#: statistics sort, partition and sum; the forecast fits a line to a few points), so on 2 cores that
#: thread only took a core from HiGHS, the preloader and the simulator's units: `hetinfra plan` on
#: Mélange V1 at 32 req/s took 0.672 s and 0.867 s CPU with it, 0.642 s and 0.781 s without
#: (docs/benchmarks.md). Results are the same: one thread is also how small BLAS calls run anyway.
#: Processes a command starts inherit it (pulumi, sky, kubectl: none calls BLAS at scale).
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def main() -> None:
    for name, value in BLAS_THREADS.items():  # before anything imports numpy
        os.environ.setdefault(name, value)
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
