"""``hetinfra replan``: the cron entry point (see hetinfra.replan.run for the exit codes).

Cron-friendly output: details (diff, triggers, apply steps) go to a log file, appended with a
timestamp per run; stdout gets one summary line (plus the details when stdout is a terminal or
with --verbose); no colour is ever written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hetinfra.cli.common import COMMAND_SETTINGS, MAX_BUDGET_USD_H, MAX_COUNT, MAX_PCT, MAX_WAIT_S, FiniteFloat, UserPath, WholeRange, echo_for, fail
from hetinfra.cli.feeds import availability_options, feeds_options
from hetinfra.fileio import dumps_strict, present

#: the longest `replan --demand-from URL` waits for the whole log (each read: 60 s): a gateway that sends a
#: byte a second never timed a read out, and the run went on for days; ten minutes move 1 GiB at 1.7 MB/s
DEMAND_FETCH_S = 600
#: ...and the slowest it takes the log coming, on average after its first half minute (bytes a second, seconds):
#: a gateway sending a byte a second held the run for all of DEMAND_FETCH_S; at 64 KiB/s a 1 GiB log still has
#: the ten minutes, and a trickle ends after 30 s
DEMAND_SLOWEST = (64 * 1024, 30.0)


@click.command("replan", context_settings=COMMAND_SETTINGS)
@click.argument("spec", type=UserPath(dir_okay=False, path_type=Path))
@click.option("--state", "out", required=True, type=UserPath(file_okay=False, path_type=Path),
              help="The deployment's OUT directory (state.json, or the plan.json of what runs).")
@feeds_options
@availability_options
@click.option("--min-savings-pct", type=FiniteFloat(min=0, max=100), default=5.0, show_default=True,
              help="Only move when it saves at least this percent of the running fleet's cost...")
@click.option("--min-savings-usd-h", type=FiniteFloat(min=0, max=MAX_BUDGET_USD_H), default=1.0, show_default=True,
              help="...and at least this many USD per hour (forced moves ignore both).")
@click.option("--max-changes", type=WholeRange(1, MAX_COUNT), default=None,
              help="Most instances added or removed per run (additions first); later runs continue.")
@click.option("--demand-log", type=UserPath(dir_okay=False, exists=True, path_type=Path),
              help="CSV timestamp,model,input_tokens,output_tokens,region: plan for the forecast peak.")
@click.option("--demand-from", metavar="URL|FILE",
              help="The gateway's demand log: its URL (http://GATEWAY/admin/demand.csv, sent HETINFRA_API_KEY's first "
                   "key) or the file it writes (OUT/gateway/demand.csv; its rotations .1 .. .N are read too). "
                   "Used like --demand-log.")
@click.option("--min-history-h", type=FiniteFloat(min=0, max=24 * 365), default=None,
              help="Hours of demand log a model needs before its observed demand replaces the declared one "
                   "[default: the demand.profile's period (one hour per value), else 24].")
@click.option("--max-cut-pct", type=FiniteFloat(min=0, max=100), default=50.0, show_default=True,
              help="Most of the running fleet's GPUs one run removes; the next run continues the cut.")
@click.option("--force", is_flag=True, help="Apply the whole cut in one run (ignore --max-cut-pct).")
@click.option("--max-forecast-error-pct", type=FiniteFloat(min=0, max=MAX_PCT), default=50.0, show_default=True,
              help="A forecast whose backtest error (MAPE) exceeds this does not drive cuts: the run makes its "
                   "additions and no removal, even with --force, and says so.")
@click.option("--apply", "do_apply", is_flag=True, help="Make the change (make-before-break) instead of proposing it.")
@click.option("--target", type=click.Choice(["pulumi", "skypilot", "all", "kubernetes"]), default="all", show_default=True,
              help="Deploy path used with --apply (as for hetinfra apply).")
@click.option("--health-timeout-s", type=FiniteFloat(min=0, max=MAX_WAIT_S), default=1800.0, show_default=True,
              help="How long new endpoints may take to answer /health before old capacity is removed.")
@click.option("--no-refresh", is_flag=True,
              help="Take what runs from state.json only, without reading live replicas from the clouds.")
@click.option("--log-file", type=UserPath(dir_okay=False, path_type=Path),
              help="Where details go (appended). Default: STATE/replan.log.")
@click.option("--verbose", "-v", is_flag=True, help="Also print the details to stdout (stderr with --json).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document on stdout (outcome, exit code, the decision and its changes, stages "
                   "applied, or the error); the exit codes stay the same.")
def replan_command(spec: Path, out: Path, feeds: str, strict_feeds: bool, max_age_h: float | None,
                   caps_file: str | None, availability: bool, min_savings_pct: float, min_savings_usd_h: float, max_changes: int | None,
                   demand_log: Path | None, demand_from: str | None, min_history_h: float | None,
                   max_cut_pct: float, force: bool, max_forecast_error_pct: float, do_apply: bool, target: str, health_timeout_s: float,
                   no_refresh: bool, log_file: Path | None, verbose: bool, as_json: bool) -> None:
    """Re-plan SPEC against what runs in --state and act only when it is worth it.

    \b
    Exit codes: 0 no change worth making, 10 change proposed, 11 change applied,
    75 another replan is running, 2 invalid input, 3 infeasible, 4 feed/provider failure.
    """
    from hetinfra.deploy.state import now
    from hetinfra.errors import HetinfraError
    from hetinfra.replan.run import ReplanOptions, replan

    log_path = log_file or out / "replan.log"
    meta = {"command": "replan", "spec": str(spec), "state": str(out), "log": str(log_path)}  # of a --json error
    _require_state_dir(out, as_json, meta)  # before the log or the lock would create it
    echo = echo_for(as_json)
    run_log = RunLog(log_path, f"=== {now()} hetinfra replan {spec} --state {out}", echo, verbose or sys.stdout.isatty())
    try:
        run_log.check()
    except HetinfraError as exc:
        fail(exc, as_json, meta)
    demand_log = _demand_source(demand_log, demand_from, out, as_json, meta)
    opts = ReplanOptions(feeds=feeds, strict_feeds=strict_feeds, max_age_h=max_age_h, min_savings_pct=min_savings_pct,
                         min_savings_usd_h=min_savings_usd_h, max_changes=max_changes, apply=do_apply, target=target,
                         demand_log=demand_log, health_timeout_s=health_timeout_s, caps_file=caps_file,
                         availability=availability, refresh=not no_refresh, min_history_h=min_history_h,
                         max_cut=max_cut_pct / 100.0, force=force,
                         max_forecast_error=max_forecast_error_pct / 100.0)
    try:
        outcome = replan(spec, out, opts, detail=run_log.detail)
    except HetinfraError as exc:
        run_log.flush(f"error (exit {exc.exit_code}): {exc.message}" + (f" | hint: {exc.hint}" if exc.hint else ""))
        fail(exc, as_json, meta)
        return
    run_log.flush(outcome.summary)
    echo(f"replan: {outcome.summary} (details: {log_path})")
    if as_json:
        click.echo(dumps_strict(replan_json(spec, out, outcome, log_path), indent=2))
    sys.exit(outcome.code)


class RunLog:
    """One run's details: echoed as they come when ``show``, and appended to the log file at the end
    with the summary (a log that cannot be written is a warning, never the run's failure)."""

    def __init__(self, path: Path, header: str, echo, show: bool) -> None:
        self.path, self.echo, self.show = path, echo, show
        self.lines = [header]

    @staticmethod
    def is_ours(line: str) -> bool:
        """Whether ``line`` (a file's first) begins a run of a replan log (the header each run writes)."""
        return line.startswith("=== ")

    def check(self) -> None:
        """InvalidInputError (before the run) where the log's path holds another file: OUT/plan.json given
        as --log-file had the run's log appended to the plan, and every later command refused it."""
        from hetinfra.foreign import refuse_foreign

        refuse_foreign(self.path, "--log-file", self.is_ours, doing="appended to",
                       hint="give a log file of its own (default STATE/replan.log)")

    def detail(self, text: str) -> None:
        self.lines.append(text)
        if self.show:
            self.echo(text)

    def flush(self, summary: str) -> None:
        from hetinfra.errors import InvalidInputError, shown
        from hetinfra.fileio import open_append

        self.lines.append(summary)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_append(self.path, "the replan log", ours=self.is_ours) as fh:  # a FIFO there: refused, not waited on
                torn = fh.torn_note("the replan log", self.path)
                fh.write("\n".join(self.lines) + "\n")
            if torn:
                click.echo(shown(f"warning: {torn}"), err=True)
        except (OSError, InvalidInputError) as exc:
            why = exc.message if isinstance(exc, InvalidInputError) else f"cannot write the log {self.path}: {exc}"
            click.echo(shown(f"warning: {why}"), err=True)


def _demand_source(demand_log: Path | None, demand_from: str | None, out: Path, as_json: bool, meta: dict) -> Path | None:
    """The demand log the run reads: --demand-log, or --demand-from's fetched copy (not both: exit 2)."""
    from hetinfra.errors import HetinfraError, InvalidInputError

    if not demand_from:
        return demand_log
    if demand_log:
        fail(InvalidInputError("give --demand-log or --demand-from, not both"), as_json, meta)
    try:
        return fetch_demand(demand_from, out)
    except HetinfraError as exc:
        fail(exc, as_json, meta)


def _require_state_dir(out: Path, as_json: bool, meta: dict) -> None:
    """Exit 2 when --state is not a folder: replan never creates one (nor its log or lock)."""
    from hetinfra.errors import InvalidInputError

    if not out.is_dir():
        fail(InvalidInputError(f"--state {out}: {'not a directory' if out.exists() else 'no such directory'}",
                               hint="pass the --out directory of `hetinfra plan` (or of `apply`) of the running "
                                    "deployment"), as_json, meta)


def replan_json(spec: Path, out: Path, outcome, log_path: Path) -> dict:
    """``replan --json``: the outcome and its exit code, the decision, what was proposed or applied."""
    from hetinfra.replan.diff import decision_json
    from hetinfra.replan.run import APPLIED, NO_CHANGE, PROPOSED, PROPOSED_PLAN
    from hetinfra.replan.safe import JOURNAL, Journal

    proposed = out / PROPOSED_PLAN
    journal = Journal(out).doc if outcome.code == APPLIED and present(out / JOURNAL) else None
    return {"command": "replan", "spec": str(spec), "state": str(out),
            "outcome": {NO_CHANGE: "no_change", PROPOSED: "proposed", APPLIED: "applied"}[outcome.code],
            "exit_code": outcome.code, "summary": outcome.summary,
            "decision": decision_json(outcome.decision) if outcome.decision else None,
            "proposed_plan": str(proposed) if outcome.code == PROPOSED and proposed.exists() else None,
            "this_run": outcome.stages,
            "this_run_instances": {"added": outcome.this_run_moves[0], "removed": outcome.this_run_moves[1]}
            if outcome.this_run_moves else None,
            "forecast_holds": outcome.forecast_holds or [],
            "stages": [{"name": st.name, "status": st.status, "counts": st.counts} for st in journal.stages]
            if journal else None,
            "log": str(log_path)}


def _join_rotations(path: Path, keep: int = 100) -> str:
    """The gateway's demand log and its rotations as one CSV text: hetinfra.gateway.demand.read_all, the
    one joiner (each file read by the one safe reader, the size bound over all of them)."""
    import os

    from hetinfra.errors import InvalidInputError
    from hetinfra.gateway.demand import read_all

    if not os.path.lexists(path):
        raise InvalidInputError(f"--demand-from: {path} not found")
    return read_all(path, keep)


def fetch_demand(source: str, out: Path) -> Path:
    """The gateway's demand log as one CSV file under OUT (fetched from a URL, or a file joined with its rotations)."""
    import os
    import urllib.error
    import urllib.request

    from hetinfra.errors import FeedError, InvalidInputError
    from hetinfra.fileio import atomic_write_text
    from hetinfra.clientkeys import first_client_key

    target = out / "gateway" / "demand-observed.csv"
    if source.startswith(("http://", "https://")):
        from hetinfra.httpget import checked_url

        req = urllib.request.Request(checked_url(source, "--demand-from", hint="the gateway's "
                                                 "http(s)://HOST:PORT/admin/demand.csv (its key: HETINFRA_API_KEY)"))
        key = first_client_key(os.environ.get("HETINFRA_API_KEY"))
        if key:
            req.add_header("Authorization", "Bearer " + key)
        from hetinfra.httpget import get
        from hetinfra.replan.demand_log import MAX_LOG_BYTES

        try:  # a body cut short or not HTTP at all is an error, never a shorter log (hetinfra.httpget)
            body = get(req, timeout=60, max_bytes=MAX_LOG_BYTES, total=DEMAND_FETCH_S, slowest=DEMAND_SLOWEST)[1]
        except (urllib.error.URLError, OSError) as exc:
            raise FeedError(f"cannot fetch the demand log from {source}: {getattr(exc, 'reason', None) or exc}",
                            hint="is the gateway running, and HETINFRA_API_KEY set to one of its client keys? "
                                 "(a log over the size allowed: rotate it, the gateway keeps .1 .. .N)") from None
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FeedError(f"the demand log at {source} is not UTF-8 text (byte {exc.start})",
                            hint="is the URL the gateway's /admin/demand.csv?") from None
    else:
        text = _join_rotations(Path(source))
    atomic_write_text(target, text)
    return target
