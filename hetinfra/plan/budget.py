"""One work budget per ``hetinfra plan`` (issue 36, Build 4): a wall-clock safety stop over the whole
command (templates, every solve, verification's rounds, replications and trim, the baselines), set by
``planning.time_limit_s``.

What a plan contains never depends on the clock: the solver stops on node and iteration limits,
verification on round and replication counts, all deterministic (docs/internals/solver.md). The budget
only stops work that runs far past what those limits allow (a loaded machine, a pathological input),
and every stop is reported: each piece of work it cut is named in plan.json ``budget.stopped`` (with
``solver.safety_stop`` where a solve was cut) and in a warning the summary prints.

The pipeline opens a budget for the command (:func:`opened`); code on the way asks the active one
(:func:`current`) how long a solve may take (:meth:`Budget.solve_limit`) and whether to go on
(:meth:`Budget.check`). Outside a plan command (a library call, a test) :func:`current` is a budget
that never runs out and whose solves get ``time_limit_s`` each, as before.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from hetinfra.solver import clock

#: the warning a plan carries when the budget stopped some of its work
BUDGET_WARNING = ("the work budget (planning.time_limit_s = {limit:g} s of wall clock) ran out: {what} "
                  "stopped early, so this plan may differ on a faster or less loaded machine "
                  "(raise planning.time_limit_s)")


@dataclass
class Budget:
    """A wall-clock budget of ``time_limit_s`` seconds from ``started`` (None: unlimited), and what it
    stopped, in the order it stopped them (each once)."""

    time_limit_s: float | None
    started: float = field(default_factory=lambda: clock.now())  # late-bound: a test may replace the clock
    stopped: list[str] = field(default_factory=list)

    def elapsed(self) -> float:
        return clock.now() - self.started

    def left(self) -> float:
        """Seconds left (infinite without a limit; never negative)."""
        if self.time_limit_s is None:
            return float("inf")
        return max(0.0, self.time_limit_s - self.elapsed())

    def exhausted(self) -> bool:
        return self.left() <= 0.0

    def solve_limit(self, per_solve_s: float) -> float:
        """The wall-clock safety stop of the next solve: what is left of the budget, or ``per_solve_s``
        outside a plan command. A spent budget still gives a solve a moment (its first warm start is
        priced past it, ``solver.block.START_FLOOR_S``), so that a plan comes out, reported."""
        return per_solve_s if self.time_limit_s is None else max(clock.MOMENT_S, self.left())

    def stop(self, what: str) -> None:
        """Record that the safety stop cut ``what`` (a solve, a verification step)."""
        if what not in self.stopped:
            self.stopped.append(what)

    def check(self, what: str) -> bool:
        """Whether ``what`` (the next piece of work) may start: False, recorded, once the budget is spent.
        A loop that can stop safely calls this before each step and stops (saying so) on False."""
        if self.exhausted():
            self.stop(what)
            return False
        return True

    def warning(self) -> str | None:
        """The plan's warning when the budget stopped something, else None."""
        if not self.stopped:
            return None
        return BUDGET_WARNING.format(limit=self.time_limit_s or 0, what=", ".join(self.stopped))


_active: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("hetinfra_plan_budget", default=None)


def current() -> Budget:
    """The budget of the plan command running in this context; outside one, an unlimited budget."""
    found = _active.get()
    return found if found is not None else Budget(None)


@contextmanager
def opened(budget: Budget) -> Iterator[Budget]:
    """``budget`` active for the code inside (threads started with ``contextvars.copy_context``, as
    the pipeline's baselines thread is, see it too)."""
    token = _active.set(budget)
    try:
        yield budget
    finally:
        _active.reset(token)
