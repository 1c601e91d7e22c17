"""Where a verified plan's time goes, stage by stage, with the counts that decide it (issue 33 point 6).

    python benchmarks/profile_verify.py [--kind independent|linked] [--models 32] [--mix other --seed K]

Plans benchmarks/bench_scale.py's fleet (``--kind independent``: write_fleet; ``linked``: write_shared;
``--mix other --seed K``: write_other) in this process, verified with baselines, after an unverified
plan that fills the template cache, and prints per stage of hetinfra.plan.verify: wall seconds, the
process's CPU seconds over the stage (every thread: the simulator's and the solver's threads, and the
baselines' thread where it runs beside the stage), the unit simulations run (a unit at one seed and
run length; hetinfra.sim.plan_sim simulates nothing its memo holds) and the per-model block solves
(``solver.decompose``: memo hits and misses; the baselines' own thread is counted apart). Then, per
round: its cost, the models met, and the block solves, unit simulations and models judged afresh
since the round before. The stages are read by wrapping module functions, so a renamed stage reads 0.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402

#: (module, function, stage label), wrapped on the main thread in this order (the innermost counts)
STAGES = [("hetinfra.plan.pipeline", "prepare", "templates (cached)"),
          ("hetinfra.plan.pipeline", "solve_units", "solves"),
          ("hetinfra.plan.verify", "simulators", "sizing probe"),
          ("hetinfra.plan.rounds", "rounds", "rounds"),
          ("hetinfra.plan.verify", "trim", "trim"),
          ("hetinfra.plan.confirm", "confirmed", "confirmation"),
          ("hetinfra.plan.verify", "_pad", "padding"),
          ("hetinfra.plan.verify", "_sustained", "over-provisioning"),
          ("hetinfra.plan.pipeline", "baselines_of", "baselines (side thread)"),
          ("hetinfra.plan.pipeline", "assemble", "assemble")]


class Meter:
    """Counts and times, by stage; ``stack``: the main thread's open stages (innermost last)."""

    def __init__(self):
        self.wall, self.cpu, self.count = collections.Counter(), collections.Counter(), collections.Counter()
        self.stack: list[str] = []
        self.rounds: list[dict] = []

    def stage(self) -> str:
        return self.stack[-1] if self.stack else "other"

    def wrap(self, module: str, name: str, label: str) -> None:
        import importlib

        mod = importlib.import_module(module)
        real = getattr(mod, name)
        main = threading.main_thread()

        def timed(*args, **kw):
            mine = threading.current_thread() is main
            if mine:
                self.stack.append(label)
            t, c = time.perf_counter(), time.process_time()
            try:
                return real(*args, **kw)
            finally:
                self.wall[label] += time.perf_counter() - t
                self.cpu[label] += time.process_time() - c
                self.count[label, "calls"] += 1
                if mine:
                    self.stack.pop()

        setattr(mod, name, timed)

    def install(self) -> None:
        import hetinfra.plan.replicated as replicated
        import hetinfra.plan.rounds as rounds
        import hetinfra.sim.plan_sim as plan_sim
        import hetinfra.solver.decompose as decompose

        for module, name, label in STAGES:
            self.wrap(module, name, label)
        simulate_units, memo_has, fresh, one_round = (plan_sim._simulate_units, decompose.memo_has,
                                                      replicated.Replicated._fresh, rounds._round)
        main = threading.main_thread()

        def units(jobs, *args):
            self.count[self.stage(), "unit simulations"] += len(jobs)
            return simulate_units(jobs, *args)

        def has(key):
            hit = memo_has(key)
            where = self.stage() if threading.current_thread() is main else "baselines (side thread)"
            self.count[where, "block memo hits" if hit else "block solves"] += 1
            return hit

        def judged(judge, view, names, out):
            self.count[self.stage(), "models judged afresh"] += len(names)
            return fresh(judge, view, names, out)

        def round_(*args):
            self.rounds.append({k: v for k, v in self.count.items() if isinstance(k, tuple) and k[1] != "calls"})
            return one_round(*args)

        plan_sim._simulate_units, decompose.memo_has = units, has
        replicated.Replicated._fresh, rounds._round = judged, round_


def report(meter: Meter, doc, wall: float, cpu: float) -> None:
    fid = doc.fidelity
    print(f"verified plan: wall {wall:.2f} s, CPU {cpu:.2f} s, ${doc.cost_usd_per_hour:.2f}/h, {fid.rounds} rounds, "
          f"replications {fid.replications.simulated}")
    kinds = ("unit simulations", "block solves", "block memo hits", "models judged afresh")
    print(f"  {'stage':<26}{'calls':>6}{'wall s':>9}{'CPU s':>8}" + "".join(f"{k:>22}" for k in kinds))
    for _m, _n, label in STAGES:
        print(f"  {label:<26}{meter.count[label, 'calls']:>6}{meter.wall[label]:>9.2f}{meter.cpu[label]:>8.2f}"
              + "".join(f"{meter.count[label, k]:>22}" for k in kinds))
    print("  (a stage's CPU counts every thread over its span; 'solves' are also inside 'rounds')")
    def total(counts: dict, kind: str) -> int:  # over every stage: the rounds' solves count under "solves"
        return sum(v for (_stage, k), v in counts.items() if k == kind)

    before: dict = {}
    for h, now in zip(fid.history, meter.rounds):
        delta = {k: total(now, k) - total(before, k) for k in kinds}
        before = now
        print(f"  round {h['round']:>2}: ${h['cost_usd_per_hour']:9.2f}/h  met {sum(h['models_met'].values()):>3}/"
              f"{len(h['models_met'])}  since the round before (its solve, its judgement): " + ", ".join(f"{k} {v}" for k, v in delta.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=("independent", "linked"), default="independent")
    ap.add_argument("--models", type=int, default=32)
    ap.add_argument("--mix", choices=("bench", "other"), default="bench")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="profile-verify-"))
    os.environ["HETINFRA_CACHE_DIR"] = str(tmp / "cache")
    if args.mix == "other":
        spec = bench_scale.write_other(tmp, args.models, args.kind == "linked", args.seed)
    elif args.kind == "linked":
        spec = bench_scale.write_shared(tmp, args.models)
    else:
        spec = bench_scale.write_fleet(tmp, args.models, linked=False)
    from hetinfra.plan.pipeline import plan_document

    plan_document(spec, verify=False, with_baselines=False)  # fills the template cache
    meter = Meter()
    meter.install()
    t, c = time.perf_counter(), time.process_time()
    _pr, doc = plan_document(spec, verify=True, with_baselines=True)
    report(meter, doc, time.perf_counter() - t, time.process_time() - c)


if __name__ == "__main__":
    main()
