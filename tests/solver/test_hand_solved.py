"""Tiny instances solved by hand, asserted exactly (allocation, routing, demand scale).

Two GPU kinds on a custom cloud, with profile rates (req/s per instance):

            $/h   short (in<=100,out<=100)   long (in<=2000,out<=500)
    X       1.0          10                       0.5
    Y       2.0          12                       4.0

Demand: short 10 req/s, long 4 req/s.
- min_cost: X-only needs 10/10 + 4/0.5 = 9 instances ($9); Y-only 10/12 + 4/4 = 1.83 -> 2 ($4);
  1 X (all short, load 1.0) + 1 Y (all long, load 1.0) = $3, and nothing cheaper is feasible
  (1 Y alone, 2 X, 3 X all fall short). So the unique optimum mixes the two kinds.
- max_throughput at $5/h: X has the comparative advantage on short requests (20x vs 3x), so
  1 X + 2 Y with X full of short: (10 s - 10)/12 + s <= 2  ->  s = 34/22 = 17/11.
  (3 X + 1 Y reaches 11/9, 5 X 5/9.)
"""

from __future__ import annotations

import pytest

from tests.conftest import write_offers, write_profiles

SLO = {"ttft_ms": 1000, "tpot_ms": 100}


def _spec(tmp_path, **over) -> dict:
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "lab", "region": "r1", "instance_type": "x-node", "gpu": "X", "gpu_count": 1, "gpu_memory_gb": 24,
         "vcpus": 8, "memory_gb": 32, "price_per_hour": 1.0},
        {"cloud": "lab", "region": "r1", "instance_type": "y-node", "gpu": "Y", "gpu_count": 1, "gpu_memory_gb": 80,
         "vcpus": 8, "memory_gb": 64, "price_per_hour": 2.0}])
    rows = []
    for gpu, short, long in (("X", 10, 0.5), ("Y", 12, 4)):
        rows.append({"model": "toy", "gpu": gpu, "tp": 1, "pp": 1, "input_tokens": 100, "output_tokens": 100,
                     "ttft_slo_ms": 1000, "tpot_slo_ms": 100, "max_rps": short})
        rows.append({"model": "toy", "gpu": gpu, "tp": 1, "pp": 1, "input_tokens": 2000, "output_tokens": 500,
                     "ttft_slo_ms": 1000, "tpot_slo_ms": 100, "max_rps": long})
    write_profiles(tmp_path / "profiles.csv", rows)
    spec = {
        "name": "toy",
        "models": [{"name": "toy", "architecture": {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8,
                                                    "head_dim": 128, "params": "8B", "max_context": 8192},
                    "source": "org/toy", "slo": SLO,
                    "demand": {"rate_rps": 14, "sizes": {"classes": [
                        {"name": "short", "input_tokens": 100, "output_tokens": 100, "share": 10},
                        {"name": "long", "input_tokens": 2000, "output_tokens": 500, "share": 4}]}}}],
        "infrastructure": {"clouds": ["lab"]},
        "planning": {"mip_gap": 0},
        "profiles": ["profiles.csv"], "offers": ["offers.csv"],
    }
    spec.update(over)
    return spec


def test_min_cost_mixes_two_gpu_types(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path))
    assert plan["cost_usd_per_hour"] == pytest.approx(3.0)
    assert {(a["gpu"], a["count"]) for a in plan["allocations"]} == {("X", 1), ("Y", 1)}
    by_unit = {a["unit"]: a["gpu"] for a in plan["allocations"]}
    short = plan["routing"]["toy"]["short"]
    long = plan["routing"]["toy"]["long"]
    assert [(by_unit[r["unit"]], r["share"]) for r in short] == [("X", 1.0)]
    assert [(by_unit[r["unit"]], r["share"]) for r in long] == [("Y", 1.0)]
    assert all(a["utilization"] == pytest.approx(1.0) for a in plan["allocations"])
    base = {b["gpu"]: (b["instances"], b["cost_usd_per_hour"]) for b in plan["baselines"]}
    assert base == {"X": (9, 9.0), "Y": (2, 4.0)}
    assert {b["gpu"]: b["savings_pct"] for b in plan["baselines"]} == {"X": pytest.approx(66.67), "Y": 25.0}
    assert plan["demand_scale"] == 1.0


