"""``hetinfra prices`` and ``hetinfra feeds refresh|list``, plus the ``--feeds`` options of ``plan``.

Only click (and the error printer) is imported at module level; feeds, Rich and the error classes load inside commands.
Errors become exit codes through :func:`hetinfra.cli.common.fail` (``error:``/``hint:`` on stderr):
2 invalid input (bad --feeds value or PATH), 4 feed failure (strict, or a failed refresh).
"""

from __future__ import annotations

import json

import click

from hetinfra.cli.common import COMMAND_SETTINGS, MAX_COUNT, MAX_HOURS, MAX_WAIT_S, FiniteFloat, UserPath, WholeRange, fail
from hetinfra.errors import markup_escaped
from hetinfra.tables import print_table
from hetinfra.fileio import dumps_strict

FEEDS_HELP = ("Where prices come from: snapshot (embedded, default), live[:aws,azure,gcp,skypilot] "
              "(fetch; falls back to the last good cached snapshot with a warning), cache[:SOURCES] "
              "(last `hetinfra feeds refresh`), or a PATH (offers CSV or snapshot dir).")
SOURCES_HELP = ("Source to refresh: aws, azure, gcp, skypilot (repeat or comma-separate). "
                "Default: HETINFRA_FEEDS_SOURCES or aws,azure,gcp.")


def _split(values, flag: str) -> list[str]:
    """The items of a repeatable comma-list flag (``--gpu L4,H100 --gpu A10G``): hetinfra.csvtext.comma_items
    of each value, so an empty item (``aws,,gcp``) is exit 2 naming the flag."""
    from hetinfra.csvtext import comma_items

    return [v for raw in values or () for v in comma_items(raw, flag)]


def feeds_options(f):
    """Add ``--feeds``, ``--strict-feeds`` and ``--max-age-h`` to a command (e.g. ``plan``)."""
    f = click.option("--max-age-h", "max_age_h", type=FiniteFloat(min=0, max=MAX_HOURS), default=None, metavar="HOURS",
                     help="Prices older than this are stale: a warning (an error with --strict-feeds). "
                          "With --feeds live, a cached snapshot younger than this is reused without fetching.")(f)
    f = click.option("--strict-feeds", "strict_feeds", is_flag=True,
                     help="Fail (exit 4) instead of falling back when a live feed fails or data is stale.")(f)
    f = click.option("--feeds", "feeds", default="snapshot", show_default=True, metavar="SOURCE", help=FEEDS_HELP)(f)
    return f


def availability_options(f):
    """Add ``--caps FILE`` and ``--availability`` to a command (``plan``, ``replan``)."""
    f = click.option("--availability", is_flag=True,
                     help="Also cap GPUs by the clouds' own limits: AWS Service Quotas and instance type offerings, "
                          "GCP regional quotas and accelerator types per zone, Azure usages and SKU restrictions "
                          "(needs credentials; without them, a warning).")(f)
    f = click.option("--caps", "caps_file", type=UserPath(dir_okay=False, exists=True), default=None,
                     help="CSV cloud,region,gpu,max_gpus[,purchase]: GPU caps on top of the spec's availability.")(f)
    return f


def _match(values: list[str], known: set[str], what: str) -> set[str]:
    """Case-insensitive match of user values to known names; an unknown one is exit 2."""
    from hetinfra.errors import InvalidInputError, closest

    lower = {k.lower(): k for k in known}
    out = set()
    for v in values:
        if v.lower() not in lower:
            close = closest(v, sorted(known))
            raise InvalidInputError(f"--{what} {v}: no offer has {what} '{v}'" +
                                    (f"; did you mean '{close}'?" if close else ""),
                                    hint=f"known: {', '.join(sorted(known)[:20])}")
        out.add(lower[v.lower()])
    return out


def _offer_row(o) -> dict:
    spot = o.spot_price_per_hour
    return {
        "cloud": o.cloud, "region": o.region, "instance_type": o.instance_type, "gpu": o.gpu,
        "gpu_count": o.gpu_count, "gpu_memory_gb": o.gpu_memory_gb, "vcpus": o.vcpus, "memory_gb": o.memory_gb,
        "price_per_hour": o.price_per_hour, "price_per_gpu_hour": round(o.price_per_hour / o.gpu_count, 6),
        "spot_price_per_hour": spot,
        "spot_price_per_gpu_hour": None if spot is None else round(spot / o.gpu_count, 6),
        "committed_1y_price_per_hour": o.committed_1y_price_per_hour,
        "committed_3y_price_per_hour": o.committed_3y_price_per_hour,
        "source": o.source, "as_of": o.as_of,
    }


