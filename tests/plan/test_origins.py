"""Routing by origin (issue 25): an EU and a US origin planned together. Residency keeps EU
requests in Europe in plan.json and in simulation; without it the plan sends them across the
Atlantic when that is cheaper and the TTFT objective allows the round trip; a TTFT objective the
round trip would break forces local capacity, and the simulator agrees."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.plan.origins import allowed
from hetinfra.price_feeds.network import continent_of, locations, round_trip_ms
from hetinfra.sim.plan_sim import simulate_plan
from hetinfra.sim.workload import WorkloadConfig
from hetinfra.spec.load import load_spec

EU, US = "europe-west4", "us-east-1"


def atlantic(ttft_ms: float = 1500, eu_residency: str | None = None) -> dict:
    eu = {"share": 0.5, "residency": eu_residency} if eu_residency else 0.5
    return {"name": "atlantic",
            "models": [{"name": "chat", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
                        "slo": {"ttft_ms": ttft_ms, "tpot_ms": 80},
                        "demand": {"rate_rps": 20, "origins": {EU: eu, US: 0.5},
                                   "sizes": {"classes": [{"name": "chat", "input_tokens": 500, "output_tokens": 200,
                                                          "share": 1}]}}}],
            "infrastructure": {"clouds": ["aws", "gcp"], "regions": [US, "us-central1", EU, "eu-west-1"]}}


def regions_of(plan: dict, origin: str) -> set[str]:
    return {f["region"] for flows in plan["routing_by_origin"]["chat"][origin].values() for f in flows}


def simulate(tmp_path, plan: dict, requests: int = 3000) -> dict:
    spec, _, _ = load_spec(tmp_path / "service.yaml")
    return simulate_plan(plan, spec, tmp_path / "service.yaml", WorkloadConfig(requests=requests))


def test_residency_keeps_eu_requests_in_europe(tmp_path, plan_json):
    plan = plan_json(tmp_path, atlantic(eu_residency="continent"))
    eu = plan["origins"]["chat"][EU]
    assert (eu["share"], eu["residency"], eu["area"], eu["worst_network_ms"]) == (0.5, "continent", "Europe", 0.0)
    assert eu["allowed_regions"] and all(continent_of(r) == "Europe" for r in eu["allowed_regions"])
    assert plan["origins"]["chat"][US]["allowed_regions"] is None  # no residency: anywhere
    assert regions_of(plan, EU) and all(continent_of(r) == "Europe" for r in regions_of(plan, EU))
    # per origin the shares of a class sum to 1, and over origins the rps are the class routing's
    for origin in (EU, US):
        assert sum(f["share"] for f in plan["routing_by_origin"]["chat"][origin]["chat"]) == pytest.approx(1.0)
    by_origin = sum(f["rps"] for o in (EU, US) for f in plan["routing_by_origin"]["chat"][o]["chat"])
    assert by_origin == pytest.approx(sum(f["rps"] for f in plan["routing"]["chat"]["chat"]), abs=1e-4)
    sim = simulate(tmp_path, plan)["models"][0]["origins"]
    assert sim[EU]["requests"] > 1000 and all(continent_of(r) == "Europe" for r in sim[EU]["regions"])


def test_without_residency_price_may_cross_the_atlantic(tmp_path, plan_json):
    free = plan_json(tmp_path, atlantic())
    kept = plan_json(tmp_path, atlantic(eu_residency="continent"))
    # a generous TTFT leaves room for the round trip: the cheaper US capacity serves Europe too (the
    # nearest US region first: the objective's tie-break, solver.rows.NETWORK_TIE, routes the fleet
    # so that its clients travel least; the US origin's own requests stay in its region)
    assert US in regions_of(free, EU) and all(continent_of(r) == "North America" for r in regions_of(free, EU))
    assert free["origins"]["chat"][EU]["worst_network_ms"] >= round_trip_ms(EU, US) > 60
    assert regions_of(free, US) == {US}
    assert free["cost_usd_per_hour"] < kept["cost_usd_per_hour"]


def test_tight_ttft_forces_local_capacity_in_ilp_and_simulator(tmp_path, plan_json):
    # rates at their interval's middle: under `safe` (which --no-verify plans apply too) the derated
    # European units leave the US unit's spare capacity worth 82 ms of network time within 100 ms (at
    # 120 ms estimator-v3's faster short prefills let the US unit answer Europe in time)
    plan = plan_json(tmp_path, {**atlantic(ttft_ms=100), "planning": {"confidence": "expected"}})
    assert regions_of(plan, EU) <= {EU, "eu-west-1"} and regions_of(plan, US) <= {US, "us-central1"}
    sim = simulate(tmp_path, plan)
    assert sim["met"] and sim["models"][0]["origins"][EU]["worst_network_ms"] < 20
    # the counterfactual: Europe's row sent to the US units (with their capacity doubled) breaks
    # TTFT for European clients in the simulator, as the ILP said it would
    crossed = json.loads(json.dumps(plan))
    us_units = [a for a in crossed["allocations"] if a["region"] == US]
    for a in us_units:
        a["count"] *= 3
    crossed["routing_by_origin"]["chat"][EU] = {c: [dict(e, network_ms=round_trip_ms(EU, e["region"])) for e in row]
                                                for c, row in crossed["routing_by_origin"]["chat"][US].items()}
    out = simulate(tmp_path, crossed)["models"][0]["origins"]
    assert out[EU]["regions"] == [US] and out[EU]["worst_network_ms"] == pytest.approx(round_trip_ms(EU, US))
    assert out[EU]["ttft_met_fraction"] < 0.5 < out[US]["ttft_met_fraction"]


def test_residency_that_caps_block_names_origin_and_area(tmp_path, run_cli):
    spec = atlantic(eu_residency="continent")
    spec["infrastructure"]["availability"] = [{"cloud": c, "region": r, "gpu": g, "max_gpus": 0}
                                              for c, r in (("gcp", EU), ("aws", "eu-west-1"))
                                              for g in ("A100", "A100-80GB", "H100", "H200", "L4", "T4", "V100",
                                                        "A10G", "L40S", "B200")]
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(spec))
    code, _, err = run_cli("plan", str(tmp_path / "service.yaml"), "--no-verify", "--out", str(tmp_path / "o"))
    assert code == 3 and "origin europe-west4" in err and "Europe" in err and "Traceback" not in err


def test_plain_share_and_residency_none_plan_alike(tmp_path, plan_json):
    a = plan_json(tmp_path, atlantic())
    b = plan_json(tmp_path, atlantic(eu_residency="none"))
    assert a["allocations"] == b["allocations"] and a["routing_by_origin"] == b["routing_by_origin"]


def test_verified_plan_keeps_tight_ttft_local(tmp_path, plan_json):
    """`plan`'s verification (simulate, derate, re-solve) routes by origin too, and agrees."""
    # 100 ms: the 82 ms round trip leaves no GPU time for a 500-token prefill across the Atlantic. (At
    # 120 ms, verification's credit (issue 21) finds the remaining 38 ms enough on a fast GPU, and the
    # simulator agrees: a legitimate plan, not local-only.)
    plan = plan_json(tmp_path, atlantic(ttft_ms=100), verify=True)
    assert plan["fidelity"]["met"] is True
    assert regions_of(plan, EU) <= {EU, "eu-west-1"} and regions_of(plan, US) <= {US, "us-central1"}


