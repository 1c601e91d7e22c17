#!/usr/bin/env python3
"""Fit the vLLM 0.6-0.7 (V0) engine's CPU-side constants (calibration.V0_ENGINE) on the published
end-to-end runs of those versions, and report leave-one-out errors (docs/calibration.md, "The V0
engine").

    .venv/bin/python tools/fit_v0_engine.py            # grid, fit on all eight runs, leave-one-out (~1 min)
    .venv/bin/python tools/fit_v0_engine.py --write    # ... and rewrite calibration.V0_ENGINE

Inputs: hetinfra.perf.published.PUBLISHED's runs of vLLM 0.6-0.7 (MLPerf Inference v5.0, Krai, four
single-step runs of Llama-2-70B fp8 on 8 x H200; vLLM's v0.6.0 blog, four --num-scheduler-steps 10
runs of Llama 3 8B / 70B on H100 / A100: sources, commits and licences in hetinfra/perf/data/SOURCES.md),
each replayed on the simulator under its benchmark's procedure (hetinfra.sim.benchmark_run). The GPU
side is the shipped kernel fit (tools/fit_kernels.py); only the V0 engine's per-sequence CPU cost
(t_per_seq_us) and the share of the CPU step cost multi-step decoding pays once per N steps
(multi_step_share) are searched, on a grid. Objective: mean |log rate error| + 0.5 x mean optimistic
log rate error (a plan must not promise more than the engine served).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hetinfra.perf.calibration import CALIBRATIONS, engine_key  # noqa: E402
from hetinfra.perf.published import PUBLISHED  # noqa: E402
from hetinfra.sim.benchmark_run import published_check  # noqa: E402

CALIBRATION_PY = REPO / "hetinfra" / "perf" / "calibration.py"
PER_SEQ_US = (67.1, 75.0, 84.0, 90.0, 95.0, 100.0, 110.0, 125.0, 140.0, 160.0)
SHARES = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def v0_runs():
    return [p for p in PUBLISHED if engine_key(p.vllm_version) == "0.6"]


def trial(per_seq_us: float, share: float):
    """The V0 engine's constants with the two searched ones set (any other V0_ENGINE field stays)."""
    return dataclasses.replace(CALIBRATIONS["0.6"], t_per_seq_us=per_seq_us, multi_step_share=share)


def objective(errs: list[float]) -> float:
    logs = [math.log1p(e) for e in errs]
    return statistics.fmean(abs(x) for x in logs) + 0.5 * statistics.fmean(max(x, 0.0) for x in logs)


def error_grid(runs, log=print) -> dict[tuple[float, float], list[float]]:
    """(per_seq_us, share) -> each run's rate error (replayed / published - 1). A run without
    multi-step does not depend on the share: replayed once per per-sequence cost."""
    grid: dict[tuple[float, float], list[float]] = {}
    single: dict[tuple[float, str], float] = {}
    for us in PER_SEQ_US:
        for share in SHARES:
            errs = []
            for p in runs:
                if p.scheduler_steps <= 1:
                    if (us, p.name) not in single:
                        single[(us, p.name)] = published_check(p, trial(us, 0.0)).error
                    errs.append(single[(us, p.name)])
                else:
                    errs.append(published_check(p, trial(us, share)).error)
            grid[(us, share)] = errs
        log(f"  t_per_seq_us {us:g}: best share {min(SHARES, key=lambda s: objective(grid[(us, s)])):g}")
    return grid


def best(grid, keep: list[int]) -> tuple[float, float]:
    return min(grid, key=lambda k: (objective([grid[k][i] for i in keep]), k))


def write(per_seq_us: float, share: float, path: Path = CALIBRATION_PY) -> None:
    text = path.read_text()
    new, n = re.subn(r'V0_ENGINE: dict\[str, float\] = \{[^}]*\}',
                     f'V0_ENGINE: dict[str, float] = {{"t_per_seq_us": {per_seq_us!r}, "multi_step_share": {share!r}}}',
                     text, count=1)
    if n != 1:
        raise SystemExit(f"V0_ENGINE not found in {path}")
    path.write_text(new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite calibration.V0_ENGINE with the fit on all runs")
    args = ap.parse_args(argv)
    runs = v0_runs()
    grid = error_grid(runs)
    every = list(range(len(runs)))
    us, share = best(grid, every)
    print(f"fit on all {len(runs)} runs: t_per_seq_us {us:g}, multi_step_share {share:g}")
    for p, e in zip(runs, grid[(us, share)]):
        print(f"  {p.name}: {e:+.1%}")
    print("leave-one-out (fitted on the other runs, the left-out run's error):")
    for i, p in enumerate(runs):
        k = best(grid, [j for j in every if j != i])
        print(f"  {p.name}: t_per_seq_us {k[0]:g}, multi_step_share {k[1]:g} -> {grid[k][i]:+.1%}")
    if args.write:
        write(us, share)
        print(f"wrote V0_ENGINE to {CALIBRATION_PY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
