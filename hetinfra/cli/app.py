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

from hetinfra import __version__
from hetinfra.cli.deploy import apply_command, destroy_command, status_command
from hetinfra.cli.estimate import estimate_command
from hetinfra.cli.feeds import feeds_group, prices_command
from hetinfra.cli.gateway import gateway_command
from hetinfra.cli.plan import plan_command, schema_command
from hetinfra.cli.profile import import_command, profile_command
from hetinfra.cli.replan import replan_command
from hetinfra.cli.simulate import simulate_command


HELP_OPTIONS = ["-h", "--help"]


@click.group(context_settings={"help_option_names": HELP_OPTIONS})
@click.version_option(__version__, prog_name="hetinfra")
def cli() -> None:
    """Plan the cheapest heterogeneous GPU fleet for LLM serving under latency SLOs,
    across AWS, GCP and Azure, compile it to SkyPilot tasks and Pulumi stacks, and deploy it.

    \b
    Exit codes: 0 ok, 2 invalid input, 3 infeasible, 4 feed/provider failure.
    """


def _own_help_names(command: click.Command) -> None:
    """``command`` and its subcommands declare HELP_OPTIONS themselves, not only through the group:
    click keeps a command's help option from its first use, so one invoked alone (a test's
    CliRunner) would otherwise answer only --help from then on."""
    command.context_settings.setdefault("help_option_names", HELP_OPTIONS)
    for sub in getattr(command, "commands", {}).values():
        _own_help_names(sub)


for _command in (plan_command, schema_command, estimate_command, prices_command, feeds_group, profile_command,
                 import_command, apply_command, status_command, destroy_command, replan_command, simulate_command,
                 gateway_command):
    _own_help_names(_command)
    cli.add_command(_command)


#: CPython's cyclic collector runs a generation-0 pass every 700 net allocations (its default). A
#: verified `hetinfra plan` allocates millions of short-lived objects that reference counting frees
#: (simulated requests and events, ILP rows), so some 580 passes find next to nothing: 0.40 s of
#: ~4.3 s CPU on Mélange V1 at 32 req/s (benchmarks/bench_scale.py --front), 0.06 s at 50,000, where
#: cycles are still collected, about 70x less often; peak memory there stays 114 MB. No result depends on it.
GC_GEN0_THRESHOLD = 50_000


#: exit status of a command stopped by a signal: 128 + its number (the shell's convention; 130 for Ctrl-C)
STOPPED_BY = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


#: the signal that is stopping this process, once one arrived
_stopping: list[int] = []


def _stop(signum: int, _frame) -> None:
    """SIGINT, SIGTERM and SIGHUP become SystemExit(128 + signum) in the main thread. click turns a
    KeyboardInterrupt into "Aborted!" and exit 1, and Python's default SIGTERM ends the process at
    once; an exception instead unwinds every with-block and finally, so a staged out dir or a lock is
    cleaned up (hetinfra.fileio.staged_dir) before the process exits with the shell's status."""
    signal.signal(signum, signal.SIG_DFL)  # a second Ctrl-C ends the process at once
    _stopping.append(signum)
    raise SystemExit(STOPPED_BY[signum])


def install_signal_exits(argv: list[str]) -> None:
    """:func:`_stop` for the stop signals, except under ``gateway``: uvicorn shuts the server down
    gracefully on them itself (and then re-raises the signal)."""
    if argv[1:2] == ["gateway"]:
        return
    for signum in STOPPED_BY:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):  # not one a caller chose
            signal.signal(signum, _stop)


def main() -> None:
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    install_signal_exits(sys.argv)
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:  # raised by code that re-raises one it caught
        _stopping.append(signal.SIGINT)
    except Exception:
        # the SystemExit of a stop signal can surface as another exception where a library wraps what
        # its callbacks raise (pydantic building a schema while a module loads): still the signal's exit
        if not _stopping:
            raise
    finally:
        # the process ends here. The interpreter's last collection would traverse every object the
        # command made (70 ms after a verified plan of Mélange V1, 15% of a bare solve) to free
        # memory the OS takes back anyway; frozen objects are skipped. Files and processes are
        # closed by then (with-blocks), and atexit handlers still run.
        gc.freeze()
        if _stopping:
            signum = _stopping[0]
            click.echo("interrupted" if signum == signal.SIGINT else f"stopped by signal {signum}", err=True)
            sys.exit(STOPPED_BY[signum])


if __name__ == "__main__":
    main()
