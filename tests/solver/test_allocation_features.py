"""Hand-solved instances for the multi-model, multi-region features (issue 4), asserted exactly.

Every instance uses custom-cloud offers and profile rates so the optimum can be worked out by hand.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import write_offers, write_profiles

ARCH = {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "params": "8B",
        "max_context": 8192}
SLO = {"ttft_ms": 1000, "tpot_ms": 100}


def offer(name, gpu, price, region="r1", gpus=1, spot=""):
    return {"cloud": "lab", "region": region, "instance_type": name, "gpu": gpu, "gpu_count": gpus,
            "gpu_memory_gb": 80, "vcpus": 8, "memory_gb": 64, "price_per_hour": price, "spot_price_per_hour": spot}


def prof(model, gpu, rps, tp=1):
    return {"model": model, "gpu": gpu, "tp": tp, "pp": 1, "input_tokens": 1000, "output_tokens": 1000,
            "ttft_slo_ms": 1000, "tpot_slo_ms": 100, "max_rps": rps}


def model(name, rate, **demand):
    return {"name": name, "architecture": ARCH, "source": f"org/{name}", "slo": SLO,
            "demand": {"rate_rps": rate, "sizes": {"classes": [
                {"name": "c", "input_tokens": 500, "output_tokens": 200, "share": 1}]}, **demand}}


def spec(tmp_path, models, offers, profiles, **extra) -> dict:
    write_offers(tmp_path / "offers.csv", offers)
    write_profiles(tmp_path / "profiles.csv", profiles)
    doc = {"name": "t", "models": models, "infrastructure": {"clouds": ["lab"]},
           "planning": {"mip_gap": 0}, "profiles": ["profiles.csv"], "offers": ["offers.csv"]}
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            doc[k] = {**doc[k], **v}
        else:
            doc[k] = v
    return doc


def counts(plan) -> dict[tuple[str, str, str], int]:
    return {(a["model"], a["instance_type"], a["region"]): a["count"] for a in plan["allocations"]}


# (a) Coral's Fig. 2 situation --------------------------------------------------------------------
# GPU P is scarce (1 GPU). Model a: P 10 req/s for $1, Q 5 req/s for $1.5 -> alone it takes P.
# Model b runs only on P. Planned one model at a time, a grabs P and b cannot be served; the
# joint ILP gives P to b and serves a with 2 Q: $1 + $3 = $4.
def _contention(tmp_path, models):
    return spec(tmp_path, models, [offer("p-node", "P", 1.0), offer("q-node", "Q", 1.5)],
                [prof("a", "P", 10), prof("a", "Q", 5), prof("b", "P", 10)],
                infrastructure={"clouds": ["lab"], "availability": [
                    {"cloud": "lab", "region": "r1", "gpu": "P", "max_gpus": 1}]})


def test_joint_allocation_beats_per_model_greedy(tmp_path, plan_json):
    alone = plan_json(tmp_path, _contention(tmp_path, [model("a", 10)]), "--no-baselines")
    assert counts(alone) == {("a", "p-node", "r1"): 1}  # greedy choice for a
    joint = plan_json(tmp_path, _contention(tmp_path, [model("a", 10), model("b", 10)]), "--no-baselines")
    assert counts(joint) == {("a", "q-node", "r1"): 2, ("b", "p-node", "r1"): 1}
    assert joint["cost_usd_per_hour"] == pytest.approx(4.0)
    assert joint["breakdown"]["by_model"] == {"a": {"cost_usd_per_hour": 3.0, "gpus": 2, "instances": 2},
                                              "b": {"cost_usd_per_hour": 1.0, "gpus": 1, "instances": 1}}


# (c) churn penalty against the running deployment ------------------------------------------------
# Running: 1 x-node ($1, 10 req/s) serving 10 req/s. A new y-node serves the same. With
# churn_penalty_hours 0.5 paid back over churn_payback_hours P, switching costs y + 0.5 y / P an hour: keep x
# unless that is below 1. y = 0.9 saves 10% and pays its start-up back in 4.5 hours: kept at P = 1 (the implicit
# value before 0.1.0) and at the default P = 4, taken at P = 24; y = 0.8 (20%, 2 hours) is taken at the default.
@pytest.mark.parametrize("y_price,payback,keeps", [(0.9, 1, True), (0.9, None, True), (0.9, 24, False),
                                                   (0.8, None, False), (0.3, None, False)])
def test_churn_penalty_keeps_or_switches(tmp_path, run_cli, y_price, payback, keeps):
    first = tmp_path / "first"
    first.mkdir()
    doc = spec(first, [model("a", 10)], [offer("x-node", "X", 1.0)], [prof("a", "X", 10)])
    (first / "s.yaml").write_text(yaml.safe_dump(doc))
    assert run_cli("plan", str(first / "s.yaml"), "--out", str(first / "out"), "--no-verify")[0] == 0

    doc = spec(tmp_path, [model("a", 10)], [offer("x-node", "X", 1.0), offer("y-node", "Y", y_price)],
               [prof("a", "X", 10), prof("a", "Y", 10)],
               planning={"churn_penalty_hours": 0.5, **({"churn_payback_hours": payback} if payback else {})})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = run_cli("plan", str(tmp_path / "s.yaml"), "--json", "--state", str(first / "out"), "--no-verify")
    assert code == 0, err
    plan = json.loads(out)
    if keeps:
        assert counts(plan) == {("a", "x-node", "r1"): 1}
        assert plan["churn"]["started"] == {} and plan["churn"]["stopped"] == {}
    else:
        assert counts(plan) == {("a", "y-node", "r1"): 1}
        assert plan["cost_usd_per_hour"] == pytest.approx(y_price)
        assert list(plan["churn"]["started"].values()) == [1] and list(plan["churn"]["stopped"].values()) == [1]


# (d) SageServe's locality epsilon ---------------------------------------------------------------
# Same GPU in r1 ($1) and r2 ($2), 10 req/s per instance, demand 10 req/s half from each region.
# Without locality one r1 instance serves all ($1). With epsilon 0.5, r2 must serve >= 2.5 req/s:
# 1 instance in r2 plus 1 in r1 ($3).
@pytest.mark.parametrize("eps,expected,cost", [
    (0.0, {("a", "n", "r1"): 1}, 1.0),
    (0.5, {("a", "n", "r1"): 1, ("a", "n", "r2"): 1}, 3.0)])
def test_locality_forces_capacity_into_the_local_region(tmp_path, plan_json, eps, expected, cost):
    doc = spec(tmp_path, [model("a", 10, origins={"r1": 1, "r2": 1})],
               [offer("n", "G", 1.0, "r1"), offer("n", "G", 2.0, "r2")], [prof("a", "G", 10)],
               planning={"locality": eps})
    plan = plan_json(tmp_path, doc, "--no-baselines")
    assert counts(plan) == expected and plan["cost_usd_per_hour"] == pytest.approx(cost)
    if eps:
        r2 = [r for r in plan["routing"]["a"]["c"] if r["unit"].endswith("|r2|ondemand")]
        assert r2[0]["rps"] >= 2.5 - 1e-9


# (e) budget-capped max_throughput chooses TP where it raises throughput -----------------------
# A 2-GPU instance ($2): two TP=1 engines serve 2 x 3 = 6 req/s, one TP=2 engine 8 req/s (more KV
# room per sequence). Budget $2 buys one instance; demand 1 req/s -> scale 8 with TP=2.
def test_max_throughput_picks_tp2_when_it_serves_more(tmp_path, plan_json):
    doc = spec(tmp_path, [model("a", 1)], [offer("duo", "G", 2.0, gpus=2)],
               [prof("a", "G", 3, tp=1), prof("a", "G", 8, tp=2)],
               budget_usd_per_hour=2, planning={"objective": "max_throughput"})
    plan = plan_json(tmp_path, doc)
    (a,) = plan["allocations"]
    assert (a["tp"], a["engines_per_instance"], a["count"]) == (2, 1, 1)
    assert plan["demand_scale"] == pytest.approx(8.0)


def test_spot_fraction_caps_spot_gpus(tmp_path, plan_json):
    # Spot $0.5 vs on-demand $1, 10 req/s each, demand 40 req/s -> 4 instances; at most half on spot.
    doc = spec(tmp_path, [{**model("a", 40), "max_spot_fraction": 0.5}], [offer("n", "G", 1.0, spot=0.5)],
               [prof("a", "G", 10)], infrastructure={"clouds": ["lab"], "spot": True})
    plan = plan_json(tmp_path, doc, "--no-baselines")
    assert {(a["spot"], a["count"]) for a in plan["allocations"]} == {(True, 2), (False, 2)}
    assert plan["cost_usd_per_hour"] == pytest.approx(3.0)


def test_unmet_demand_when_allowed(tmp_path, plan_json):
    # Only 1 GPU allowed (10 req/s) for 15 req/s of demand: 5 req/s unmet instead of infeasible.
    doc = spec(tmp_path, [model("a", 15)], [offer("n", "G", 1.0)], [prof("a", "G", 10)],
               infrastructure={"clouds": ["lab"], "availability": [
                   {"cloud": "lab", "region": "r1", "gpu": "G", "max_gpus": 1}]},
               planning={"allow_unmet": True, "unmet_penalty_usd_per_rps_hour": 50})
    plan = plan_json(tmp_path, doc, "--no-baselines")
    assert plan["unmet_rps"] == {"a/c": pytest.approx(5.0)}
    assert plan["cost_usd_per_hour"] == pytest.approx(1.0)


def test_lp_bound_is_reported_and_below_optimum(tmp_path, plan_json):
    # a = 12 req/s must use Q (P is b's): LP 12/5 x 1.5 + 1 = 4.6; integers 3 x 1.5 + 1 = 5.5.
    plan = plan_json(tmp_path, _contention(tmp_path, [model("a", 12), model("b", 10)]), "--no-baselines")
    assert plan["solver"]["lp_bound"] == pytest.approx(4.6)
    assert plan["cost_usd_per_hour"] == pytest.approx(5.5)
