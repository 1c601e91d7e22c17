"""``hetinfra profile`` (measure a profile CSV against a running vLLM server) and
``hetinfra profile-import`` (turn existing ``vllm bench serve --save-result`` files into one).

Only click is imported at module level; the harness, Rich and subprocess load inside the commands.
Errors are :class:`hetinfra.errors.HetinfraError`; they print ``error: ...`` / ``  hint: ...`` on
stderr and exit with the error's code (2 invalid input, 4 server or benchmark failure).
"""

from __future__ import annotations

from pathlib import Path

import click

from hetinfra.cli.common import COMMAND_SETTINGS, MAX_COUNT, MAX_PARALLEL, MAX_RATE_RPS, MAX_TOKENS, MAX_TPOT_MS, MAX_TTFT_MS, MAX_WAIT_S, FiniteFloat, OutDir, UserPath, WholeRange, fail


def _list(kind: click.ParamType, what: str):
    """A comma-separated list flag, each item converted by ``kind`` (a bounded number type, as every
    number flag is: `--inputs 99999999999999999999` reached vllm bench serve)."""
    def parse(ctx: click.Context, param: click.Parameter, value: str | None):
        if value is None:
            return None
        from hetinfra.csvtext import comma_items
        from hetinfra.errors import InvalidInputError

        try:
            items = comma_items(value, param.opts[0])
        except InvalidInputError as exc:  # an empty item (1,,2) was dropped silently
            raise click.BadParameter(exc.message) from None
        if not items:
            raise click.BadParameter(f"expected comma-separated {what}, got {value!r}")
        try:
            return [kind.convert(v, param, ctx) for v in items]
        except click.BadParameter as exc:
            raise click.BadParameter(f"expected comma-separated {what}: {exc.message}") from None

    return parse


def _report(sweeps, notes_extra=()) -> None:
    """Each sweep's line and its notes, printed as written (hetinfra.errors.shown): a result file's
    model_id holding an escape sequence reached the terminal as is."""
    from hetinfra.errors import shown
    from hetinfra.perf.bench_import import format_number

    for s in sweeps:
        click.echo(shown(f"{s.model} in={s.input_tokens} out={s.output_tokens}: max_rps {format_number(s.max_rps)} "
                         f"({s.explain()})"))
    for note in [n for s in sweeps for n in s.notes] + list(notes_extra):
        click.echo(shown(f"note: {note}"), err=True)


def _written(out: Path, rows, gpu: str, tp: int, pp: int, slo, total: int) -> None:
    from hetinfra.errors import shown

    extra = f", {total} in the file" if total != len(rows) else ""
    click.echo(shown(f"wrote {out}: {len(rows)} row(s) for {gpu} tp={tp} pp={pp} under {slo.describe()}{extra}"))


_STAT_HELP = "Latency statistic the SLO applies to: mean, median, or pNN where the runs saved it (p90, p99)."


@click.command("profile", context_settings=COMMAND_SETTINGS)
@click.argument("plan_dir", required=False, type=OutDir())
@click.option("--launch", is_flag=True, help="With PLAN_DIR (a `plan --out` directory): write SkyPilot benchmark "
              "tasks for its extrapolated units to PLAN_DIR/profile/, show their cost, and launch them (sky launch --yes).")
@click.option("--all", "all_units", is_flag=True, help="With --launch: every unit, not only the extrapolated ones.")
@click.option("--dry-run", is_flag=True, help="With --launch: write the tasks and show the cost; launch nothing.")
@click.option("--endpoint", help="Base URL of the running vLLM server, e.g. http://10.0.0.5:8000.")
@click.option("--model", help="Model name the server serves (as in /v1/models); the profile's model.")
@click.option("--gpu", help="GPU the server runs on (SkyPilot name: L4, A10G, H100, ...).")
@click.option("--tp", type=WholeRange(1, MAX_PARALLEL), help="Tensor-parallel size of the engine.")
@click.option("--pp", type=WholeRange(1, MAX_PARALLEL), default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--inputs", callback=_list(WholeRange(1, MAX_TOKENS), "input token counts"), default="128,512,2048", show_default=True,
              help="Input lengths (tokens) of the grid.")
@click.option("--outputs", callback=_list(WholeRange(1, MAX_TOKENS), "output token counts"), default="128,512", show_default=True,
              help="Output lengths (tokens) of the grid.")
@click.option("--rates", callback=_list(FiniteFloat(min=0, min_open=True, max=MAX_RATE_RPS), "request rates"), default="1,2,4,8,16,32", show_default=True,
              help="Request rates (req/s) to sweep per cell, lowest first; a cell stops at its first SLO miss.")
