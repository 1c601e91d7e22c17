"""Issue 33's Mélange reference: with --no-verify the integer program gives Mélange's optima exactly
(tests/solver/test_melange_regression.py); verified, a plan on the same measured profile is never
below 0.95x that optimum (the measured-interval ceiling: a unit never runs past its measured rate x
1.05), and the mean-objective case that was "verified" at $17.07/h (0.53x) is not."""

from __future__ import annotations

import json

import pytest

from tests.conftest import shared_path
from tests.solver.test_melange_regression import _write_case


@pytest.fixture(scope="module")
def melange():
    fixtures = json.loads(shared_path("data", "melange-release", "melange_regression_fixtures.json").read_text())
    profiles = json.loads(shared_path("data", "melange-release", "melange_profiles_llama2-7b_feb2024.json").read_text())
    return fixtures, profiles


@pytest.mark.parametrize("case, rate, percentile", [("V1", 32, "mean"), ("V2", 32, "p99"), ("V1", 8, "p99")])
def test_a_verified_plan_is_never_below_095x_the_measured_optimum(tmp_path, melange, plan_json, case, rate, percentile):
    fixtures, profiles = melange
    spec = _write_case(tmp_path, fixtures, profiles, case, rate, "sliced")
    spec["models"][0]["slo"] = {"ttft_ms": 100000, "tpot_ms": 1000, "percentile": percentile}  # issue 33's loose case
    reference = fixtures["cases"][case]["expected"][str(rate)]["cost"]
    plan = plan_json(tmp_path, spec, "--no-baselines", verify=True)
    f = plan["fidelity"]
    assert f["met"] and f["confirmation"]["met"]
    assert plan["cost_usd_per_hour"] >= 0.95 * reference - 1e-9, (plan["cost_usd_per_hour"], reference)
    # every unit at most the top of its measured interval at the promised load (tests/conftest.py
    # check_ceilings asserts it on every plan the CLI builds; here the figure itself)
    assert all(src.startswith("profile:") for t in plan["templates"] for src in t["sources"].values())
    assert all(t["derate"] <= 1.05 for t in plan["templates"])
    # where the loose objective leaves slack, the ceiling, not the simulation, ends the trim, and the
    # plan says so: each of the last pass's removals past a ceiling is recorded with its unit's figure
    if percentile == "mean":
        held = [c for c in f["trim"]["last_pass"] if c["refused_by"] == "ceiling"]
        assert held and all(c["ratio"] > 1.0 and c["basis"] == "measured interval" for c in held), f["trim"]
        assert f["trim"]["checked_removals"] == len(f["trim"]["last_pass"])
