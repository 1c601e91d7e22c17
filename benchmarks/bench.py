"""Print hetinfra's performance figures (not a test; numbers for notes and docs/benchmarks.md).

    python benchmarks/bench.py

Figures: `hetinfra --help` wall time, `hetinfra plan` wall time per example service (verified by
simulation and with --no-verify, side by side), the
Mélange V2 rate-32 sliced solve (build/solve time, model size, gap), and estimator throughput.
Targets (issue 2): --help < 0.5 s, plan < 3 s per example, Mélange V2 r32 solve < 0.5 s.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
EXE = shutil.which("hetinfra") or str(Path(sys.executable).parent / "hetinfra")


def wall(cmd: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def melange_v2_r32() -> dict:
    sys.path.insert(0, str(REPO))
    from hetinfra.plan.planner import plan
    from tests.solver.test_melange_regression import _write_case
    import yaml

    fixtures = json.loads((SHARED / "data/melange-release/melange_regression_fixtures.json").read_text())
    profiles = json.loads((SHARED / "data/melange-release/melange_profiles_llama2-7b_feb2024.json").read_text())
    with tempfile.TemporaryDirectory() as d:
        spec = _write_case(Path(d), fixtures, profiles, "V2", 32, "sliced")
        (Path(d) / "s.yaml").write_text(yaml.safe_dump(spec))
        best = None
        for _ in range(5):
            r = plan(Path(d) / "s.yaml", with_baselines=False).result
            if best is None or r.solve_s < best.solve_s:
                best = r
    return {"build_s": best.build_s, "solve_s": best.solve_s, "gap": best.gap, **best.size,
            "cost": round(best.objective, 4)}


def estimator_rate() -> float | None:
    try:
        from hetinfra.catalog.gpus import GPUS
        from hetinfra.catalog.models import MODELS
        from hetinfra.perf.estimator import estimate
    except ImportError:
        return None
    model, gpus = MODELS["llama-3.1-70b"], list(GPUS.values())
    t = time.perf_counter()
    n = 0
    for i in range(10_000):
        g = gpus[i % len(gpus)]
        estimate(model, g, tp=(1, 2, 4, 8)[i % 4], pp=1, input_tokens=100 + i % 4000, output_tokens=50 + i % 900,
                 ttft_ms=2000, tpot_ms=80)
        n += 1
    return time.perf_counter() - t


def main() -> None:
    print(f"python {sys.version.split()[0]}, hetinfra at {REPO}")
    print(f"import hetinfra.cli            {wall([sys.executable, '-c', 'import hetinfra.cli']):.3f} s (median of 5)")
    print(f"hetinfra --help                {wall([EXE, '--help']):.3f} s (target < 0.5 s)")
    for spec in sorted((REPO / "services").glob("*.yaml")):
        with tempfile.TemporaryDirectory() as d:
            # side by side, alternating, so machine load hits both alike; the template cache is off so
            # both pay the same template build
            runs = {"no-verify": [], "verify": []}  # verify last: its plan.json is read below
            for _ in range(3):
                for mode in runs:
                    t = time.perf_counter()
                    subprocess.run([EXE, "plan", str(spec), "--out", d] + (["--no-verify"] if mode == "no-verify" else []),
                                   check=True, capture_output=True, env={**os.environ, "HETINFRA_CACHE_DIR": "off"})
                    runs[mode].append(time.perf_counter() - t)
            rounds = json.loads((Path(d) / "plan.json").read_text())["fidelity"].get("rounds")
        v, n = statistics.median(runs["verify"]), statistics.median(runs["no-verify"])
        print(f"hetinfra plan {spec.name:<20} {v:.3f} s verified ({rounds} round(s)), {n:.3f} s --no-verify: "
              f"verifying costs {v - n:.3f} s (target < 2 s; with baselines and artifacts)")
    if (SHARED / "data/melange-release").exists():
        m = melange_v2_r32()
        print(f"melange V2 rate 32 sliced      build {m['build_s']:.3f} s, solve {m['solve_s']:.3f} s (target < 0.5 s), "
              f"{m['variables']} vars ({m['integer_variables']} int), {m['constraints']} cons, gap {m['gap']}, "
              f"cost ${m['cost']}/h")
    e = estimator_rate()
    if e is not None:
        print(f"10,000 estimates               {e:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
