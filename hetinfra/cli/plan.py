"""``hetinfra plan`` and ``hetinfra schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hetinfra.cli.common import COMMAND_SETTINGS, UserPath, run_command, summary_console
from hetinfra.cli.feeds import availability_options, feeds_options
from hetinfra.cli.preload import Preloader, SolveStarts

#: what a verified plan imports only after its first solve (hetinfra.cli.preload loads them beside it),
#: in the order it needs them: the simulation view (plan.json's typed sections), the simulator and
#: its replications (numpy.ma: np.percentile loads it on first use), the confirmation, the trim
VERIFICATION = ("hetinfra.plan.plan_json", "hetinfra.plan.replicated", "hetinfra.sim.replications", "numpy.ma",
                "hetinfra.plan.confirm", "hetinfra.plan.blocks", "hetinfra.sim.minimal")
#: what assembling plan.json imports (verified or not), then what the summary does (not under --json)
PLAN_ASSEMBLY = ("hetinfra.plan.plan_json", "hetinfra.plan.fidelity", "hetinfra.plan.failover",
                 "hetinfra.document.engines")
SUMMARY = ("hetinfra.plan.summary",)


@click.command("plan", context_settings=COMMAND_SETTINGS)
@click.argument("spec", type=UserPath(dir_okay=False, path_type=Path))
@click.option("--out", "out", type=UserPath(file_okay=False, path_type=Path),
              help="Write plan.json and skypilot/<unit>.yaml into this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print plan.json to stdout instead of the summary.")
@click.option("--no-baselines", is_flag=True, help="Skip the single-GPU-type baseline solves.")
@click.option("--verify-baselines", is_flag=True,
              help="Plan and verify each single-GPU-type baseline as a spec of its own (one more plan per GPU "
                   "type, each within planning.time_limit_s of its own), instead of solving it at the plan's rates "
                   "unsimulated.")
@click.option("--state", type=UserPath(exists=True, path_type=Path),
              help="The running deployment (a previous --out directory or its plan.json): new instances pay "
                   "planning.churn_penalty_hours of their price, paid back over planning.churn_payback_hours, so "
                   "the plan keeps what runs unless a change is worth it.")
@click.option("--no-template-cache", is_flag=True,
              help="Rebuild the serving-template libraries instead of reusing them from $HETINFRA_CACHE_DIR "
                   "(default ~/.cache/hetinfra; HETINFRA_CACHE_DIR=off disables the cache).")
@click.option("--no-verify", is_flag=True,
              help="Do not simulate the plan to check its latency objectives (planning.verify); faster, unchecked.")
@click.option("--strict-verify", is_flag=True,
              help="Exit 3 (and write nothing) when the plan still misses an objective in simulation after "
                   "planning.verify.max_rounds re-plans, the settling rounds and the padding (up to 4 replicas "
                   "per missing model), instead of writing it with a warning.")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 0 when the plan changes nothing against what runs (--state, else --out: its state.json, "
                   "else its previous plan.json) and 10 when changes are pending (terraform's 2 is invalid input here).")
@feeds_options
@availability_options
def plan_command(spec: Path, out: Path | None, as_json: bool, no_baselines: bool, verify_baselines: bool,
                 state: Path | None,
                 no_template_cache: bool, no_verify: bool, strict_verify: bool, detailed_exitcode: bool, feeds: str,
                 strict_feeds: bool, max_age_h: float | None, caps_file: str | None, availability: bool) -> None:
    """Solve SPEC (a service YAML) for the cheapest plan, verify its latency objectives by
    simulation (re-planning what misses), and show or write it."""
    later = (PLAN_ASSEMBLY if no_verify else VERIFICATION + PLAN_ASSEMBLY) + (() if as_json else SUMMARY)

    def work():
        from hetinfra.solver.mip_hooks import on_mip_start

        # loaded beside the first MIP; the collector is off while the command loads (hetinfra.cli.preload)
        with Preloader(later) as preloader, on_mip_start(preloader.start):
            from hetinfra.compile.artifacts import write_plan
            from hetinfra.plan.feeds import load_caps, load_feeds
            from hetinfra.plan.pending import pending_changes
            from hetinfra.plan.pipeline import plan_document
            from hetinfra.plan.progress import progress_for

            _check_flags(no_verify, strict_verify, detailed_exitcode, state, out)
            _check_baseline_flags(no_baselines, verify_baselines, no_verify)
            snapshot, feed_warnings = load_feeds(feeds, strict_feeds, max_age_h)  # warnings also go to stderr
            caps, cap_warnings = load_caps(caps_file, availability, snapshot, spec)
            progress = progress_for(sys.stderr, as_json)  # a status line on a terminal only
            try:
                _, doc = plan_document(spec, verify=not no_verify, strict=strict_verify,
                                       with_baselines=not no_baselines, verify_baselines=verify_baselines,
                                       snapshot=snapshot, state=state,
                                       extra_caps=caps, template_cache=not no_template_cache,
                                       progress=SolveStarts(progress, preloader))
            finally:
                if progress is not None:
                    progress.close()
        from hetinfra.plan.plan_json import for_out

        echoed = len(feed_warnings) + len(cap_warnings)  # on stderr already (load_feeds, load_caps)
        doc = for_out(doc, spec, out).model_copy(update={"warnings": list(feed_warnings) + cap_warnings + doc.warnings})
        # Compared before write_plan replaces the out dir's plan.json, which may be the reference.
        pending = pending_changes(doc, state or out) if detailed_exitcode else None
        return doc, (write_plan(out, doc) if out else {}), pending, echoed

    _, _, pending, _ = run_command(as_json, work, lambda result: _show(result, out),
                                to_json=lambda result: result[0].to_dict())
    if pending is not None:
        from hetinfra.plan.pending import CHANGES_PENDING, render_pending

        click.echo(render_pending(pending), err=True)
        sys.exit(CHANGES_PENDING if pending["pending"] else 0)


def _check_flags(no_verify: bool, strict_verify: bool, detailed_exitcode: bool, state: Path | None,
                 out: Path | None) -> None:
    """Refuse the flag combinations ``plan`` cannot honour (exit 2)."""
    from hetinfra.errors import InvalidInputError

    if no_verify and strict_verify:
        raise InvalidInputError("--no-verify and --strict-verify contradict each other",
                                hint="--strict-verify fails a plan that misses in simulation; drop one of them")
    if detailed_exitcode and state is None and out is None:
        raise InvalidInputError("--detailed-exitcode compares with a deployment: give --state DIR or --out DIR")


def _check_baseline_flags(no_baselines: bool, verify_baselines: bool, no_verify: bool) -> None:
    """--verify-baselines needs baselines and verification (exit 2 otherwise)."""
    from hetinfra.errors import InvalidInputError

    if verify_baselines and (no_baselines or no_verify):
        other = "--no-baselines" if no_baselines else "--no-verify"
        raise InvalidInputError(f"--verify-baselines and {other} contradict each other",
                                hint="--verify-baselines plans and verifies each baseline; drop one of them")


def _show(result, out: Path | None) -> None:
    """``plan``'s output without --json: the summary, then what was written to ``out``."""
    from hetinfra.plan.summary import render_summary

    doc, written, _, echoed = result
    # the feeds' and caps' warnings went to stderr as they were read (before a long solve, and shown
    # when the plan then fails); plan.json keeps them, the summary does not print them again
    render_summary(doc.model_copy(update={"warnings": doc.warnings[echoed:]}), summary_console())
    if written:
        click.echo(wrote_line(out, written))
        if written.get("kubernetes"):  # deploy.target kubernetes (docs/kubernetes.md)
            clusters = sorted({p.parent.name for p in written["kubernetes"] if p.name == "kustomization.yaml"})
            click.echo(f"wrote {out}/kubernetes/{{{','.join(clusters)}}}/ (kubectl apply -k) and "
                       "pulumi/kubernetes/")


def wrote_line(out: Path, written: dict[str, list[Path]]) -> str:
    """What ``write_plan`` wrote (``written``, by kind), naming only kinds it wrote files of: a plan
    whose units are all on custom clouds has no SkyPilot task and no Pulumi project, and the line said
    "0 SkyPilot task(s) in skypilot/, Pulumi project(s) in pulumi/{}"."""
    parts, tasks, projects = ["plan.json"], written.get("skypilot"), written.get("pulumi")
    if tasks:
        parts.append(f"{len(tasks)} SkyPilot task(s) in skypilot/")
    if projects:
        parts.append(f"Pulumi project(s) in pulumi/{{{','.join(p.name for p in projects)}}}")
    parts.append("router/weights.json")
    return f"wrote {out}/: {', '.join(parts)}"


@click.command("schema", context_settings=COMMAND_SETTINGS)
@click.argument("document", type=click.Choice(["spec", "plan", "state"]), default="spec")
def schema_command(document: str) -> None:
    """Print the JSON Schema of DOCUMENT: the service spec (default; docs/service.schema.json),
    plan.json (docs/plan.schema.json) or state.json (docs/state.schema.json)."""
    from hetinfra.document.schemas import json_schema

    click.echo(json.dumps(json_schema(document), indent=2))
