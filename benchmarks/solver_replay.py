"""The solver's share of a verified plan, replayed alone: what a solver change may save without moving a
plan, and what a plan-moving one costs (issue 33 point 6).

    python benchmarks/solver_replay.py capture CORPUS [--kind independent|linked] [--models 32] [--mix other --seed K]
    python benchmarks/solver_replay.py replay CORPUS [--mip-option NAME=VALUE ...]

``capture`` plans benchmarks/bench_scale.py's fleet verified, with baselines, in this process (as
benchmarks/profile_verify.py does) and records every block solve (``solver.block.solve_block``) and every
Lagrangian subproblem (``solver.lagrange._solve_mip``), from every thread: the inputs and what came back.

``replay`` solves them again one after the other, in this process and on this checkout's solver (another
checkout's python can replay a corpus captured here), and prints:
- the thread CPU seconds of the whole replay, of HiGHS's runs (LPs: relaxations and the fixed-count
  pricing of warm starts; MIPs) and of the Python around them;
- how many answers differ from the captured ones, and in how many the instance counts differ. A solver
  change with 0 differences gives every block of that plan the answer it had (each is a deterministic
  function of its inputs: ``solver.ahead``), so the plan is unchanged; the goldens still decide;
- the MIPs (and their CPU) given a start that return exactly that start's vector, and those that return another vector
  of the same objective (HiGHS takes a solution better by rounding noise as an improvement): what any
  "prove the start optimal and skip the MIP" rule would change.

``--mip-option`` sets a HiGHS option before each MIP (e.g. mip_allow_restart=false): its CPU against
the differences it makes.
"""

from __future__ import annotations

import argparse
import collections
import copy
import os
import pickle
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _spec(args, tmp: Path) -> Path:
    import bench_scale

    if args.mix == "other":
        return bench_scale.write_other(tmp, args.models, args.kind == "linked", args.seed)
    if args.kind == "linked":
        return bench_scale.write_shared(tmp, args.models)
    return bench_scale.write_fleet(tmp, args.models, linked=False)


def capture(args) -> None:
    with tempfile.TemporaryDirectory(prefix="solver-replay-") as tmp:
        os.environ["HETINFRA_CACHE_DIR"] = str(Path(tmp) / "cache")
        _capture(args, _spec(args, Path(tmp)))


def _capture(args, spec: Path) -> None:
    from hetinfra.plan.pipeline import plan_document
    import hetinfra.solver.block as block
    import hetinfra.solver.decompose as decompose
    import hetinfra.solver.lagrange as lagrange
    import hetinfra.solver.linked as linked

    plan_document(spec, verify=False, with_baselines=False)  # fills the template cache
    calls, lock = [], threading.Lock()

    def recorded(kind: str, real):
        def call(*a, **kw):
            got = real(*a, **kw)
            # a copy now: callers amend a block they got back (solver.decompose._solve_alone)
            with lock:
                calls.append((kind, a, {**kw, "deadline": None}, copy.deepcopy(got)))
            return got
        return call

    decompose.solve_block = linked.solve_block = recorded("block", block.solve_block)
    lagrange._solve_mip = recorded("sub", lagrange._solve_mip)
    _pr, doc = plan_document(spec, verify=True, with_baselines=True)
    with open(args.corpus, "wb") as f:
        pickle.dump(calls, f)
    print(f"{len(calls)} solves captured; plan ${doc.cost_usd_per_hour:.2f}/h, {doc.fidelity.rounds} rounds, "
          f"replications {doc.fidelity.replications.simulated}")


