"""Issue 16's 8 models x 12 regions with shared caps and locality 0.5 (exit 3 before the
decomposition; benchmarks/bench_scale.py --fleet's "8 x 12 caps+locality" row): it plans, keeps every
cap and each origin region's local share, and the linked models are one block within the gap."""

from __future__ import annotations

import pytest

PRICE = {"T4": 0.53, "L4": 0.80, "A10G": 1.01, "A10": 0.90, "L40S": 1.86, "V100": 3.06, "V100-32GB": 3.40,
         "A100": 3.00, "A100-80GB": 3.67, "H100": 6.88, "H200": 8.00}
MEM = {"T4": 16, "L4": 24, "A10G": 24, "A10": 24, "L40S": 48, "V100": 16, "V100-32GB": 32, "A100": 40,
       "A100-80GB": 80, "H100": 80, "H200": 141}
REGIONS = [f"r{i:02d}" for i in range(12)]
CAPPED = ("L4", "A10G", "L40S", "H100")
MODELS = ["llama-3.1-8b", "mistral-7b", "phi-4", "qwen3-32b", "llama-3.1-70b", "mixtral-8x7b"]
HIST = {"input_edges": [0, 250, 1000, 4000], "output_edges": [0, 100, 500, 1000],
        "weights": [[0.2, 0.25, 0.05], [0.1, 0.2, 0.05], [0.05, 0.08, 0.02]]}


def fleet_spec(tmp_path, n_models=8, mip_gap=0.01):
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    rows += [f"bench,{r},{g.lower()}-x{n},{g},{n},{MEM[g]},{8 * n},{32 * n},{p * n * (1.0 + 0.01 * i):.4f},"
             for i, r in enumerate(REGIONS) for g, p in PRICE.items() for n in (1, 2, 4, 8)]
    (tmp_path / "offers.csv").write_text("\n".join(rows) + "\n")
    models = [{"name": f"m{i:02d}", "model": MODELS[i % 6], "source": f"org/{MODELS[i % 6]}",
               "slo": {"ttft_ms": 3000, "tpot_ms": 150},
               "demand": {"rate_rps": 2 + (i * 7) % 11, "sizes": {"histogram": HIST},
                          "origins": {REGIONS[(i + j) % 12]: s for j, s in enumerate((0.5, 0.3, 0.2))}}}
              for i in range(n_models)]
    return {"name": "fleet", "models": models, "offers": ["offers.csv"],
            "infrastructure": {"clouds": ["bench"], "regions": REGIONS,
                               "availability": [{"cloud": "bench", "region": r, "gpu": g, "max_gpus": 16}
                                                for r in REGIONS for g in CAPPED]},
            "planning": {"mip_gap": mip_gap, "max_nodes_per_template": 4, "locality": 0.5}}


@pytest.mark.heavy
def test_eight_models_twelve_regions_caps_and_locality(tmp_path, plan_json):
    # gap 5%: proving 1% took HiGHS twice as long for the same plan here (issue 16's 1% is
    # benchmarks/bench_scale.py --fleet's row); the claims below hold at any gap
    spec = fleet_spec(tmp_path, mip_gap=0.05)
    plan = plan_json(tmp_path, spec, "--no-baselines")
    assert plan["status"] == "optimal" and plan["solver"]["gap"] <= 0.05 + 1e-9
    assert not plan["solver"]["safety_stop"]
    gpus: dict = {}
    for a in plan["allocations"]:
        key = (a["region"], a["gpu"])
        gpus[key] = gpus.get(key, 0) + a["gpus_per_instance"] * a["instances"]
    assert all(v <= 16 for (r, g), v in gpus.items() if g in CAPPED)
    for m in spec["models"]:
        rate = m["demand"]["rate_rps"]
        for region, share in m["demand"]["origins"].items():
            local = sum(a["routed_rps"] for a in plan["allocations"] if a["model"] == m["name"] and a["region"] == region)
            assert local >= 0.5 * share * rate - 1e-6, (m["name"], region)
    # the caps are shared: the models form one linked component, proven within the gap
    (blk,) = [b for b in plan["solver"]["blocks"] if len(b["models"]) > 1]
    assert blk["gap"] <= 0.05 + 1e-9 and blk["bound"] == pytest.approx(plan["solver"]["bound"])