@click.option("--ttft-ms", type=FiniteFloat(max=MAX_TTFT_MS), default=2000.0, show_default=True, help="TTFT SLO (ms).")
@click.option("--tpot-ms", type=FiniteFloat(max=MAX_TPOT_MS), default=100.0, show_default=True, help="TPOT SLO (ms).")
@click.option("--statistic", default="p99", show_default=True, help=_STAT_HELP)
@click.option("--num-prompts", type=WholeRange(1, MAX_COUNT), default=200, show_default=True,
              help="Requests per run (vllm bench serve --num-prompts).")
@click.option("--vllm-cmd", default="vllm", show_default=True, help="Command that runs vllm (e.g. a path).")
@click.option("--vllm-version", help="vLLM version of the server, recorded in the rows' vllm_version column.")
@click.option("--result-dir", type=UserPath(file_okay=False, path_type=Path),
              help="Where the runs' result JSON and logs go [default: <out>.bench/ beside --out].")
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=1, max=MAX_WAIT_S), help="Limit per run in seconds "
              "[default: 600 + 4 x num-prompts / rate].")
@click.option("--merge", is_flag=True, help="Keep rows of an existing --out file that the new rows do not replace.")
@click.option("--out", "out", type=UserPath(dir_okay=False, path_type=Path), help="Profile CSV to write.")
def profile_command(plan_dir, launch, all_units, dry_run, endpoint, model, gpu, tp, pp, inputs, outputs, rates,
                    ttft_ms, tpot_ms, statistic, num_prompts, vllm_cmd, vllm_version, result_dir, timeout_s, merge,
                    out) -> None:
    """Measure max request rates against a running vLLM server with `vllm bench serve` and write a profile CSV.

    Runs the benchmark client here (vllm must be installed) for every --inputs x --outputs cell
    at each of --rates, then derives max_rps per cell as `hetinfra profile-import` does.
    `hetinfra profile PLAN_DIR --launch` instead measures a plan's units on the clouds first.
    """
    from hetinfra.errors import HetinfraError, InvalidInputError

    try:
        if plan_dir is not None or launch:
            return _launch(plan_dir, launch, all_units, dry_run)
        missing = [f"--{n}" for n, v in (("endpoint", endpoint), ("model", model), ("gpu", gpu), ("tp", tp),
                                          ("out", out)) if v is None]
        if missing:
            raise InvalidInputError(f"profile needs {', '.join(missing)}",
                                    hint="or `hetinfra profile PLAN_DIR --launch` to measure a plan's units on the clouds")
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from hetinfra.errors import console as make_console
        from hetinfra.perf.bench_import import SLO
        from hetinfra.perf.harness import run_profile
        from hetinfra.perf.profile_csv import check_out

        slo = SLO(ttft_ms, tpot_ms, statistic)
        check_out(out)  # before any run: --out naming another file is refused, not found after the sweeps
        grid = [(i, o) for i in inputs for o in outputs]
        console = make_console(stderr=True)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as bar:
            task = bar.add_task("checking the server", total=len(grid) * len(set(rates)))
            run = run_profile(endpoint, model, gpu, tp, pp, grid, rates, slo, out, num_prompts, vllm_cmd,
                              _on_run(bar, task), result_dir=result_dir, timeout_s=timeout_s, merge=merge,
                              vllm_version=vllm_version)
            bar.update(task, description="done")
        _report(run.sweeps, _skipped_notes(run.skipped))
        _written(out, run.rows, gpu.strip(), tp, pp, slo, run.csv_rows)
        click.echo(f"raw results: {run.result_dir}")
    except HetinfraError as exc:
        fail(exc, False)


def _on_run(bar, task):
    """``run_profile``'s progress callback: the run under way on ``bar``'s ``task``, each verdict above it."""
    from hetinfra.perf.bench_import import format_number

    def progress(ev) -> None:
        cell = f"in={ev.input_tokens} out={ev.output_tokens}"
        if ev.kind == "start":
            bar.update(task, description=f"{cell} @ {format_number(ev.rate)} req/s")
        elif ev.kind == "done":
            verdict = "meets the SLO" if ev.passed else "misses the SLO"
            bar.console.print(f"{cell} @ {format_number(ev.rate)} req/s: {verdict}", highlight=False)
            bar.update(task, completed=ev.finished)
        else:
            bar.update(task, completed=ev.finished)

    return progress


def _skipped_notes(skipped) -> list[str]:
    """A note per grid cell whose higher rates were not run, having missed the SLO at a lower one."""
    from hetinfra.perf.bench_import import format_number

    cells = {}
    for i, o, r in skipped:
        cells.setdefault((i, o), []).append(format_number(r))
    return [f"in={i} out={o}: skipped {','.join(rs)} req/s after a lower rate missed the SLO"
            for (i, o), rs in cells.items()]


