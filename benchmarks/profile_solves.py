"""Where a `hetinfra plan` run's solve time goes (issue 33 point 6): one in-process plan of a spec,
with the solver's entry points wrapped to count calls and sum their *thread* CPU seconds (the
per-model solves run in threads, so a process-wide profiler only sees the main thread waiting).

    python benchmarks/profile_solves.py SPEC [--no-verify]

Prints per entry point: calls and thread-CPU seconds (a wrapped call's own thread only: nested
entries are counted in both, jobs run ahead in other threads are not), the HiGHS runs (LP, MIP, MIP
from a start), the plan's and the single-GPU baselines' solves and jobs apart, and per Lagrangian its
iterations and subproblem MIPs.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager


class Tally:
    """Calls and thread-CPU seconds per label, from any thread; ``side`` marks the baselines' thread."""

    def __init__(self):
        self.calls: dict[str, int] = defaultdict(int)
        self.cpu: dict[str, float] = defaultdict(float)
        self.lock = threading.Lock()
        self.side = threading.local()

    def whose(self, label: str) -> str:
        return f"{label} ({'baselines' if getattr(self.side, 'on', False) else 'plan'})"

    @contextmanager
    def timed(self, label):
        t = time.thread_time()
        try:
            yield
        finally:
            with self.lock:
                self.calls[label] += 1
                self.cpu[label] += time.thread_time() - t

    def wrap(self, mod, name: str, label: str, split: bool = False, side: bool = False) -> None:
        real = getattr(mod, name)

        def wrapped(*args, **kw):
            if side:
                self.side.on = True
            try:
                with self.timed(self.whose(label) if split else label):
                    return real(*args, **kw)
            finally:
                if side:
                    self.side.on = False

        setattr(mod, name, wrapped)


def instrument(tally: Tally) -> None:
    import hetinfra.plan.planner as planner
    import hetinfra.solver.decompose as decompose
    import hetinfra.solver.direct as direct
    import hetinfra.solver.lagrange as lagrange
    import hetinfra.solver.solve as solve_mod
    from hetinfra.solver.ahead import ahead as real_ahead

    real_run = direct.DirectModel._run

    def run(self, *, relax, **kw):
        kind = "highs LP" if relax else ("highs MIP (start)" if kw.get("start") is not None else "highs MIP")
        with tally.timed(kind):
            return real_run(self, relax=relax, **kw)

    direct.DirectModel._run = run

    @contextmanager
    def ahead(jobs):
        label = tally.whose("jobs run ahead")

        def job_of(job):
            def run_job():
                with tally.timed(label):
                    return job()
            return run_job

        with real_ahead({m: job_of(j) for m, j in jobs.items()}) as ready:
            yield ready

    decompose.ahead = lagrange.ahead = ahead
    lagrange.lagrangian = _reporting(tally, lagrange.lagrangian)
    tally.wrap(lagrange, "_solve_mip", "lagrange subproblem MIP")
    tally.wrap(lagrange, "_repair", "lagrange repair")
    tally.wrap(decompose, "_solve_alone", "model alone (solved)")
    tally.wrap(decompose, "solve_alone", "model alone (asked)")
    tally.wrap(planner, "prune_by_flows", "prune")
    tally.wrap(solve_mod, "solve", "solve()", split=True)
    tally.wrap(planner, "baselines", "baselines", side=True)


def _reporting(tally: Tally, real_lagrangian):
    def lagrangian(p, models, **kw):
        t, n0 = time.thread_time(), tally.calls["lagrange subproblem MIP"]
        out = real_lagrangian(p, models, **kw)
        gpus = sorted({g[2] for u in p.units for g, _ in u.gpu_use})
        print(f"    lagrangian {len(models)} models, {len(p.units)} units on {', '.join(gpus[:3])}"
              f"{' ...' if len(gpus) > 3 else ''}: {out.iterations if out else None} iterations, "
              f"{tally.calls['lagrange subproblem MIP'] - n0} subproblem MIPs, "
              f"its thread's CPU {time.thread_time() - t:.2f} s")
        return out

    return lagrangian


def main(argv: list[str]) -> None:
    from hetinfra.plan.pipeline import plan_document

    tally = Tally()
    instrument(tally)
    wall, cpu = time.perf_counter(), time.process_time()
    _, doc = plan_document(argv[0], verify="--no-verify" not in argv)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{argv[0]}: wall {wall:.2f} s, process CPU {cpu:.2f} s, ${doc.cost_usd_per_hour:.4f}/h, "
          f"rounds {getattr(doc.fidelity, 'rounds', None)}")
    for label in sorted(tally.calls):
        print(f"  {label:<32} {tally.calls[label]:>5} calls  {tally.cpu[label]:7.2f} s thread CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