class _Meter:
    """Thread CPU of HiGHS's runs by kind, and the MIPs given a start by what they returned."""

    def __init__(self, options: dict):
        self.cpu, self.runs = collections.Counter(), collections.Counter()
        self.starts, self.starts_cpu = collections.Counter(), collections.Counter()
        self.options, self.kind = options, "LP"
        self.own = 0.0  # thread CPU of this meter's own checks, kept out of the Python figure

    def install(self) -> None:
        import highspy

        import hetinfra.solver.direct as direct

        run, real_run, real_mip = highspy.Highs.run, direct.DirectModel._run, direct.DirectModel.mip
        meter = self

        def timed_run(h):
            t = time.thread_time()
            try:
                return run(h)
            finally:
                meter.cpu[meter.kind] += time.thread_time() - t
                meter.runs[meter.kind] += 1

        def kind_run(dm, **kw):
            meter.kind = "LP" if kw.get("relax") else "MIP"
            return real_run(dm, **kw)

        def mip(dm, **kw):
            for name, value in meter.options.items():
                dm.highs().setOptionValue(name, value)
            t = time.thread_time()
            out = real_mip(dm, **kw)
            done = time.thread_time()
            meter.judge_start(dm, kw.get("start"), out, done - t)
            meter.own += time.thread_time() - done
            return out

        highspy.Highs.run, direct.DirectModel._run, direct.DirectModel.mip = timed_run, kind_run, mip

    def judge_start(self, dm, start, out, cpu: float) -> None:
        if start is None:
            what = "no start"
        elif not out.has_solution:
            what = "no solution"
        elif list(out.values) == list(start):
            what = "returned the start"
        elif abs(out.objective - dm.objective_of(start)) <= 1e-9 * max(1.0, abs(out.objective)):
            same = dm.counts(out.values) == dm.counts(start)
            what = "another vector at the start's objective" + ("" if same else " (other counts)")
        else:
            what = "cheaper than the start"
        self.starts[what] += 1
        self.starts_cpu[what] += cpu


def _option(text: str) -> tuple[str, object]:
    name, value = text.split("=", 1)
    for cast in (int, float):
        try:
            return name, cast(value)
        except ValueError:
            pass
    return name, {"true": True, "false": False}.get(value.lower(), value)


def replay(args) -> None:
    from hetinfra.solver import clock
    import hetinfra.solver.block as block
    import hetinfra.solver.lagrange as lagrange

    with open(args.corpus, "rb") as f:
        calls = pickle.load(f)
    meter = _Meter(dict(_option(o) for o in args.mip_option))
    meter.install()
    differ, counts_differ = collections.Counter(), collections.Counter()
    plan = (lambda r: None if r is None else getattr(r, "n", None) or getattr(r, "counts", None))  # noqa: E731
    total = 0.0
    for kind, a, kw, want in calls:
        kw = {**kw, "deadline": clock.now() + 1e6}
        t = time.thread_time()
        got = block.solve_block(*a, **kw) if kind == "block" else lagrange._solve_mip(*a, **kw)
        total += time.thread_time() - t
        if got != want:
            differ[kind] += 1
            counts_differ[kind] += plan(got) != plan(want)
    total -= meter.own
    highs = sum(meter.cpu.values())
    print(f"{len(calls)} solves ({collections.Counter(k for k, *_ in calls)}), MIP options {meter.options or 'as given'}")
    print(f"  thread CPU {total:.3f} s: HiGHS {highs:.3f} s ("
          + ", ".join(f"{k} {meter.runs[k]} runs {meter.cpu[k]:.3f} s" for k in sorted(meter.runs))
          + f"), Python {total - highs:.3f} s")
    print(f"  answers that differ from the captured ones: {dict(differ) or 0}; with other instance counts: "
          f"{dict(+counts_differ) or 0}")
    print("  MIPs: " + "; ".join(f"{k} {n} ({meter.starts_cpu[k]:.3f} s)" for k, n in sorted(meter.starts.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("corpus")
    cap.add_argument("--kind", choices=("independent", "linked"), default="independent")
    cap.add_argument("--models", type=int, default=32)
    cap.add_argument("--mix", choices=("bench", "other"), default="bench")
    cap.add_argument("--seed", type=int, default=1)
    rep = sub.add_parser("replay")
    rep.add_argument("corpus")
    rep.add_argument("--mip-option", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    capture(args) if args.command == "capture" else replay(args)


if __name__ == "__main__":
    main()
