"""The one wall clock the solve path reads (``solver.solve``, ``solver.block``, ``solver.lagrange``,
``solver.linked``, ``solver.decompose``, ``hetinfra.plan.budget``): only for the safety stop, never to
decide a plan. Kept in one place so a test can run a plan on a clock 1000x slower or faster and check
that the plan is the same unless a safety stop is reported (tests/solver/test_determinism.py), or
count what each HiGHS call of one solve was granted (tests/solver/test_deadline.py).

One deadline per solve: a solve's ``time_limit_s`` bounds all of it (the LP relaxation, the warm
starts, the MIP, the re-solves), so each HiGHS call gets :func:`remaining` time to the one deadline
set where the solve starts, never a fresh ``time_limit_s`` of its own."""

from __future__ import annotations

import time

#: what a HiGHS call gets once its deadline has passed: it stops at once (HiGHS wants a positive limit)
MOMENT_S = 1e-3


def now() -> float:
    """Seconds on a monotonic wall clock (only differences mean anything)."""
    return time.perf_counter()


def remaining(deadline: float) -> float:
    """Seconds left to ``deadline`` (a time on :func:`now`): the time limit of the next HiGHS call of a
    solve, :data:`MOMENT_S` once it has passed."""
    return max(MOMENT_S, deadline - now())
