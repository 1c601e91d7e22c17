"""Solves through Pyomo on two threads at once (the plan's and the single-GPU baselines', on a spec
with LoRA adapters): Pyomo captures the process's stdout/stderr descriptors for each solve and
checks them on the way out, so two at once used to kill a thread (EBADF, "Captured output does
not match sys.stdout") and `hetinfra plan` exited 1 (benchmarks/specs/lora-50-ranks.yaml).
hetinfra.solver.highs_quiet.FD_CAPTURE serializes them."""

from __future__ import annotations

import threading

import pyomo.environ as pyo

from hetinfra.solver.solve import _run_highs


def _knapsack(k: int) -> pyo.ConcreteModel:
    """A small covering MIP that takes HiGHS a few milliseconds (long enough for two to overlap)."""
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 39)
    m.x = pyo.Var(m.I, domain=pyo.NonNegativeIntegers, bounds=(0, 9))
    m.cost = pyo.Objective(expr=sum((3 + (i * 7 + k) % 11) * m.x[i] for i in m.I))
    m.need = pyo.ConstraintList()
    for j in range(12):
        m.need.add(sum((1 + (i * (j + 3) + k) % 5) * m.x[i] for i in m.I) >= 37 + j)
    return m


def test_pyomo_solves_on_two_threads_at_once_all_finish_and_print_nothing(capfd):
    errors, results = [], []

    def work(k: int) -> None:
        try:
            for r in range(8):
                res = _run_highs(_knapsack(k * 100 + r), 30.0, 0.0)
                results.append(res.incumbent_objective)
        except BaseException as exc:  # noqa: BLE001 - a thread's failure is the finding
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out, err = capfd.readouterr()
    assert errors == [] and len(results) == 24 and all(r is not None for r in results)
    assert "Solving report" not in out + err and "Exception" not in err