def _console():
    from hetinfra.errors import console

    return console(pipe_width=160)


@click.command("prices", context_settings=COMMAND_SETTINGS)
@click.option("--gpu", "gpus", multiple=True, metavar="GPU", help="Only these GPUs (repeat or comma-separate), e.g. L4,H100.")
@click.option("--cloud", "clouds", multiple=True, metavar="CLOUD", help="Only these clouds: aws, gcp, azure, or custom ones.")
@click.option("--region", "regions", multiple=True, metavar="REGION", help="Only these regions.")
@click.option("--spot", is_flag=True, help="Only offers with a spot price, cheapest spot $/GPU-hour first.")
@feeds_options
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=0, min_open=True, max=MAX_WAIT_S), default=20.0, show_default=True,
              help="Seconds per HTTP request of a live feed.")
@click.option("--limit", type=WholeRange(1, MAX_COUNT), default=None, help="Show at most this many offers.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (offers, sources, warnings) instead of a table.")
def prices_command(gpus, clouds, regions, spot, feeds, strict_feeds, max_age_h, timeout_s, limit, as_json):
    """List GPU offers with $/GPU-hour, source and as-of date, cheapest first."""
    from hetinfra.errors import HetinfraError
    from hetinfra.plan.feeds import load_feeds
    from hetinfra.price_feeds.committed import with_committed_prices

    try:
        snap, warnings = load_feeds(feeds, strict_feeds, max_age_h, timeout_s=timeout_s, quiet=as_json)
        snap = with_committed_prices(snap)
        offers = _filtered(snap.offers, gpu=gpus, cloud=clouds, region=regions)
    except HetinfraError as exc:
        fail(exc, as_json)
        return
    offers = _cheapest_first(offers, spot)
    shown = offers[:limit] if limit else offers
    if as_json:
        click.echo(dumps_strict({
            "as_of": snap.as_of, "newest_as_of": snap.newest_as_of,
            "sources": [s.record() for s in snap.sources],
            "warnings": warnings, "count": len(offers), "offers": [_offer_row(o) for o in shown]}, indent=2))
        return
    _print_prices(offers, shown, spot, _as_of_title(offers, snap), limit)


def _as_of_title(offers: list, snap) -> str:
    """The table's as-of: the span of the rows it lists, then each source's own span where it is
    wider (as the fallback warnings and plan.json's ``inputs.sources`` state it), so a header over
    AWS rows of 2025-11-01 does not read as the snapshot's oldest (Azure) date."""
    from hetinfra.price_feeds.offers import as_of_span

    rows = as_of_span(o.as_of for o in offers)
    if all(s.span == rows for s in snap.sources):
        return rows
    return f"{rows} (sources: {', '.join(f'{s.name} {s.span}' for s in snap.sources)})"


def _filtered(all_offers, **wanted) -> list:
    """The offers whose gpu, cloud and region are among the ``wanted`` values (none given: any);
    each value must name one that some offer has."""
    from hetinfra.errors import InvalidInputError

    offers = list(all_offers)
    for what, values in wanted.items():
        if values and not _split(values, f"--{what}"):  # `--gpu ''` filtered to nothing and printed "no offer matches"
            raise InvalidInputError(f"--{what} names no {what}", hint=f"give one or more, e.g. --{what} "
                                    f"{sorted({getattr(o, what) for o in all_offers})[0]}, or leave it out")
        if values:
            want = _match(_split(values, f"--{what}"), {getattr(o, what) for o in all_offers}, what)
            offers = [o for o in offers if getattr(o, what) in want]
    return offers


def _cheapest_first(offers: list, spot: bool) -> list:
    """By $/GPU-hour (with ``spot``: only the offers with a spot price, by it), ties by place."""
    if spot:
        offers = [o for o in offers if o.spot_price_per_hour is not None]
        offers.sort(key=lambda o: (o.spot_price_per_hour / o.gpu_count, o.cloud, o.region, o.instance_type))
    else:
        offers.sort(key=lambda o: (o.price_per_hour / o.gpu_count, o.cloud, o.region, o.instance_type))
    return offers


_PRICE_HEADERS = ("cloud", "region", "instance type", "GPU", "$/GPU-h", "$/h", "spot $/GPU-h", "spot $/h", "source",
                  "as of")


