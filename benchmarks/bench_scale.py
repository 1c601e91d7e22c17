"""Allocation ILP at Coral's scales (issue 4). Prints model size, build and solve time, gap.

    python benchmarks/bench_scale.py

extended: 6 models, 5 GPU kinds x {1,2,4,8}-GPU instances (20 configurations), 3 regions,
          up to 4 nodes per template. Target: gap <= 1% within 20 s in total.
core:     3 models, 3 GPU kinds x 4 sizes (12 configurations), 2 regions. Target: 2 s.
Offers are the embedded snapshot's real prices per GPU, scaled to the instance size, on one
custom cloud so every configuration exists in every region.
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


def write_case(d: Path, n_models: int, gpus: list[str], regions: list[str]) -> Path:
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    for r in regions:
        for g in gpus:
            for n in (1, 2, 4, 8):
                price = GPU_PRICE[g] * n * (1.0 + 0.03 * regions.index(r))
                rows.append(f"bench,{r},{g.lower()}-x{n},{g},{n},{MEM[g]},{8 * n},{32 * n},{price:.4f},")
    (d / "offers.csv").write_text("\n".join(rows) + "\n")
    models = [{"name": f"m{i}-{m.replace('.', '')}", "model": m, "source": f"org/{m}",
               "slo": {"ttft_ms": 3000, "tpot_ms": 150},
               "demand": {"rate_rps": 4 + 3 * i, "sizes": {"histogram": HIST}}} for i, m in enumerate(MODELS[:n_models])]
    spec = {"name": "bench", "models": models, "infrastructure": {"clouds": ["bench"]},
            "planning": {"mip_gap": 0.01, "time_limit_s": 20, "max_nodes_per_template": 4}, "offers": ["offers.csv"]}
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    return d / "s.yaml"


def run(label: str, n_models: int, gpus: list[str], regions: list[str]) -> None:
    from hetinfra.planner import plan

    with tempfile.TemporaryDirectory() as tmp:
        path = write_case(Path(tmp), n_models, gpus, regions)
        t = time.perf_counter()
        pr = plan(path, with_baselines=False)
        total = time.perf_counter() - t
    r = pr.result
    templates = len({u.template.id for u in pr.units.values()})
    print(f"{label:<9} models {n_models}, configs {4 * len(gpus)}, regions {len(regions)}: "
          f"templates {templates}, units {len(pr.units)}, vars {r.size['variables']} ({r.size['integer_variables']} int), "
          f"cons {r.size['constraints']}, build {r.build_s:.2f} s, solve {r.solve_s:.2f} s (incl. LP bound), "
          f"gap {100 * (r.gap or 0):.3f}%, status {r.status}, ${r.objective:.2f}/h, plan total {total:.2f} s")


def main() -> None:
    sys.path.insert(0, str(REPO))
    run("core", 3, ["L4", "A100-80GB", "H100"], ["r-east", "r-west"])
    run("extended", 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"])


if __name__ == "__main__":
    main()