def _launch(plan_dir: Path | None, launch: bool, all_units: bool, dry_run: bool) -> None:
    from hetinfra.errors import InvalidInputError
    from hetinfra.cli.profile_launch import launch as sky_launch
    from hetinfra.cli.profile_launch import require_plan, write_tasks

    if plan_dir is None or not launch:
        raise InvalidInputError("give both a plan directory and --launch (`hetinfra profile OUT --launch`)")
    plan = require_plan(plan_dir)
    tasks, paths = write_tasks(plan, plan_dir, all_units)
    if not tasks:
        click.echo("no unit to measure: every unit's rates are measured or calibrated (--all measures them all)")
        return
    for t, p in zip(tasks, paths):
        price = "on-demand price unknown" if t.cost_usd is None else f"${t.cost_usd:.2f} on demand"
        click.echo(f"{p}: {t.alloc.gpu} x{t.alloc.gpus_per_instance} tp={t.alloc.tp} pp={t.alloc.pp}, "
                   f"{len(t.classes)} class(es), about {t.hours:.2f} h, {price}")
    known = [t.cost_usd for t in tasks if t.cost_usd is not None]
    unknown = len(tasks) - len(known)
    click.echo(f"estimated cost: ${sum(known):.2f} on demand (as launched) for {len(known)} task(s)"
               + (f"; {unknown} task(s) of unknown on-demand price" if unknown else ""))
    if dry_run:
        return
    sky_launch(tasks, paths)
    click.echo(f"launched; when they finish run {plan_dir / 'profile' / 'collect.sh'}, then add "
               f"{plan_dir / 'profile' / 'profiles.csv'} to the spec's profiles: and plan again")


@click.command("profile-import", context_settings=COMMAND_SETTINGS)
@click.argument("results", nargs=-1, required=True, type=UserPath(dir_okay=False, path_type=Path))
@click.option("--gpu", required=True, help="GPU the server ran on (SkyPilot name: L4, A10G, H100, ...).")
@click.option("--tp", type=WholeRange(1, MAX_PARALLEL), required=True, help="Tensor-parallel size of the engine.")
@click.option("--pp", type=WholeRange(1, MAX_PARALLEL), default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--ttft-ms", type=FiniteFloat(max=MAX_TTFT_MS), required=True, help="TTFT SLO (ms).")
@click.option("--tpot-ms", type=FiniteFloat(max=MAX_TPOT_MS), required=True, help="TPOT SLO (ms).")
@click.option("--statistic", default="mean", show_default=True, help=_STAT_HELP)
@click.option("--model", help="Model name for the rows [default: each file's model_id].")
@click.option("--vllm-version", help="vLLM version the runs measured (the rows' vllm_version column).")
@click.option("--input-tokens", type=WholeRange(1, MAX_TOKENS),
              help="Input length of every run [default: from random_input_len metadata, input_lens or token totals].")
@click.option("--output-tokens", type=WholeRange(1, MAX_TOKENS),
              help="Output length of every run [default: as for --input-tokens].")
@click.option("--merge", is_flag=True, help="Keep rows of an existing --out file that the new rows do not replace.")
@click.option("--out", "out", required=True, type=UserPath(dir_okay=False, path_type=Path),
              help="Profile CSV to write.")
def import_command(results, gpu, tp, pp, ttft_ms, tpot_ms, statistic, model, vllm_version, input_tokens, output_tokens,
                   merge, out) -> None:
    """Turn `vllm bench serve --save-result` JSON files (rate sweeps) into a profile CSV.

    Files are grouped by (model, input, output); each group is one sweep over --request-rate and
    gives one row whose max_rps is interpolated where latency crosses the SLO.
    """
    from hetinfra.errors import HetinfraError

    try:
        from hetinfra.perf.bench_import import SLO, import_bench_results, write_profile_csv

        from hetinfra.perf.profile_csv import check_out

        slo = SLO(ttft_ms, tpot_ms, statistic)
        check_out(out)  # before the results are read: one of them given as --out too is refused untouched
        res = import_bench_results(results, gpu=gpu, tp=tp, pp=pp, slo=slo, model=model,
                                   input_tokens=input_tokens, output_tokens=output_tokens, vllm_version=vllm_version)
        written = write_profile_csv(res.rows, out, merge=merge)
        _report(res.sweeps, [f"skipped {s}" for s in res.skipped])
        _written(out, res.rows, gpu.strip(), tp, pp, slo, len(written))
    except HetinfraError as exc:
        fail(exc, False)
