"""The one wall clock the solve path reads (``solver.block``, ``solver.lagrange``, ``solver.linked``,
``solver.decompose``, ``hetinfra.plan.budget``): only for the safety stop, never to decide a plan.
Kept in one place so a test can run a plan on a clock 1000x slower or faster and check that the plan
is the same unless a safety stop is reported (tests/solver/test_determinism.py)."""

from __future__ import annotations

import time


def now() -> float:
    """Seconds on a monotonic wall clock (only differences mean anything)."""
    return time.perf_counter()
