"""Does a plan keep its promise beyond the sample it was verified on? (issue 33's acceptance harness)

    python benchmarks/bench_promise.py [--exe PATH/hetinfra] [--work DIR] [--seeds 10] [--long 5]
                                       [--only NAME ...] [--spec PATH ...] [--jobs 2]

For each example in services/ and each spec in benchmarks/specs/ (specs that are NOT examples: 8k
prompts, a loose mean objective on Mélange's measured profile, two models), it runs the given
``hetinfra`` (default: this interpreter's) as a user would:

1. ``hetinfra plan SPEC --out WORK/NAME``;
2. ``hetinfra simulate WORK/NAME --json`` at the plan's promised load (plan.json ``fidelity``: load,
   requests, burst_cv) on ``--seeds`` fresh seeds that verification never uses
   (``hetinfra.sim.replications.seeds_for(0, "audit", k)``: seeds >= 1000, residue 2 mod 3; the
   verification's ``decide`` and ``confirm`` seeds are the other residues), and once with
   ``--long`` x the requests at one more audit seed.

It prints per model: the plan's cost, the runs that met out of ``--seeds``, the worst miss in %
(the largest ``objective.ratio - 1`` over the runs: the statistic over its objective; <= 0 is
inside), and the long run's result. Acceptance (issue 33): met in at least 9 of 10, no miss worse
than 2%, and met in the long run. Any other checkout can be measured with ``--exe`` (its CLI only
is used), e.g. the baseline in benchmarks/results/promise_before.txt.

benchmarks/specs/melange-v1-loose.* were written from tests/solver/test_melange_regression.py's
``_write_case`` (V1, 32 req/s, sliced) with SLO ttft_ms 100000, tpot_ms 1000, percentile mean.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "services").glob("*.yaml")) + sorted((REPO / "benchmarks" / "specs").glob("*.yaml"))


def audit_seeds(k: int) -> list[int]:
    """``k`` + 1 audit seeds: hetinfra.sim.replications.seeds_for's rule, stated again so that the
    harness runs against checkouts that predate it."""
    return [1000 + 3 * j + 2 for j in range(k + 1)]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def plan(exe: str, spec: Path, out: Path) -> dict | str:
    """The written plan.json, or the error text."""
    p = run([exe, "plan", str(spec), "--out", str(out)])
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return json.loads((out / "plan.json").read_text())


def simulate(exe: str, out: Path, fidelity: dict, seed: int, requests: int) -> dict | str:
    """simulation.json of one run (written to a temporary folder), or the error text."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [exe, "simulate", str(out), "--json", "--out", tmp, "--seed", str(seed), "--requests", str(requests),
               "--load", str(fidelity.get("load", 1.0)), "--burst-cv", str(fidelity.get("burst_cv", 1.0))]
        p = run(cmd)
        if p.returncode not in (0, 12) or not p.stdout.strip():  # 12: a missed objective under --check
            return (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return json.loads(p.stdout)


def miss(entry: dict) -> float:
    """How far a model's run is from its objective, in % (> 0 misses; an unstable unit counts as missing)."""
    ratio = entry["objective"].get("ratio")
    return float("inf") if ratio is None else 100.0 * (ratio - 1.0)


def attainment_note(model: dict, got: list[dict]) -> str:
    """For a model with an attainment target, its lowest attained share over the runs ``got`` and that run's
    misses over the misses the target allows: ``objective.ratio`` (target / attained) squashes the
    scale (0.9927 against 0.999 reads +0.6%, with 7.3x the misses allowed: the stop-60 audit)."""
    target = (model.get("slo") or {}).get("attainment")
    attained = [e["objective"]["attainment"] for e in got if e["objective"].get("attainment") is not None]
    if target is None or not attained or target >= 1.0:
        return ""
    low = min(attained)
    return f"  attained >= {low:.4f} (misses {(1.0 - low) / (1.0 - target):.1f}x allowed)"


def windows(seeds: list[int], runs: list, name: str) -> str:
    """Runs met per window of 10 audit seeds (the standard audit each window would have been) and the missed
    seeds with their miss in %: a promise kept on 59 of 60 still fails a 10-seed audit where one window
    reads 8."""
    met = [None if isinstance(r, str) else next((e for e in r["models"] if e["model"] == name), None) for r in runs]
    counts = [sum(1 for e in met[i:i + 10] if e is not None and e["met"]) for i in range(0, len(met), 10)]
    # a last window short of 10 says of how many (5/5 read as 5 of 10)
    shown = [str(c) if i + 10 <= len(met) else f"{c}/{len(met) - i}" for i, c in zip(range(0, len(met), 10), counts)]
    missed = [f"{s} ({miss(e):+.1f}%)" if e is not None else f"{s} (error)"
              for s, e in zip(seeds, met) if e is None or not e["met"]]
    return f"windows of 10: {' '.join(shown)}; missed: {', '.join(missed) or 'none'}"


def _unserved(doc: dict, model: dict) -> bool:
    """Whether the plan leaves all of ``model``'s demand unserved (plan.json unmet_rps: Plan.unserved_models)."""
    from hetinfra.document import Plan

    return model["name"] in Plan.parse(doc).unserved_models()


def one_spec(exe: str, spec: Path, work: Path, seeds: list[int], long: int) -> list[str]:
    """The report's rows of one spec."""
    t = time.perf_counter()
    doc = plan(exe, spec, work / spec.stem)
    if isinstance(doc, str):
        return [f"{spec.stem:<18} plan failed: {doc}"]
    fid = doc.get("fidelity") or {}
    requests = int(fid.get("requests") or 20000)
    runs = [simulate(exe, work / spec.stem, fid, s, requests) for s in seeds[:-1]]
    big = simulate(exe, work / spec.stem, fid, seeds[-1], long * requests)
    rows = []
    for m in doc["models"]:
        name = m["name"]
        if _unserved(doc, m):  # planning.allow_unmet left all of it unserved: no latency to audit, no promise
            rows.append(f"{spec.stem:<18} {name:<15} ${doc['cost_usd_per_hour']:>7.2f}/h  unserved (unmet_rps): "
                        "nothing to audit")
            continue
        got = [next((e for e in r["models"] if e["model"] == name), None) for r in runs if isinstance(r, dict)]
        got = [e for e in got if e is not None]
        errors = [r for r in runs if isinstance(r, str)]
        met = sum(1 for e in got if e["met"])
        worst = max((miss(e) for e in got), default=float("nan"))
        b = next((e for e in big["models"] if e["model"] == name), None) if isinstance(big, dict) else None
        long_txt = big if b is None else f"{'met' if b['met'] else 'MISSED'} ({miss(b):+.1f}%)"
        ok = met >= 0.9 * len(seeds[:-1]) and worst <= 2.0 and b is not None and b["met"]
        rows.append(f"{spec.stem:<18} {name:<15} ${doc['cost_usd_per_hour']:>7.2f}/h  load {fid.get('load', 1.0):g}  "
                    f"{requests:>6} req  met {met:>2}/{len(seeds) - 1}  worst {worst:+8.1f}%  "
                    f"{long}x: {long_txt:<18} {'ok' if ok else 'FAILS'}"
                    + attainment_note(m, got) + (f"  errors: {errors[0]}" if errors else ""))
        if len(seeds) - 1 > 10:  # the standard audit is 10 seeds: how each 10 of these would have read
            rows.append(f"{'':<18} {name:<15} " + windows(seeds[:-1], runs, name))
    rows.append(f"{'':<18} ({time.perf_counter() - t:.0f} s)")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exe", default=str(Path(sys.executable).parent / "hetinfra"))
    ap.add_argument("--work", type=Path, default=None, help="where the plans are written (default: a temp dir)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--long", type=int, default=5)
    ap.add_argument("--only", nargs="*", action="extend", default=None, help="spec names (stems) to run")
    ap.add_argument("--jobs", type=int, default=2, help="specs planned and simulated at once")
    ap.add_argument("--spec", nargs="*", action="extend", type=Path, default=None,
                    help="spec files to run instead (held-out specs, bench_scale.py's fleets)")
    args = ap.parse_args()
    specs = args.spec or [s for s in SPECS if args.only is None or s.stem in args.only]
    seeds = audit_seeds(args.seeds)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-promise-"))
    print(f"hetinfra: {args.exe}; plans in {work}; audit seeds {seeds[:-1]}, {args.long}x requests at seed {seeds[-1]}")
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        for rows in pool.map(lambda s: one_spec(args.exe, s, work, seeds, args.long), specs):
            print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
