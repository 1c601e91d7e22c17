"""``hetinfra plan`` and ``hetinfra schema``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hetinfra.cli.common import fail, summary_console
from hetinfra.cli.feeds import availability_options, feeds_options
from hetinfra.errors import HetinfraError


@click.command("plan")
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
@click.option("--no-verify", is_flag=True,
              help="Do not simulate the plan to check its latency objectives (planning.verify); faster, unchecked.")
@click.option("--strict-verify", is_flag=True,
              help="Exit 3 (and write nothing) when the plan still misses an objective in simulation after "
                   "planning.verify.max_rounds re-plans, instead of writing it with a warning.")
@feeds_options
@availability_options
def plan_command(spec: Path, out: Path | None, as_json: bool, no_baselines: bool, state: Path | None,
                 no_template_cache: bool, no_verify: bool, strict_verify: bool, feeds: str, strict_feeds: bool,
                 max_age_h: float | None, caps_file: str | None, availability: bool) -> None:
    """Solve SPEC (a service YAML) for the cheapest plan, verify its latency objectives by
    simulation (re-planning what misses), and show or write it."""
    try:
        from hetinfra.compile.artifacts import write_plan
        from hetinfra.plan.feeds import load_caps, load_feeds
        from hetinfra.plan.verify import verified_plan

        snapshot, feed_warnings = load_feeds(feeds, strict_feeds, max_age_h)  # warnings also go to stderr
        caps, cap_warnings = load_caps(caps_file, availability, snapshot)
        _, doc = verified_plan(spec, verify=not no_verify, strict=strict_verify, with_baselines=not no_baselines,
                               snapshot=snapshot, state=state, extra_caps=caps,
                               template_cache=not no_template_cache)
        doc["warnings"] = list(feed_warnings) + cap_warnings + doc["warnings"]
        written = write_plan(out, doc) if out else {}
    except HetinfraError as exc:
        fail(exc, as_json)
        return
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    from hetinfra.plan.summary import render_summary

    console = summary_console()
    render_summary(doc, console)
    if written:
        clouds = ",".join(p.name for p in written["pulumi"])
        click.echo(f"wrote {out}/: plan.json, {len(written['skypilot'])} SkyPilot task(s) in skypilot/, "
                   f"Pulumi project(s) in pulumi/{{{clouds}}}, router/weights.json")


@click.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of the service spec."""
    from hetinfra.spec.models import ServiceSpec

    click.echo(json.dumps(ServiceSpec.model_json_schema(), indent=2))
