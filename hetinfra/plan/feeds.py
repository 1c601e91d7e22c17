"""Offers and GPU caps for a plan, as both ``hetinfra plan`` and ``hetinfra replan`` load them:
feeds through ``hetinfra.price_feeds`` with warnings on stderr (and a progress bar while live feeds
download, on a terminal), caps from a caps CSV and the clouds' own limits."""

from __future__ import annotations

import sys

from hetinfra.errors import shown


def load_caps(caps_file, availability: bool, snapshot, spec_path=None, *, timeout_s: float = 20.0):
    """Caps from a caps CSV and (with ``availability``) the clouds' APIs: ({(cloud, region, gpu):
    max_gpus}, warnings); warnings also go to stderr. Only a bad caps file fails (exit 2).

    The APIs are asked only about the offers the spec at ``spec_path`` admits (its clouds, regions
    and GPUs; every offer without it): a cloud the spec leaves out is not asked, so its missing
    credentials are no warning (`plan --availability` on an aws+gcp spec warned "azure availability:
    not configured")."""
    if not caps_file and not availability:
        return {}, []
    from hetinfra.price_feeds.availability import load_availability
    from hetinfra.price_feeds.caps import caps_dict

    clouds = ("aws", "gcp", "azure") if availability else ()
    offers = snapshot.offers
    if availability and spec_path is not None:
        from hetinfra.plan.inputs import admitted_offers
        from hetinfra.spec.load import load_spec

        offers = admitted_offers(load_spec(spec_path)[0].infrastructure, offers)
    rows, warnings = load_availability(caps_file, clouds=clouds, offers=offers, timeout_s=timeout_s)
    caps = caps_dict(rows)
    warnings = list(warnings) + _spot_rows_unapplied(caps.skipped)
    echo_warnings(warnings)
    return caps, warnings


def _spot_rows_unapplied(skipped) -> list[str]:
    """The caps rows :func:`caps_dict` left out (``purchase: spot``) are read but not applied: a
    plan's caps count every purchase option of a (cloud, region, GPU) together, under its
    on-demand rows, so a spot quota below them is not enforced. Said, not silent."""
    spot = [c.where or c.source for c in skipped if c.purchase == "spot"]
    if not spot:
        return []
    return [f"{len(spot)} spot cap(s) not applied ({', '.join(spot[:3])}{', ...' if len(spot) > 3 else ''}): "
            "caps count every purchase option together (the on-demand rows); where the spot quota is smaller, "
            "lower models' max_spot_fraction or set infrastructure.spot: false"]


def echo_warnings(warnings) -> None:
    for w in warnings:
        print(shown(f"warning: {w}"), file=sys.stderr, flush=True)


class LiveProgress:
    """A Rich progress bar on stderr (one line per source) while live feeds download; a no-op
    unless stderr is a terminal."""

    def __init__(self, enabled: bool):
        self.bar = None
        self.tasks: dict = {}
        if enabled:
            from hetinfra.errors import console as make_console

            console = make_console(stderr=True)
            if console.is_terminal:
                from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn

                self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                    console=console, transient=True)

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self.update if self.bar is not None else None

    def update(self, source, done, total, message):
        if source not in self.tasks:
            self.tasks[source] = self.bar.add_task(source, total=None)
        self.bar.update(self.tasks[source], completed=done, total=total, description=f"{source}: {message}")

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


def load_feeds(feeds: str = "snapshot", strict: bool = False, max_age_h: float | None = None, *,
               timeout_s: float = 20, quiet: bool = False):
    """``load_offers`` for a CLI command: prints the warnings to stderr (and a progress bar while
    live feeds download, on a terminal); returns (snapshot, warnings).

    Raises HetinfraError (InvalidInputError exit 2, FeedError exit 4); the CLI turns it into the exit code.
    """
    from hetinfra.price_feeds.load import load_offers

    with LiveProgress(not quiet and (feeds or "").startswith("live")) as progress:
        snap, warnings = load_offers(feeds, strict=strict, max_age_h=max_age_h, timeout_s=timeout_s,
                                     progress=progress)
    if not quiet:
        echo_warnings(warnings)
    return snap, warnings
