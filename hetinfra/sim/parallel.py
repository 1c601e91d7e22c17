"""Models simulated apart, in parallel where it pays.

A model's simulated result depends only on its own plan (requests are drawn per model, units are
simulated on their model's requests only: ``hetinfra.sim.plan_sim``), so a plan's models can be
simulated one by one, each in a copy of the plan where the other models have no demand
(``hetinfra.sim.minimal.scaled``), and the results are those of one simulation of all of them
(tests/sim/test_plan_sim_memo.py checks it). Each model's simulation runs in its own process when
there are several models and more than one core (a fork: the workers inherit the loaded modules);
the results are collected by model name, so they do not depend on which worker ends first.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["simulate_apart", "workers_for"]


def workers_for(models: int) -> int:
    """Processes for ``models`` simulations: one per model, at most one per core, 1 without fork."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(models, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _one(args) -> tuple[str, dict]:
    view, name, spec, spec_path, config = args
    from hetinfra.sim.minimal import scaled
    from hetinfra.sim.plan_sim import simulate_plan

    return name, simulate_plan(scaled(view, {name: 1.0}), spec, spec_path, config)


def simulate_apart(view: dict, spec, spec_path: Path, config, names: list[str], workers: int | None = None
                   ) -> dict[str, dict]:
    """Model name -> the simulation of that model alone (its ``models`` hold it only), for each of
    ``names`` (models of ``view`` with demand); ``workers`` processes (default :func:`workers_for`)."""
    jobs = [(view, n, spec, spec_path, config) for n in names]
    workers = workers_for(len(jobs)) if workers is None else workers
    if workers <= 1:
        return dict(map(_one, jobs))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return dict(pool.map(_one, jobs))
