"""Callbacks run as HiGHS starts a MIP (``solver.direct``, and the Pyomo path's HiGHS).

HiGHS holds no GIL for a whole run, and a MIP is the longest such stretch of a plan's first solve:
a caller with Python work that can wait (``hetinfra.cli.preload``: the modules a verified plan needs
only after its solve) starts it there, where a second core runs it beside the solve. Started sooner,
beside the solve's own Python (the rows, the LP, the warm starts, importing highspy and numpy), it
only takes turns with that Python for the GIL and delays it: on Mélange V1 at 32 req/s (a quiet
2-core machine) `hetinfra plan` took 0.692 s with the preloader started as the templates were built,
0.680 s with no preloader at all, 0.655 s with it started as the MIP starts.

Process-wide and called from whichever thread runs the MIP (``solver.ahead`` runs models' solves in
threads): a callback must be cheap and safe to call from any thread, and more than once."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

_callbacks: list[Callable[[], None]] = []


@contextmanager
def on_mip_start(callback: Callable[[], None]) -> Iterator[None]:
    """``callback()`` runs as each MIP starts, until the block ends."""
    _callbacks.append(callback)
    try:
        yield
    finally:
        _callbacks.remove(callback)


def mip_starting() -> None:
    """Run the callbacks: HiGHS is about to start a MIP."""
    for callback in tuple(_callbacks):
        callback()
