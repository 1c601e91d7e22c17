"""The ``hetinfra`` command line. Errors are caught here, once, and become exit codes:

0 success, 1 internal error, 2 invalid input, 3 infeasible, 4 feed or provider failure.

Heavy imports (Pyomo, Rich tables) happen inside commands so ``hetinfra --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hetinfra import __version__
from hetinfra.commands.feeds import availability_options, feeds_options
from hetinfra.errors import HetinfraError


def _fail(exc: HetinfraError, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"error": {"type": type(exc).__name__, "exit_code": exc.exit_code,
                                         "message": exc.message, "hint": exc.hint, **exc.details}}, indent=2))
    click.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"  hint: {exc.hint}", err=True)
    sys.exit(exc.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hetinfra")
def cli() -> None:
    """Plan the cheapest heterogeneous GPU fleet for LLM serving under latency SLOs,
    across AWS, GCP and Azure, compile it to SkyPilot tasks and Pulumi stacks, and deploy it.

    \b
    Exit codes: 0 ok, 2 invalid input, 3 infeasible, 4 feed/provider failure.
    """


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Write plan.json and skypilot/<unit>.yaml into this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print plan.json to stdout instead of the summary.")
@click.option("--no-baselines", is_flag=True, help="Skip the single-GPU-type baseline solves.")
@click.option("--state", type=click.Path(exists=True, path_type=Path),
              help="The running deployment (a previous --out directory or its plan.json): new instances pay "
                   "planning.churn_penalty_hours, so the plan keeps what runs unless a change is worth it.")
@click.option("--no-template-cache", is_flag=True,
              help="Rebuild the serving-template libraries instead of reusing them from $HETINFRA_CACHE_DIR "
                   "(default ~/.cache/hetinfra; HETINFRA_CACHE_DIR=off disables the cache).")
@feeds_options
@availability_options
def plan(spec: Path, out: Path | None, as_json: bool, no_baselines: bool, state: Path | None,
         no_template_cache: bool, feeds: str, strict_feeds: bool, max_age_h: float | None, caps_file: str | None,
         availability: bool) -> None:
    """Solve SPEC (a service YAML) for the cheapest plan and show or write it."""
    try:
        from hetinfra.artifacts import write_plan
        from hetinfra.plan_json import build_plan_json
        from hetinfra.commands.feeds import load_caps, load_feeds
        from hetinfra.planner import plan as run_plan

        snapshot, feed_warnings = load_feeds(feeds, strict_feeds, max_age_h)  # warnings also go to stderr
        caps, cap_warnings = load_caps(caps_file, availability, snapshot)
        result = run_plan(spec, snapshot=snapshot, with_baselines=not no_baselines, state=state, extra_caps=caps,
                          template_cache=not no_template_cache)
        doc = build_plan_json(result)
        doc["warnings"] = list(feed_warnings) + cap_warnings + doc["warnings"]
        written = write_plan(out, doc) if out else {}
    except HetinfraError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    from rich.console import Console

    from hetinfra.summary import render_summary

    console = Console()
    if not console.is_terminal:
        console = Console(width=132)  # pipes and logs: wide enough that tables do not wrap
    render_summary(doc, console)
    if written:
        clouds = ",".join(p.name for p in written["pulumi"])
        click.echo(f"wrote {out}/: plan.json, {len(written['skypilot'])} SkyPilot task(s) in skypilot/, "
                   f"Pulumi project(s) in pulumi/{{{clouds}}}, router/weights.json")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the service spec."""
    from hetinfra.spec.models import ServiceSpec

    click.echo(json.dumps(ServiceSpec.model_json_schema(), indent=2))


def _register() -> None:
    from hetinfra.commands.estimate import estimate_command

    from hetinfra.commands.profile import import_command, profile_command

    from hetinfra.commands.feeds import feeds_group, prices_command

    from hetinfra.commands.deploy import apply_command, destroy_command, status_command

    from hetinfra.commands.replan import replan_command

    cli.add_command(estimate_command)
    cli.add_command(prices_command)
    cli.add_command(feeds_group)
    cli.add_command(profile_command)
    cli.add_command(import_command)
    cli.add_command(apply_command)
    cli.add_command(status_command)
    cli.add_command(destroy_command)
    cli.add_command(replan_command)


_register()


def main() -> None:
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
