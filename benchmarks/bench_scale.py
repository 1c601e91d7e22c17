"""Allocation ILP at Coral's scales (issue 4). Prints model size, build and solve time, gap.

    python benchmarks/bench_scale.py

extended: 6 models, 5 GPU kinds x {1,2,4,8}-GPU instances (20 configurations), 3 regions,
          up to 4 nodes per template. Target: gap <= 1% within 20 s in total.
core:     3 models, 3 GPU kinds x 4 sizes (12 configurations), 2 regions. Target: 2 s.
mixed:    extended with planning.allow_mixed_pipelines (mixed-GPU pipeline templates too).
Offers are the embedded snapshot's real prices per GPU, scaled to the instance size, on one
cloud with made-up regions so every configuration exists in every region. Each row also shows
the library build (cold, then from the template cache) and the same ILP solved without the
warm start ("cold solve").
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
GPU_PRICE = {"L4": 0.80, "A10G": 1.01, "L40S": 1.86, "A100-80GB": 3.67, "H100": 6.88}  # $/GPU-h, snapshot-like
MEM = {"L4": 24, "A10G": 24, "L40S": 48, "A100-80GB": 80, "H100": 80}
MODELS = ["llama-3.1-8b", "mistral-7b", "phi-4", "qwen3-32b", "llama-3.1-70b", "mixtral-8x7b"]
HIST = {"input_edges": [0, 250, 1000, 4000], "output_edges": [0, 100, 500, 1000],
        "weights": [[0.2, 0.25, 0.05], [0.1, 0.2, 0.05], [0.05, 0.08, 0.02]]}


def write_case(d: Path, n_models: int, gpus: list[str], regions: list[str], mixed: bool = False) -> Path:
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    for r in regions:
        for g in gpus:
            for n in (1, 2, 4, 8):
                price = GPU_PRICE[g] * n * (1.0 + 0.03 * regions.index(r))
                rows.append(f"{'aws' if mixed else 'bench'},{r},{g.lower()}-x{n},{g},{n},{MEM[g]},{8 * n},{32 * n},{price:.4f},")
    (d / "offers.csv").write_text("\n".join(rows) + "\n")
    models = [{"name": f"m{i}-{m.replace('.', '')}", "model": m, "source": f"org/{m}",
               "slo": {"ttft_ms": 3000, "tpot_ms": 150},
               "demand": {"rate_rps": 4 + 3 * i, "sizes": {"histogram": HIST}}} for i, m in enumerate(MODELS[:n_models])]
    spec = {"name": "bench", "models": models,
            "infrastructure": {"clouds": ["aws" if mixed else "bench"], "regions": regions},
            "planning": {"mip_gap": 0.01, "time_limit_s": 20, "max_nodes_per_template": 4,
                         "allow_mixed_pipelines": mixed}, "offers": ["offers.csv"]}
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    return d / "s.yaml"


def run(label: str, n_models: int, gpus: list[str], regions: list[str], mixed: bool = False) -> None:
    import os

    from hetinfra.plan.inputs import resolve
    from hetinfra.perf.model import PerformanceModel
    from hetinfra.plan.planner import plan
    from hetinfra.solver.solve import solve
    from hetinfra.spec.load import load_spec
    from hetinfra.plan.template_cache import TemplateCache
    from hetinfra.plan.templates import build_units

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HETINFRA_CACHE_DIR"] = str(Path(tmp) / "cache")
        path = write_case(Path(tmp), n_models, gpus, regions, mixed)
        spec, text, locate = load_spec(path)
        inputs = resolve(spec, path, text, None, locate)
        cache = TemplateCache(Path(tmp) / "cache")
        t = time.perf_counter()
        units, _ = build_units(inputs, PerformanceModel(inputs.profiles), cache)
        lib_cold = time.perf_counter() - t
        t = time.perf_counter()
        build_units(inputs, PerformanceModel(inputs.profiles), cache)
        lib_cached = time.perf_counter() - t
        t = time.perf_counter()
        pr = plan(path, with_baselines=False)  # the library comes from the cache now
        total = time.perf_counter() - t
    r = pr.result
    cold = solve(pr.problem, time_limit_s=20, mip_gap=0.01, warm=False)
    n_mixed = sum(1 for u in units if u.template.mixed)
    chosen = sum(1 for u in r.n if pr.units[u].template.mixed)
    print(f"{label:<9} models {n_models}, configs {4 * len(gpus)}, regions {len(regions)}: "
          f"library {len({u.template.id for u in units})} templates / {len(units)} units"
          + (f" ({n_mixed} mixed)" if mixed else "") + f" in {lib_cold:.2f} s, cached {lib_cached:.3f} s; "
          f"after pruning {len(pr.units)} units, vars {r.size['variables']} ({r.size['integer_variables']} int), "
          f"cons {r.size['constraints']}; build {r.build_s:.2f} s, solve {r.solve_s:.2f} s "
          f"(warm start: {r.warm_start}), gap {100 * (r.gap or 0):.3f}%, {r.status}, ${r.objective:.2f}/h"
          + (f", {chosen} mixed unit(s) chosen" if mixed else "")
          + f"; plan total {total:.2f} s | cold solve {cold.solve_s:.2f} s, gap {100 * (cold.gap or 0):.3f}%, "
          f"{cold.status}, ${cold.objective:.2f}/h")


def main() -> None:
    sys.path.insert(0, str(REPO))
    run("core", 3, ["L4", "A100-80GB", "H100"], ["r-east", "r-west"])
    run("extended", 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"])
    run("mixed", 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"], mixed=True)


if __name__ == "__main__":
    main()