def _price_cells(o) -> list[str]:
    """One offer's row of the prices table, one cell a header of :data:`_PRICE_HEADERS`."""
    sp = o.spot_price_per_hour
    return [o.cloud, o.region, o.instance_type, f"{o.gpu} x{o.gpu_count}",
            f"{o.price_per_hour / o.gpu_count:.4f}", f"{o.price_per_hour:.4f}",
            "" if sp is None else f"{sp / o.gpu_count:.4f}", "" if sp is None else f"{sp:.4f}",
            o.source, o.as_of[:10]]


def _print_prices(offers: list, shown: list, spot: bool, as_of: str, limit: int | None) -> None:
    """``prices``' table of the ``shown`` offers, fitted to the console's width."""
    from rich.table import Table

    console = _console()
    if not shown:
        console.print("no offer matches")
        return
    table = Table(title=f"{len(offers)} offer(s){' with spot' if spot else ''}, as of {as_of}")
    headers = list(_PRICE_HEADERS)
    rows = [_price_cells(o) for o in shown]
    keep, widths = _fitted_columns(headers, rows, console.width)
    for i in keep:
        if i == 8:
            table.add_column(headers[i], overflow="fold", min_width=10)
        else:
            table.add_column(headers[i], justify="right" if 4 <= i <= 7 else "left", no_wrap=True, min_width=widths[i])
    for r in rows:  # a source cell or file name may read as Rich markup ('[/]' was a MarkupError)
        table.add_row(*(markup_escaped(r[i]) for i in keep))
    print_table(console, table)
    if 5 not in keep:
        console.print("(whole-instance $/h hidden on this width: widen the terminal or use --json)")
    if limit and len(offers) > limit:
        console.print(f"({len(offers) - limit} more; raise --limit)")


def _fitted_columns(headers: list[str], rows: list[list[str]], width: int) -> tuple[list[int], list[int]]:
    """The columns of the prices table that fit ``width`` and each one's widest cell. Where even
    those do not fit, source and as-of share one folding column: ``headers`` and ``rows`` are
    changed in place to say so."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    keep = list(range(len(headers)))
    for drop in (5, 7):  # on a narrow terminal the whole-instance prices go first
        if sum(widths[i] + 3 for i in keep) + 1 <= width:
            break
        keep.remove(drop)
    merged = sum(widths[i] + 3 for i in keep) + 1 > width  # then source and as-of share a folding column
    if merged:
        keep.remove(9)
        for r in rows:
            r[8] = f"{r[8]} {r[9]}"
        headers[8] = "source, as of"
    return keep, widths


@click.group("feeds", context_settings=COMMAND_SETTINGS)
def feeds_group() -> None:
    """Fetch price feeds into the local snapshot store and inspect it.

    \b
    Store: HETINFRA_CACHE_DIR or ~/.cache/hetinfra/feeds. Sources and URLs:
    HETINFRA_FEEDS_SOURCES, HETINFRA_AWS_REGIONS, HETINFRA_GCP_API_KEY,
    HETINFRA_SKYPILOT_CATALOG, ... (see hetinfra.price_feeds.config).
    """


@feeds_group.command("refresh", context_settings=COMMAND_SETTINGS)
@click.option("--source", "sources", multiple=True, metavar="SOURCE", help=SOURCES_HELP)
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=0, min_open=True, max=MAX_WAIT_S), default=20.0, show_default=True,
              help="Seconds per HTTP request.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report instead of a table.")
def refresh_command(sources, timeout_s, as_json):
    """Fetch the live feeds and store each as a timestamped, hashed snapshot."""
    from hetinfra.errors import FeedError, HetinfraError

    try:
        from hetinfra.price_feeds.config import FeedConfig
        from hetinfra.price_feeds.load import parse_sources, refresh

        cfg = FeedConfig.from_env()
        names = parse_sources(_split(sources, "--source"), cfg.sources)
        if as_json:
            outcomes = refresh(names, config=cfg, timeout_s=timeout_s)
        else:
            outcomes = _refreshed_with_bars(names, cfg, timeout_s)
    except HetinfraError as exc:
        fail(exc, as_json)
        return
    report = [_refresh_entry(o) for o in outcomes]
    if as_json:
        click.echo(dumps_strict({"cache_dir": str(cfg.cache_dir), "sources": report}, indent=2))
    else:
        _print_refresh(cfg.cache_dir, outcomes, report)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        fail(FeedError(f"{len(failed)} of {len(outcomes)} feed(s) failed: "
                        + "; ".join(f"{o.source}: {o.error.message}" for o in failed),
                        hint=failed[0].error.hint or "the previous snapshots stay in the store"), False)
    unstored = [o for o in outcomes if o.store_error]
    if unstored:  # storing is what refresh is for: a store it cannot write is not a success (it exited 0)
        from hetinfra.errors import InvalidInputError

        fail(InvalidInputError(f"{unstored[0].source}: fetched, but {unstored[0].store_error}",
                               hint="set HETINFRA_CACHE_DIR to a folder you can write (a full disk: free space)"), False)


def _refreshed_with_bars(names: list[str], cfg, timeout_s: float) -> list:
    """``refresh`` with a progress bar per source on stderr, each left saying ok or FAILED."""
    from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from hetinfra.errors import console

    from hetinfra.price_feeds.load import refresh

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), console=console(stderr=True), transient=False) as bar:
        tasks = {s: bar.add_task(f"{s}: starting", total=None) for s in names}

        def on_progress(source, done, total, message):
            bar.update(tasks[source], completed=done, total=total, description=f"{source}: {message}")

        outcomes = refresh(names, config=cfg, timeout_s=timeout_s, progress=on_progress)
        for o in outcomes:
            bar.update(tasks[o.source], total=1, completed=1,
                       description=f"{o.source}: {'ok' if o.ok else 'FAILED'}")
    return outcomes


def _refresh_entry(o) -> dict:
    """One source's entry in ``feeds refresh --json``."""
    entry = {"source": o.source, "ok": o.ok, "rows": o.rows}
    if o.ok:
        entry.update(dropped=o.result.drops, as_of=o.result.fetched_at,
                     sha256=o.stored.sha256 if o.stored else None,
                     path=str(o.stored.path) if o.stored else None,
                     warnings=o.warnings + o.result.warnings)
    else:
        entry.update(error=o.error.message, hint=o.error.hint)
    return entry


