"""Per-model solves run ahead in threads (``solver.decompose``'s models alone, ``solver.lagrange``'s
subproblems of one iteration): the caller still goes through the models in order, reads and writes
the memo (``solver.memo``) in that order and takes each model's future where it would have solved,
so the answer, and what the memo holds, are those of solving one after the other.

That holds because each job is a deterministic function of its arguments: one HiGHS instance per
block, single-threaded (``threads=1``), a fixed seed and a node limit (HiGHS keeps its task executor
per thread); only the wall-clock safety stop can differ, as it can between two runs in order.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from hetinfra import cores

T = TypeVar("T")


@contextmanager
def ahead(jobs: dict[str, Callable[[], T]]) -> Iterator[dict[str, Future]]:
    """Futures of ``jobs`` (model -> its solve), run in threads while the caller goes through the
    models in order: HiGHS releases the GIL, so models' MIPs overlap on several cores. Nothing is
    started with one job or one core; jobs not started are cancelled on leaving, running ones
    waited for."""
    workers = min(len(jobs), cores())
    if workers <= 1:
        yield {}
        return
    from hetinfra.solver.highs_quiet import swallow_banner

    swallow_banner()  # here, before any thread makes the process's first Highs object
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hetinfra-solve")
    try:
        yield {m: pool.submit(job) for m, job in jobs.items()}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