@given(st.sampled_from(sorted(locations())), st.sampled_from(sorted(locations())))
def test_residency_areas(origin, region):
    cloud = locations()[region].cloud
    assert allowed(origin, "none", cloud, region)
    assert allowed(origin, "region", cloud, region) == (origin == region)
    assert allowed(origin, "continent", cloud, region) == (continent_of(origin) == continent_of(region, cloud))


def test_a_class_named_like_a_flow_is_refused(tmp_path, run_cli):
    spec = atlantic()
    spec["models"][0]["demand"]["sizes"]["classes"].append(
        {"name": f"chat@{US}", "input_tokens": 100, "output_tokens": 50, "share": 1})
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(spec))
    code, _, err = run_cli("plan", str(tmp_path / "service.yaml"), "--no-verify", "--out", str(tmp_path / "o"))
    assert code == 2 and f"class name 'chat@{US}'" in err and "Traceback" not in err


def test_failover_alternates_stay_in_the_planned_region(tmp_path, plan_json):
    """A unit planned for origins' round trips and residency is not moved to another region by SkyPilot."""
    spec = atlantic(eu_residency="continent")
    spec["infrastructure"]["regions"] += ["us-east-2", "us-west-2", "europe-west1", "eu-west-2", "eu-west-3"]
    plan = plan_json(tmp_path, spec)
    # (without the rule, this plan's units list alternates in other European and US regions)
    for a in plan["allocations"]:
        assert all(alt["region"] == a["region"] for alt in a.get("alternates") or [])


