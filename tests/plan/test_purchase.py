"""Purchase options through `hetinfra plan`: a committed base and on-demand top-ups (SageServe),
asserted against costs computed by hand.

One instance type on a custom cloud, profiled at 1 req/s per instance: on demand $1.00/h,
1-year committed $0.60/h (break-even: 60% utilisation), 3-year committed $0.40/h. 4 req/s at the peak.

- flat: 4 committed 1y = $2.40/h against 4 on demand = $4.00/h;
- profile 0.25/0.25/0.25/1 (needs 1, 1, 1, 4): 1 committed + 3 on demand in the last quarter of the
  hours = 0.60 + 3/4 = $1.35/h, against $1.75/h all on demand;
- profile 0.25/0/0/1 (needs 1, 0, 0, 4, spiky): all on demand, 5/4 = $1.25/h (a base would cost $1.35/h);
- a 3-year term over a 12-month horizon costs 3 x 0.40 = $1.20 per planned hour: never chosen;
  over 36 months $0.40/h: chosen.
"""

from __future__ import annotations

import pytest

from hetinfra.document import Plan
from tests.conftest import write_offers, write_profiles

ARCH = {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "params": "8B",
        "max_context": 8192}


def _spec(tmp_path, profile=None, terms=("on_demand", "committed_1y"), **planning) -> dict:
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "lab", "region": "r1", "instance_type": "x-node", "gpu": "X", "gpu_count": 1, "gpu_memory_gb": 80,
         "vcpus": 8, "memory_gb": 64, "price_per_hour": 1.0, "committed_1y_price_per_hour": 0.6,
         "committed_3y_price_per_hour": 0.4}])
    write_profiles(tmp_path / "profiles.csv", [
        {"model": "toy", "gpu": "X", "tp": 1, "pp": 1, "input_tokens": 500, "output_tokens": 200,
         "ttft_slo_ms": 1000, "tpot_slo_ms": 100, "max_rps": 1.0}])
    demand = {"rate_rps": 4, "sizes": {"classes": [{"name": "w", "input_tokens": 500, "output_tokens": 200,
                                                    "share": 1}]}}
    if profile is not None:
        demand["profile"] = list(profile)
    return {
        "name": "toy",
        "models": [{"name": "toy", "architecture": ARCH, "source": "org/toy", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
                    "demand": demand}],
        "infrastructure": {"clouds": ["lab"], **({"purchase_terms": list(terms)} if terms else {})},
        "planning": {"mip_gap": 0, **planning},
        "profiles": ["profiles.csv"], "offers": ["offers.csv"],
    }


def _by_purchase(plan) -> dict:
    return {a["purchase"]: a for a in plan["allocations"]}


def test_flat_load_commits_everything(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path))
    [a] = plan["allocations"]
    assert (a["purchase"], a["count"], a["spot"]) == ("committed_1y", 4, False)
    assert plan["cost_usd_per_hour"] == pytest.approx(2.4)
    p = plan["purchase"]
    assert p["committed_cost_usd_per_hour"] == pytest.approx(2.4) and p["top_up_cost_usd_per_hour"] == 0
    assert p["without_committed_usd_per_hour"] == pytest.approx(4.0)
    [b] = p["break_even"]
    assert b["chosen"] and b["break_even_utilization"] == pytest.approx(0.6) and b["utilization"] == pytest.approx(1.0)
    assert a["deployment_unit"].endswith("-c1y")


def test_base_load_buys_a_committed_base_and_an_on_demand_top(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path, profile=[0.25, 0.25, 0.25, 1]))
    both = _by_purchase(plan)
    assert set(both) == {"committed_1y", "on_demand"}
    base, top = both["committed_1y"], both["on_demand"]
    assert base["count"] == 1 and "counts_by_period" not in base
    assert top["count"] == 3 and top["counts_by_period"] == [0, 0, 0, 3]
    assert base["cost_usd_per_hour"] == pytest.approx(0.6) and top["cost_usd_per_hour"] == pytest.approx(0.75)
    assert plan["cost_usd_per_hour"] == pytest.approx(1.35)
    p = plan["purchase"]
    assert p["periods"] == 4 and p["levels"] == 2
    assert p["cost_by_period"] == pytest.approx([0.6, 0.6, 0.6, 3.6]) and p["peak_cost_usd_per_hour"] == pytest.approx(3.6)
    assert p["without_committed_usd_per_hour"] == pytest.approx(1.75)
    # the fleet serves the peak: routing and the models' rate are the last period's 4 req/s
    [m] = plan["models"]
    assert m["rate_rps"] == 4 and m["demand_profile"] == {"rate_rps": 4, "multipliers": [0.25, 0.25, 0.25, 1],
                                                          "peak_period": 3}
    assert sum(e["rps"] for e in plan["routing"]["toy"]["w"]) == pytest.approx(4.0)
    assert sum(e["share"] for e in plan["routing"]["toy"]["w"]) == pytest.approx(1.0)
    breaks = {b["chosen"]: b for b in p["break_even"]}
    # the base is busy every hour (above 60%); the top-up's peak fleet would be busy a quarter of them
    assert breaks[True]["utilization"] == pytest.approx(1.0) and breaks[True]["unit"] == base["unit"]
    assert breaks[False]["utilization"] == pytest.approx(0.25) and breaks[False]["unit"] == top["unit"]
    assert breaks[False]["purchase"] == "committed_1y"  # the term it could have had


