"""``hetinfra apply``, ``hetinfra status`` and ``hetinfra destroy`` (see hetinfra.deploy).

Only click is imported here at module level; Pulumi and SkyPilot load inside the commands that
use them, so ``hetinfra --help`` and ``hetinfra plan`` never pay for them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hetinfra.cli.common import COMMAND_SETTINGS, OutDir, echo_for, fail, run_command
from hetinfra.fileio import dumps_strict

TARGET_HELP = ("pulumi: every unit through the per-cloud Pulumi stacks; skypilot: every unit as a SkyServe "
               "service; all: units on deploy.skypilot_clouds through SkyPilot, the rest through Pulumi (with "
               "deploy.target kubernetes: the clusters); kubernetes: the Pulumi project OUT/pulumi/kubernetes/ "
               "(pulumi-kubernetes) into the clusters of deploy.kubernetes.clusters (docs/kubernetes.md).")


def _ask(as_json: bool = False):
    # Under --json the question goes to stderr with the rest: stdout holds only the document.
    return (lambda prompt: click.confirm(prompt, default=False, err=as_json)) if sys.stdin.isatty() else None


@click.command("apply", context_settings=COMMAND_SETTINGS)
@click.argument("out", type=OutDir())
@click.option("--target", type=click.Choice(["pulumi", "skypilot", "all", "kubernetes"]), default="all", show_default=True,
              help=TARGET_HELP)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@click.option("--force", is_flag=True, help="Apply even though OUT runs another service (state.json's service "
                                            "or service id differs from plan.json's): that service's units are replaced.")
@click.option("--update-images", is_flag=True, help="Take the newest VM images instead of those pinned by earlier "
                                                    "applies (state.json images): replaces the VMs that use them.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document on stdout (changes, per-stack results, endpoints, or the error); "
                   "progress goes to stderr.")
def apply_command(out: Path, target: str, yes: bool, force: bool, update_images: bool, as_json: bool) -> None:
    """Provision the plan in OUT (a `hetinfra plan --out` directory); shows the change first.

    Needs VLLM_API_KEY (and HF_TOKEN for gated models) in the environment; with Pulumi also the
    pulumi CLI, PULUMI_CONFIG_PASSPHRASE and the clouds' credentials. Before anything is asked or
    changed, a preflight checks plan.json against its schema, that OUT belongs to the plan's
    service, each cloud's settings, disk sizes and readable quotas (exit 2 or 4), then Pulumi's
    preview of every stack (create/update/replace/delete; GPU VM replacements flagged) and SkyServe's
    changes are shown. Records OUT/state.json.
    """
    report: dict = {}

    def work():
        from hetinfra.deploy.apply import apply_plan, load_plan

        apply_plan(out, load_plan(out), target=target, yes=yes, echo=echo_for(as_json), ask=_ask(as_json),
                   force=force, update_images=update_images, report=report)
        return report

    run_command(as_json, work, partial=report)


@click.command("destroy", context_settings=COMMAND_SETTINGS)
@click.argument("out", type=OutDir())
@click.option("--target", type=click.Choice(["pulumi", "skypilot", "all", "kubernetes"]), default="all", show_default=True,
              help="Which deployed units to remove.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document on stdout (changes, per-stack results, or the error); progress goes to stderr.")
def destroy_command(out: Path, target: str, yes: bool, as_json: bool) -> None:
    """Tear down what OUT/state.json lists (pulumi destroy per stack, sky serve down per unit)."""
    report: dict = {}

    def work():
        from hetinfra.deploy.destroy import destroy

        destroy(out, target=target, yes=yes, echo=echo_for(as_json), ask=_ask(as_json), report=report)
        return report

    run_command(as_json, work, partial=report)


@click.command("status", context_settings=COMMAND_SETTINGS)
@click.argument("out", type=OutDir())
@click.option("--json", "as_json", is_flag=True, help="Print state.json, with the live read under \"live\".")
@click.option("--no-refresh", is_flag=True, help="Do not ask the clouds: show what state.json records (and the "
                                                 "last live read, if any).")
def status_command(out: Path, as_json: bool, no_refresh: bool) -> None:
    """Show what runs from OUT: per unit the planned and live replicas (Pulumi refresh per stack and
    the clouds' group APIs, `sky serve status`), unhealthy and preempted instances and the hourly cost
    of what runs; endpoints, the last operation and its steps; and for each gateway its units' health
    and live weights (its /admin/weights, sent the first key of HETINFRA_API_KEY)."""
    from hetinfra.errors import HetinfraError

    try:
        from hetinfra.deploy.destroy import render_status
        from hetinfra.deploy.drift import read_live, record
        from hetinfra.deploy.state import DeployState

        state = DeployState.load(out)
        if not no_refresh and state.running:
            state = record(out, read_live(out, state))
        if as_json:
            click.echo(dumps_strict(state.doc, indent=2))
        else:
            click.echo(render_status(out))
    except HetinfraError as exc:
        fail(exc, as_json)