def test_regions_without_a_location_are_named(tmp_path, plan_json):
    """A user's own offers in a region the network table does not know: planned at 0 ms, and said so."""
    (tmp_path / "lab.csv").write_text("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,"
                                      "price_per_hour,spot_price_per_hour\nlab,lab-berlin,box-l40s,L40S,1,48,8,64,0.5,\n")
    spec = atlantic()
    spec["offers"] = ["lab.csv"]
    spec["infrastructure"]["clouds"].append("lab")
    spec["infrastructure"]["regions"].append("lab-berlin")
    plan = plan_json(tmp_path, spec)
    assert any("no location for region(s) lab-berlin" in w for w in plan["warnings"])
    lab = [e for rows in plan["routing_by_origin"]["chat"].values() for e in rows["chat"] if e["region"] == "lab-berlin"]
    assert lab and all(e["network_ms"] is None for e in lab)


def _crossings(plan: dict) -> list[tuple]:
    """Pairs of one class's flows whose origins would travel less by swapping their regions: o1 sent to
    r1 and o2 to r2 where rtt(o1, r2) + rtt(o2, r1) is smaller by more than a millisecond."""
    out = []
    for model, by_origin in plan["routing_by_origin"].items():
        flows = [(o, w, f["region"]) for o, classes in by_origin.items() for w, rows in classes.items() for f in rows]
        for o1, w, r1 in flows:
            for o2, w2, r2 in flows:
                if w2 == w and o1 < o2 and round_trip_ms(o1, r2) + round_trip_ms(o2, r1) + 1.0 < \
                        round_trip_ms(o1, r1) + round_trip_ms(o2, r2):
                    out.append((model, w, (o1, r1), (o2, r2)))
    return out


def test_clients_are_never_routed_across_while_the_others_cross_back(tmp_path, run_cli, monkeypatch):
    """Where a fleet can route its origins' requests several ways at one cost (a TTFT the round trip
    barely dents), the ILP was indifferent and crossed them: services/multi-region.yaml sent 47% of
    us-east-1's short chat to us-west-2 while us-west-2's went to us-east-1, 45.6 ms each way for
    nothing. The objective's tie-break (solver.rows.NETWORK_TIE) routes so that clients travel least:
    no two flows would travel less by swapping regions, at the cost the ILP without it finds."""
    from hetinfra.solver import rows as solver_rows
    from hetinfra.solver.memo import clear

    from tests.plan.golden_plans import REPO

    def planned() -> dict:
        code, out, err = run_cli("plan", str(REPO / "services" / "multi-region.yaml"), "--json", "--no-verify")
        assert code == 0, err
        return json.loads(out)

    plan = planned()
    assert not _crossings(plan)
    clear()  # solved again, not served from the memo
    monkeypatch.setattr(solver_rows, "NETWORK_TIE", 0.0)
    untied = planned()
    assert _crossings(untied)  # the case is one the ILP without the tie-break crosses
    assert plan["cost_usd_per_hour"] == untied["cost_usd_per_hour"]
