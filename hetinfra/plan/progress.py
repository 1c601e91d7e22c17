"""Progress of ``hetinfra plan`` on a terminal: one transient status line on stderr saying which
verification round runs, how many solver blocks the last solve had, how many requests have been
simulated, and how much of the command's work budget (``hetinfra.plan.budget``) is spent. Nothing on pipes, redirects or under ``--json`` (:func:`progress_for` returns None, and
the pipeline then reports nothing). Rich is imported only on a terminal, and the line is redrawn at
most every REFRESH_S seconds by the caller's own thread (no refresh thread): what it shows never
feeds back into the plan."""

from __future__ import annotations

import time
from typing import TextIO

#: the shortest interval between two redraws of the line
REFRESH_S = 0.1


class Progress:
    """The status line. The pipeline calls :meth:`round` before each verification round,
    :meth:`stage` when it moves on (trim, over-provisioning, baselines), :meth:`requests` as the
    simulator replays requests; :meth:`close` clears the line."""

    def __init__(self, stream: TextIO):
        from rich.live import Live

        from hetinfra.errors import console

        self._live = Live("", console=console(file=stream, force_terminal=True, stderr=True), transient=True,
                          auto_refresh=False)
        self._live.start()
        self._what, self._blocks, self._simulated, self._drawn = "solving", None, 0, 0.0
        self._budget = None

    def round(self, rnd: int, max_rounds: int, result) -> None:
        """Verification round ``rnd`` of ``max_rounds`` starts, on the plan of solver ``result``."""
        self._what = f"verification round {rnd}/{max_rounds}"
        self._blocks = len(getattr(result, "blocks", None) or []) or 1
        self._draw(force=True)

    def budget(self, budget) -> None:
        """Show the elapsed share of ``budget`` (a :class:`hetinfra.plan.budget.Budget`) from now on."""
        self._budget = budget
        self._draw(force=True)

    def stage(self, name: str) -> None:
        self._what = name
        self._draw(force=True)

    def requests(self, n: int) -> None:
        """``n`` more requests simulated."""
        self._simulated += n
        self._draw()

    def line(self) -> str:
        blocks = f" | {self._blocks} solver block{'s' if self._blocks != 1 else ''}" if self._blocks else ""
        spent = ""
        if self._budget is not None and self._budget.time_limit_s is not None:
            spent = f" | {self._budget.elapsed():.0f} s of {self._budget.time_limit_s:g} s budget"
        return f"hetinfra plan: {self._what}{blocks}{spent} | {self._simulated:,} requests simulated"

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._drawn >= REFRESH_S:
            self._drawn = now
            from rich.text import Text

            self._live.update(Text(self.line()), refresh=True)  # plain: no number highlighting

    def close(self) -> None:
        self._live.stop()


def progress_for(stream: TextIO, as_json: bool) -> Progress | None:
    """A :class:`Progress` on ``stream`` when it is a terminal and the output is not ``--json``; else None."""
    isatty = getattr(stream, "isatty", None)
    if as_json or isatty is None or not isatty():
        return None
    return Progress(stream)