def _print_refresh(cache_dir, outcomes: list, report: list[dict]) -> None:
    """``feeds refresh``'s table, then each source's warnings."""
    from hetinfra.plan.feeds import echo_warnings

    rows = []
    for o, e in zip(outcomes, report):
        if o.ok:
            rows.append(tuple(map(markup_escaped, (o.source, "ok", str(o.rows), o.result.drop_summary() or "",
                                                   e["path"] or "(not stored)"))))
        else:
            rows.append((o.source, "[red]failed[/red]", "", "", markup_escaped(o.error.message)))
    _print_store(cache_dir, ("source", "result", "rows", "dropped", "snapshot / error"), rows)
    for o, e in zip(outcomes, report):
        echo_warnings(f"{o.source}: {w}" if not w.startswith(f"{o.source}:") else w for w in e.get("warnings", []))


def _print_store(root, columns: tuple[str, ...], rows) -> None:
    """A table of what the snapshot store at ``root`` holds (``feeds refresh``, ``feeds list``)."""
    from rich.table import Table

    table = Table(title=f"snapshot store {markup_escaped(str(root))}")
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    print_table(_console(), table)


@feeds_group.command("list", context_settings=COMMAND_SETTINGS)
@click.option("--source", "sources", multiple=True, metavar="SOURCE", help="Only these sources.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(sources, as_json):
    """List the snapshots in the store, newest first."""
    from hetinfra.errors import HetinfraError
    from hetinfra.plan.feeds import echo_warnings

    try:
        from hetinfra.price_feeds.config import FeedConfig
        from hetinfra.price_feeds.load import parse_sources
        from hetinfra.price_feeds.store import SnapshotStore

        cfg = FeedConfig.from_env()
        store = SnapshotStore(cfg.cache_dir)
        names = parse_sources(_split(sources, "--source"), store.sources()) if sources else store.sources()
        snaps = [s for name in names for s in store.list(name)]
    except HetinfraError as exc:
        fail(exc, as_json)
        return
    rows = [{"source": s.source, "fetched_at": s.fetched_at, "rows": s.meta.get("rows"), "sha256": s.sha256,
             "dropped": s.meta.get("drops", {}), "path": str(s.path)} for s in snaps]
    if as_json:
        click.echo(dumps_strict({"cache_dir": str(store.root), "snapshots": rows, "problems": store.problems}, indent=2))
        return
    echo_warnings(store.problems)
    if not rows:
        click.echo(f"no snapshots in {store.root}; run `hetinfra feeds refresh`")
        return
    _print_store(store.root, ("source", "fetched at", "rows", "sha256", "path"),
                 [tuple(map(markup_escaped, (r["source"], r["fetched_at"], str(r["rows"]), r["sha256"][:12], r["path"])))
                  for r in rows])
