"""The ``hetinfra`` command group: every command is registered here, in one place; command modules
define their commands and never import this group back. Errors are caught once per command by
:func:`hetinfra.cli.common.fail` and become exit codes:

0 success, 1 internal error, 2 invalid input, 3 infeasible, 4 feed or provider failure.

Command modules import only click at module level; heavy imports (Pyomo, Rich tables) happen inside
commands so ``hetinfra --help`` stays fast.
"""

from __future__ import annotations

import gc
import signal
import sys

import click

from hetinfra import __version__, keep_stack_chunks
from hetinfra.cli.common import COMMAND_SETTINGS, encodable_outputs, json_usage_error
from hetinfra.cli.deploy import apply_command, destroy_command, status_command
from hetinfra.cli.estimate import estimate_command
from hetinfra.cli.feeds import feeds_group, prices_command
from hetinfra.cli.gateway import gateway_command
from hetinfra.cli.plan import plan_command, schema_command
from hetinfra.cli.profile import import_command, profile_command
from hetinfra.cli.replan import replan_command
from hetinfra.cli.simulate import simulate_command
from hetinfra.cli.stops import closed_pipe_ends, install_signal_exits, stopped_status, stopping


class Hetinfra(click.Group):
    """The command group. A flag or argument click refuses (a usage error, exit 2) is raised while a
    command's arguments are parsed, before the command runs and reaches :func:`fail`: every such
    error of every command passes here, where a command given ``--json`` also prints the JSON error
    document (:func:`json_usage_error`). Here rather than in :func:`main`, so a caller that runs the
    group itself (click's CliRunner, the tests) gets the same output."""

    def invoke(self, ctx: click.Context):
        args = [*ctx.protected_args, *ctx.args]
        try:
            with closed_pipe_ends():  # `| head`: quiet, exit 141, not click's exit 1 (hetinfra.cli.stops)
                return super().invoke(ctx)
        except click.UsageError as exc:
            json_usage_error(exc, args)
            raise

    def make_context(self, *args, **kwargs) -> click.Context:
        encodable_outputs()  # first, for --help's text too
        with closed_pipe_ends():  # `hetinfra --help | ...` prints while the group's arguments are read
            return super().make_context(*args, **kwargs)


@click.group(cls=Hetinfra, context_settings=COMMAND_SETTINGS)
@click.version_option(__version__, prog_name="hetinfra")
def cli() -> None:
    """Plan the cheapest heterogeneous GPU fleet for LLM serving under latency SLOs,
    across AWS, GCP and Azure, compile it to SkyPilot tasks and Pulumi stacks, and deploy it.

    \b
    Exit codes: 0 ok, 2 invalid input, 3 infeasible, 4 feed/provider failure.
    """


for _command in (plan_command, schema_command, estimate_command, prices_command, feeds_group, profile_command,
                 import_command, apply_command, status_command, destroy_command, replan_command, simulate_command,
                 gateway_command):
    cli.add_command(_command)


#: CPython's cyclic collector runs a generation-0 pass every 700 net allocations (its default). A
#: verified `hetinfra plan` allocates millions of short-lived objects that reference counting frees
#: (simulated requests and events, ILP rows), so some 580 passes find next to nothing: 0.40 s of
#: ~4.3 s CPU on Mélange V1 at 32 req/s (benchmarks/bench_scale.py --front), 0.06 s at 50,000, where
#: cycles are still collected, about 70x less often; peak memory there stays 114 MB. No result depends on it.
GC_GEN0_THRESHOLD = 50_000


def main() -> None:
    from hetinfra.cli import preload

    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    keep_stack_chunks()  # before the solver's and the simulator's hot loops (hetinfra.keep_stack_chunks)
    preload.own_collector = True  # the process is the command's: see hetinfra.cli.preload.Preloader
    install_signal_exits(sys.argv)
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:  # raised by code that re-raises one it caught
        stopping.append(signal.SIGINT)
    except Exception:
        # the SystemExit of a stop signal can surface as another exception where a library wraps what
        # its callbacks raise (pydantic building a schema while a module loads): still the signal's exit
        if not stopping:
            raise
    finally:
        # the process ends here. The interpreter's last collection would traverse every object the
        # command made (70 ms after a verified plan of Mélange V1, 15% of a bare solve) to free
        # memory the OS takes back anyway; frozen objects are skipped. Files and processes are
        # closed by then (with-blocks), and atexit handlers still run.
        gc.freeze()
        preload.own_collector = False  # a caller that ran main() in its own process (the tests) keeps its collector
        status = stopped_status()
        if status is not None:
            sys.exit(status)


if __name__ == "__main__":
    main()