def test_headroom_adds_capacity(tmp_path, plan_json):
    # With 20% headroom each instance carries 0.8 of its capacity: short needs 1.25 X-loads.
    # Cheapest: 1 X (0.8 of short = 8 req/s) + 2 Y (2 req/s short = 0.167, long 1.0 -> 1.167 <= 1.6) = $5
    spec = _spec(tmp_path, planning={"mip_gap": 0, "headroom": 0.2})
    plan = plan_json(tmp_path, spec)
    assert plan["cost_usd_per_hour"] == pytest.approx(5.0)
    assert max(a["utilization"] for a in plan["allocations"]) <= 0.8 + 1e-9


def test_max_throughput_demand_scale(tmp_path, plan_json):
    spec = _spec(tmp_path, budget_usd_per_hour=5, planning={"objective": "max_throughput", "mip_gap": 0})
    plan = plan_json(tmp_path, spec)
    assert plan["demand_scale"] == pytest.approx(17 / 11, abs=1e-5)
    assert {(a["gpu"], a["count"]) for a in plan["allocations"]} == {("X", 1), ("Y", 2)}
    assert plan["cost_usd_per_hour"] == pytest.approx(5.0)
    assert plan["baselines"] == []


def test_availability_cap_changes_the_mix(tmp_path, plan_json):
    # With Y capped at 0 GPUs only X can serve: 9 X.
    spec = _spec(tmp_path)
    spec["infrastructure"]["availability"] = [{"cloud": "lab", "region": "r1", "gpu": "Y", "max_gpus": 0}]
    plan = plan_json(tmp_path, spec)
    assert {(a["gpu"], a["count"]) for a in plan["allocations"]} == {("X", 9)}


def test_budget_below_optimum_is_infeasible_with_hint(tmp_path, run_cli):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path, budget_usd_per_hour=2.5)))
    code, out, err = run_cli("plan", str(path), "--no-verify")
    assert code == 3
    assert "budget $2.5/h is below the cheapest feasible plan, $3.00/h" in err
    assert "Traceback" not in err + out


def test_caps_too_small_names_the_cap(tmp_path, run_cli):
    """The cap that holds GPUs is blamed, not the empty one (Y at 0: none there), though 1 Y would be
    the cheaper fix; an empty cap is blamed only when no relaxation of the others serves (issue 36)."""
    import json

    import yaml

    def diagnosis(caps: dict[str, int]) -> tuple[str, list]:
        spec = _spec(tmp_path)
        spec["infrastructure"]["availability"] = [{"cloud": "lab", "region": "r1", "gpu": g, "max_gpus": n}
                                                  for g, n in caps.items()]
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(spec))
        code, out, err = run_cli("plan", str(path), "--json", "--no-verify")
        assert code == 3, err
        return err, json.loads(out)["error"]["relax"]

    err, relax = diagnosis({"Y": 0, "X": 5})
    assert "lab/r1 X: cap 5 GPUs, needs 9" in err and "Y" not in err.split("hint")[0]
    assert relax == [{"availability": {"cloud": "lab", "region": "r1", "gpu": "X", "max_gpus": 5, "needed": 9}}]
    err, relax = diagnosis({"Y": 0, "X": 0})  # only empty caps: the cheapest of them is named
    assert "lab/r1 X: cap 0 GPUs, needs 1; lab/r1 Y: cap 0 GPUs, needs 1" in err


def test_spot_true_plans_on_spot_prices(tmp_path, plan_json):
    # Y also offered as spot at $1.20: spot makes 2 Y (all demand, 1.83 load) cost $2.40 < $3.
    spec = _spec(tmp_path)
    text = (tmp_path / "offers.csv").read_text().replace("y-node,Y,1,80,8,64,2.0,", "y-node,Y,1,80,8,64,2.0,1.2")
    (tmp_path / "offers.csv").write_text(text)
    on_demand = plan_json(tmp_path, spec)
    assert on_demand["cost_usd_per_hour"] == pytest.approx(3.0)  # spot: false ignores spot prices
    spec["infrastructure"]["spot"] = True
    plan = plan_json(tmp_path, spec)
    assert plan["cost_usd_per_hour"] == pytest.approx(2.2)  # 1 X on-demand ($1) + 1 Y spot ($1.2)
    assert {(a["gpu"], a["spot"], a["count"]) for a in plan["allocations"]} == {("X", False, 1), ("Y", True, 1)}
