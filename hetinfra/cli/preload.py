"""Loading on a side thread the modules a command needs only later, while its main thread runs code
that releases the GIL.

Much of what `hetinfra plan` imports it needs only after its first solve: plan.json's typed sections
(pydantic builds each class's schema as it is defined), the simulator and Rich for the summary. The
first solve's MIP runs in HiGHS, which releases the GIL, on one core; a thread that imports those
modules meanwhile takes them off the main thread's path where a second core is free. It starts as
that MIP starts (``hetinfra.solver.mip_hooks``), not with the command, nor with the solve: beside the
command's or the solve's own Python (the rows, the LP, the warm starts, importing highspy and numpy)
both threads run Python, which the GIL runs one at a time, so the imports would only have taken turns
with it, and delayed it (on Mélange V1 at 32 req/s, started as the templates were built it made
`hetinfra plan` slower than no preloader at all: 0.692 s against 0.680 s; started with the MIP, 0.655 s).

Imports on two threads are safe here: Python locks each module while it loads, and a thread that needs
a module the other is loading waits for it. Neither can wait on the other: the package's import graph
has no circles, and no package ``__init__`` loads a submodule of its own (hetinfra.lazy_names; both
checked by tests/test_imports.py), which would make "load a submodule" and "initialise its package"
wait on each other (a review forced Python's import deadlock error that way). Nothing depends on which thread loaded a
module, so the results do not depend on the threads' timing. A module that fails to load is left to
the main thread, which meets the same error where it imports the module itself.
"""

from __future__ import annotations

import gc
import threading
from typing import Iterable

#: whether this process's cyclic collector is ours to set: the ``hetinfra`` entry point's
#: (hetinfra.cli.app.main) sets it; a caller running a command in its own process (CliRunner in the
#: tests) keeps its collector as it is
own_collector = False


class Preloader:
    """Imports ``names`` in order on a side thread from :meth:`start` on, until they are loaded or
    :meth:`close` asks it to stop (it then finishes the module it is loading, and the call waits
    for it: no thread outlives the command).

    Where the collector is ours (:data:`own_collector`), it is off from the preloader's creation to
    the end of its loading: a command loads most of its modules meanwhile, and the objects they make
    (classes, functions, pydantic's schemas) live as long as the process, so every collection pass
    over them finds nothing (about 3% of `hetinfra plan`'s CPU on Mélange V1). They are then frozen
    (gc.freeze: later passes skip them) and the collector runs again, for the rest of the command."""

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()  # start() may come from a solver thread (hetinfra.solver.mip_hooks)
        self._collector_off = own_collector and gc.isenabled()
        if self._collector_off:
            gc.disable()

    def start(self) -> None:
        """Start loading (once; from any thread; not after :meth:`close`)."""
        with self._starting:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._load, name="hetinfra-preload", daemon=True)
                self._thread.start()

    def _load(self) -> None:
        import importlib

        for name in self.names:
            if self._stop.is_set():
                break
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the main thread imports it itself and reports what it finds
                break
        self._collect_again()

    def _collect_again(self) -> None:
        if self._collector_off:  # once: at the end of the loading, or at close where it never started
            self._collector_off = False
            gc.freeze()
            gc.enable()

    def close(self) -> None:
        with self._starting:  # no start() after this
            self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._collect_again()

    def __enter__(self) -> "Preloader":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


class SolveStarts:
    """A :class:`hetinfra.plan.progress.Progress` for :func:`hetinfra.plan.pipeline.plan_document`
    that starts ``preloader`` when the first round is solved, where no MIP started it before (a solve
    its warm start settled: the rounds' simulations release the GIL too); every call also goes to
    ``inner`` (the status line; None on pipes and under --json)."""

    def __init__(self, inner, preloader: Preloader):
        self.inner, self.preloader = inner, preloader

    def budget(self, budget) -> None:
        if self.inner is not None:
            self.inner.budget(budget)

    def round(self, rnd: int, max_rounds: int, result) -> None:
        self.preloader.start()
        if self.inner is not None:
            self.inner.round(rnd, max_rounds, result)

    def stage(self, name: str) -> None:
        if self.inner is not None:
            self.inner.stage(name)

    def requests(self, n: int) -> None:
        if self.inner is not None:
            self.inner.requests(n)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
