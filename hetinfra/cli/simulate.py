"""``hetinfra simulate``: replay a plan's demand on its fleet, request by request, and check the SLOs.

Not registered here: the CLI owner adds it with ``cli.add_command(simulate_command)``. Errors are
hetinfra's exceptions and become exit codes as everywhere else (InvalidInputError -> 2).
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from hetinfra.errors import markup_escaped, shown
from hetinfra.tables import print_table
from hetinfra.facts import MAX_BURST_CV, MAX_LOAD, MIN_BURST_CV, MIN_LOAD
from hetinfra.cli.common import COMMAND_SETTINGS, MAX_COUNT, FiniteFloat, UserPath, WholeRange, as_written, run_command, summary_console


class RequestCount(click.ParamType):
    """A count of requests: an integer (1e5 written as a float is accepted when whole), at least 1 and
    at most hetinfra.sim.workload.MAX_REQUESTS (the memory a simulation may hold)."""

    name = "integer"

    def convert(self, value, param, ctx):
        from hetinfra.sim.workload import MAX_REQUESTS

        as_written(self, value, param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of requests", param, ctx)
        if math.isfinite(number) and number != int(number):
            self.fail(f"{value!r} is not a whole number of requests", param, ctx)
        if not 1 <= number <= MAX_REQUESTS:  # nan and inf fail here too
            self.fail(f"{value} is outside 1..{MAX_REQUESTS:,}: a simulation holds about 250 bytes per request and "
                      f"model, so at most {MAX_REQUESTS:,} per model (run several seeds with --replications instead)",
                      param, ctx)
        return int(number)


@click.command("simulate", context_settings=COMMAND_SETTINGS)
@click.argument("plan_or_out_dir", type=UserPath(exists=True, path_type=Path))
@click.option("--spec", "spec_path", type=UserPath(dir_okay=False, path_type=Path),
              help="The service YAML the plan was made from (default: plan.json inputs.spec_path). The simulation "
                   "checks plan.json's objectives and demand; a spec whose sha256 is not plan.json "
                   "inputs.spec_sha256 is warned of, and fails --check (exit 13) unless --plan-promise.")
@click.option("--seed", type=WholeRange(-(2**63), 2**63 - 1), default=0, show_default=True, help="Random seed (same seed, same result).")
@click.option("--requests", "n_requests", type=RequestCount(), default=None,
              help="Requests to simulate per model (the first 10% are warm-up) [default: 20000, or more where the "
                   "plan's longest class needs a longer run: hetinfra.sim.replications.requests_for].")
@click.option("--replications", type=WholeRange(1, 1000), default=1, show_default=True,
              help="Simulate seeds SEED .. SEED+K-1 and judge each objective on a 95% prediction bound for one more run.")
@click.option("--check", is_flag=True,
              help="Exit 12 when an objective is missed (or not shown met by the bound: an undecided model counts as "
                   "not met; more --replications decide it) or a unit is unstable; exit 13 when the spec changed "
                   "since planning (see --spec).")
@click.option("--plan-promise", is_flag=True,
              help="With --check, judge the plan's own promise (plan.json's objectives and demand) even where the "
                   "spec changed since planning, instead of exiting 13.")
@click.option("--load", type=FiniteFloat(min=MIN_LOAD, max=MAX_LOAD), default=1.0, show_default=True, help="Multiple of the plan's demand to replay.")
@click.option("--burst-cv", type=FiniteFloat(min=MIN_BURST_CV, max=MAX_BURST_CV), default=1.0, show_default=True,
              help="Coefficient of variation of inter-arrival times (gamma); 1 = Poisson, > 1 = bursty.")
@click.option("--period", type=WholeRange(0, MAX_COUNT), default=None,
              help="Simulate the fleet of this profile period (0-based; a plan whose spec has demand.profile): "
                   "allocations[].counts_by_period at that period's demand, routed as the gateway routes. "
                   "[default: the peak's fleet, as deployed]")
@click.option("--json", "as_json", is_flag=True, help="Print simulation.json to stdout instead of tables.")
@click.option("--out", "out_dir", type=UserPath(file_okay=False, path_type=Path),
              help="Write simulation.json and simulation.svg here (default: the plan's directory).")
@click.option("--profile", "profile_csv", type=UserPath(dir_okay=False, path_type=Path),
              help="Measured profile CSV: print the signed error of each unit's predicted capacity against it.")
def simulate_command(plan_or_out_dir, spec_path, seed, n_requests, replications, check, plan_promise, load, burst_cv,
                     period, as_json, out_dir, profile_csv):
    """Simulate PLAN_OR_OUT_DIR (a `hetinfra plan --out` directory or its plan.json) with vLLM's
    scheduler per replica, and report TTFT/TPOT percentiles and whether each model meets its SLO."""
    def work():
        from hetinfra.sim.check import simulate_file
        from hetinfra.sim.compare import profile_comparison
        from hetinfra.sim.plan_sim import load_plan
        from hetinfra.sim.report import write_outputs
        from hetinfra.sim.workload import WorkloadConfig

        config = WorkloadConfig(requests=n_requests or 20000, load=load, burst_cv=burst_cv, seed=seed)
        plan, plan_file = load_plan(plan_or_out_dir)
        bar = None if as_json else _progress_bar()
        try:
            doc = simulate_file(plan_file, spec_path, config, replications, n_requests is None,
                                None if bar is None else bar[1], period)
        finally:
            if bar is not None:
                bar[0].stop()
        if profile_csv is not None:
            doc["profile_comparison"] = profile_comparison(plan, profile_csv)
        js, svg = write_outputs(doc, out_dir or plan_file.parent)
        return doc, js, svg

    doc = run_command(as_json, work, lambda result: _show(result, profile_csv), to_json=lambda result: result[0])[0]
    _judge(doc, check, as_json, plan_promise)


def _judge(doc: dict, check: bool, as_json: bool, plan_promise: bool = False) -> None:
    """Warn of a spec changed since planning and of objectives too few requests judge; with ``check``,
    exit SPEC_CHANGED (13) for the former unless ``plan_promise`` (a CI gate must not pass against
    objectives the user no longer has), else OBJECTIVES_MISSED (12) when an objective is missed, not
    shown met, or a unit is unstable."""
    from hetinfra.sim.check import OBJECTIVES_MISSED, SPEC_CHANGED, too_few_lines
    from hetinfra.sim.spec_drift import drift_words

    drift = doc.get("spec_changed")
    if drift is not None:
        click.echo(shown(f"warning: {drift_words(drift)}"), err=True)
        if check and not plan_promise:
            click.echo(f"simulate --check: the spec changed since planning (exit {SPEC_CHANGED}); re-plan it, or pass "
                       "--plan-promise to check the plan's own objectives and demand", err=True)
            raise SystemExit(SPEC_CHANGED)
    thin = too_few_lines(doc)
    for line in thin:
        click.echo(shown(f"warning: {line}"), err=True)
    if check and (thin or not doc["met"]):
        if not as_json:
            click.echo(f"simulate --check: {_check_words(doc)}", err=True)
        raise SystemExit(OBJECTIVES_MISSED)


def _check_words(doc: dict) -> str:
    """Why --check fails, as the headline's verdict (hetinfra.sim.report.verdict) says it: missed,
    not shown met (undecided models: more replications decide them), or too few requests."""
    from hetinfra.sim.report import undecided, verdict

    if doc["met"]:
        return "an objective is not shown met (too few requests)"
    if "undecided" in verdict(doc):
        return (f"{verdict(doc)}: {', '.join(undecided(doc))} neither met nor missed (exit 12 as not met); run more "
                "--replications to decide")
    return "an objective is missed or a unit is unstable"


def _show(result, profile_csv) -> None:
    """The tables, the profile comparison, the bounds of a judged run and the files written."""
    from hetinfra.sim.report import render_text

    doc, js, svg = result
    console = summary_console()
    if doc.get("period") is not None:
        click.echo(f"profile period {doc['period']}: its fleet (counts_by_period) at its demand, routed as the gateway "
                   "routes")
    render_text(doc, console)
    if profile_csv is not None:
        from rich.table import Table

        t = Table(title=f"predicted capacity vs profile {markup_escaped(str(profile_csv))}", title_justify="left")
        for col in ("unit", "class", "predicted req/s", "measured req/s", "signed error"):
            t.add_column(col, justify="left" if col in ("unit", "class") else "right",
                         overflow="fold" if col == "unit" else "ellipsis")  # a unit id wraps, never cut
        for r in doc["profile_comparison"]:
            err = r["signed_error"]
            t.add_row(markup_escaped(r["unit"]), markup_escaped(r["class"]), f"{r['predicted_rps']:.3f}",
                      "-" if r["measured_rps"] is None else f"{r['measured_rps']:.3f}",
                      "no row" if err is None else f"{err:+.1%}")
        print_table(console, t)
    if doc.get("replications"):
        from hetinfra.sim.check import bound_lines

        for line in bound_lines(doc):
            click.echo(line)
    click.echo(f"wrote {js} and {svg}")


def _progress_bar():
    """A transient progress bar on stderr and its update(done, total)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from hetinfra.errors import console

    bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed}/{task.total} requests"),
                   TimeRemainingColumn(), console=console(stderr=True), transient=True)
    task = bar.add_task("sim", total=None)
    bar.start()
    return bar, lambda done, total: bar.update(task, completed=done, total=total)