def test_spiky_load_buys_no_commitment(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path, profile=[0.25, 0, 0, 1]))
    [a] = plan["allocations"]
    assert a["purchase"] == "on_demand" and a["counts_by_period"] == [1, 0, 0, 4] and a["count"] == 4
    assert plan["cost_usd_per_hour"] == pytest.approx(1.25)
    [b] = plan["purchase"]["break_even"]  # committing would pay only above 60%; the fleet is busy 31%
    assert not b["chosen"] and b["utilization"] == pytest.approx(5 / 16)
    assert b["utilization"] < b["break_even_utilization"] == pytest.approx(0.6)
    # nothing committed: no saving of commitments to state (a re-solve of the plan's problem read
    # "without committed terms" dearer than the plan itself, a verified plan trimmed below the ILP's sizing)
    assert plan["purchase"].get("without_committed_usd_per_hour") is None


def test_no_committed_option_unless_the_spec_allows_it(tmp_path, plan_json):
    spec = _spec(tmp_path, profile=[0.25, 0.25, 0.25, 1], terms=None)
    plan = plan_json(tmp_path, spec)
    assert {a["purchase"] for a in plan["allocations"]} == {"on_demand"}
    assert plan["cost_usd_per_hour"] == pytest.approx(1.75)
    assert plan["purchase"]["terms"] == ["on_demand"] and plan["purchase"]["break_even"] == []
    spec = _spec(tmp_path, terms=None)  # no profile, no committed term: plan.json as before
    plan = plan_json(tmp_path, spec)
    assert "purchase" not in plan and "purchase" not in plan["allocations"][0]
    assert plan["cost_usd_per_hour"] == pytest.approx(4.0)


@pytest.mark.parametrize("months, chosen, cost", [(12, False, 4.0), (36, True, 1.6)])
def test_a_term_longer_than_the_horizon_is_paid_in_full(tmp_path, plan_json, months, chosen, cost):
    plan = plan_json(tmp_path, _spec(tmp_path, terms=("on_demand", "committed_3y"), horizon_months=months))
    assert plan["cost_usd_per_hour"] == pytest.approx(cost)
    assert ({a["purchase"] for a in plan["allocations"]} == {"committed_3y"}) is chosen


def test_committed_plan_is_verified_at_the_peak(tmp_path, plan_json):
    """Verification simulates the deployed fleet at the peak period's demand (x 1.2)."""
    spec = {
        "name": "peak",
        "models": [{"name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
                    "slo": {"ttft_ms": 2000, "tpot_ms": 120},
                    "demand": {"rate_rps": 6, "profile": [0.3, 1.0],
                               "sizes": {"classes": [{"name": "c", "input_tokens": 500, "output_tokens": 200,
                                                      "share": 1}]}}}],
        "infrastructure": {"clouds": ["gcp"], "gpus": ["L4"], "regions": ["us-central1"],
                           "purchase_terms": ["on_demand", "committed_1y"]},
        "planning": {"verify": {"requests": 2000}},
    }
    plan = plan_json(tmp_path, spec, "--no-baselines", verify=True)
    f = plan["fidelity"]
    assert f["verified"] and f["met"]
    assert plan["models"][0]["rate_rps"] == 6  # the simulated rate is the peak's (x load)
    assert {a["purchase"] for a in plan["allocations"]} >= {"committed_1y"}
    assert plan["inputs"]["sources"][-1]["name"] == "embedded-committed-prices"


def test_summary_shows_the_base_the_top_and_the_break_even(tmp_path, plan_json):
    from rich.console import Console

    from hetinfra.plan.summary import render_summary

    plan = plan_json(tmp_path, _spec(tmp_path, profile=[0.25, 0.25, 0.25, 1]))
    console = Console(record=True, width=200)
    render_summary(Plan.parse(plan), console)
    text = console.export_text()
    assert "x-node committed 1y" in text
    assert "Purchase: on_demand, committed_1y over 12 months, 4 periods" in text
    assert ("committed base $0.60/h + top-ups $0.75/h on average = $1.35/h; peak period $3.60/h; "
            "without committed terms $1.75/h") in text
    assert "top-up toy-lab-r1-x-node by period: 0 0 0 3 (3 deployed)" in text
    assert "toy-lab-r1-x-node-c1y │ 1y   │        0.6000 │        1.0000 │        60% │        100% │ yes" in text


def test_a_profiles_units_start_with_every_class_their_levels_may_route_to_them():
    """A demand profile's levels route their own flows: off-peak, the top-up units are down and their
    classes go to the units that stay. Each unit's --max-model-len therefore covers every class its
    template serves, not only the peak's routing to it: services/committed.yaml's committed L4s got
    2,500 while its 2,000 + 1,000-token class was the on-demand top-up's at the peak."""
    import json

    from tests.plan.conftest import REPO

    plan = json.loads((REPO / "tests" / "plan" / "golden" / "committed.json").read_text())
    sizes = {c["name"]: c["input_tokens"] + c["output_tokens"] for m in plan["models"] for c in m["classes"]}
    served = {t["id"]: max(sizes[w] for w, r in t["capacity_rps"].items() if r > 0) for t in plan["templates"]}
    assert any(a.get("counts_by_period") for a in plan["allocations"])
    for a in plan["allocations"]:
        assert a["max_model_len"] >= served[a["template"]], (a["unit"], a["max_model_len"])
