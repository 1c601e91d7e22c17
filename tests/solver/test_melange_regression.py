"""Reproduce the released Mélange solver's optima (shared regression fixtures) through the CLI.

Each case writes a spec, a profiles CSV and an offers CSV built from the shared JSON and runs
``hetinfra plan --json``; with ``routing: sliced, slice_factor: 8`` the allocation and cost must
equal the reference exactly, and fractional routing must never cost more.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import shared_path, write_offers, write_profiles

EDGES = [0, 25, 100, 250, 500, 1000, 2000]
SLO = {"ttft_ms": 10000, "tpot_ms": 1000}
RATES = [1, 2, 4, 8, 16, 32]


@pytest.fixture(scope="module")
def melange():
    fixtures = json.loads(shared_path("data", "melange-release", "melange_regression_fixtures.json").read_text())
    profiles = json.loads(shared_path("data", "melange-release", "melange_profiles_llama2-7b_feb2024.json").read_text())
    return fixtures, profiles


def _write_case(tmp_path, fixtures, profiles, case: str, rate: float, routing: str) -> dict:
    prices = fixtures["solver_settings"]["cost_per_hour"]
    gpus = fixtures["solver_settings"]["gpus"]
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "lab", "region": "rack-1", "instance_type": f"{g.lower()}-node", "gpu": g, "gpu_count": 1,
         "gpu_memory_gb": 80, "vcpus": 8, "memory_gb": 64, "price_per_hour": prices[g]} for g in gpus])
    rows = []
    for g in gpus:
        table = profiles["tputs"][g]
        for i in range(6):  # first 6 input rows, 6 output columns (fixtures' profile_rows_used)
            for j in range(6):
                rows.append({"model": "llama-2-7b", "gpu": g, "tp": 1, "pp": 1, "input_tokens": EDGES[i + 1],
                             "output_tokens": EDGES[j + 1], "ttft_slo_ms": SLO["ttft_ms"], "tpot_slo_ms": SLO["tpot_ms"],
                             "max_rps": table[i][j]})
    write_profiles(tmp_path / "profiles.csv", rows)
    return {
        "name": "melange",
        "models": [{"name": "llama7b", "model": "llama-2-7b", "source": "meta-llama/Llama-2-7b-hf", "slo": SLO,
                    "demand": {"rate_rps": rate, "sizes": {"histogram": {
                        "input_edges": EDGES, "output_edges": EDGES,
                        "weights": fixtures["cases"][case]["workload_distribution"]}}}}],
        "infrastructure": {"clouds": ["lab"], "gpus": gpus},
        "planning": {"objective": "min_cost", "routing": routing, "slice_factor": 8, "mip_gap": 0},
        "profiles": ["profiles.csv"],
        "offers": ["offers.csv"],
    }


def _alloc(plan: dict) -> dict[str, int]:
    c = Counter()
    for a in plan["allocations"]:
        c[a["gpu"]] += a["count"]
    return dict(c)


@pytest.mark.parametrize("case", ["V1", "V2"])
@pytest.mark.parametrize("rate", RATES)
def test_sliced_reproduces_reference_and_fractional_is_no_dearer(tmp_path, melange, plan_json, case, rate):
    fixtures, profiles = melange
    expected = fixtures["cases"][case]["expected"][str(rate)]
    sliced = plan_json(tmp_path, _write_case(tmp_path, fixtures, profiles, case, rate, "sliced"), "--no-baselines")
    assert sliced["solver"]["status"] == "optimal"
    assert sliced["cost_usd_per_hour"] == pytest.approx(expected["cost"], abs=1e-6)
    assert _alloc(sliced) == expected["alloc"]
    # every number came from the profile, none from the estimator
    assert all(src.startswith("profile:") for t in sliced["templates"] for src in t["sources"].values())
    fractional = plan_json(tmp_path, _write_case(tmp_path, fixtures, profiles, case, rate, "fractional"), "--no-baselines")
    assert fractional["cost_usd_per_hour"] <= expected["cost"] + 1e-9


@pytest.mark.parametrize("case", ["V1", "V2"])
def test_single_type_baselines_at_rate_32(tmp_path, melange, plan_json, case):
    fixtures, profiles = melange
    plan = plan_json(tmp_path, _write_case(tmp_path, fixtures, profiles, case, 32, "sliced"))
    got = {b["gpu"]: b["instances"] for b in plan["baselines"] if b["feasible"]}
    assert got == fixtures["cases"][case]["single_type_rate32"]
    prices = fixtures["solver_settings"]["cost_per_hour"]
    for b in plan["baselines"]:
        assert b["cost_usd_per_hour"] == pytest.approx(prices[b["gpu"]] * b["instances"], abs=1e-6)
        assert b["savings_usd_per_hour"] == pytest.approx(b["cost_usd_per_hour"] - plan["cost_usd_per_hour"], abs=1e-3)
