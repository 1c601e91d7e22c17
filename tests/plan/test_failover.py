"""Failover alternates and on-demand fallback in plan.json (hetinfra.plan.failover), on a hand-checkable
offers file: one L4 instance serves the demand (L4 capacity 3.87 req/s at this class; the A10G at $1.05
and the T4 at $0.90 lose to the L4 at $1.00), and the other L4 offers are priced around the premium."""

from __future__ import annotations

import json

import yaml

OFFERS = [  # cloud, region, instance type, GPU, GPUs, on-demand $/h, spot $/h
    ("aws", "test-a", "tst.l4a", "L4", 1, 1.00, 0.40),   # planned (on-demand)
    ("aws", "test-b", "tst.l4a", "L4", 1, 1.10, 0.50),   # +10%
    ("aws", "test-b", "tst.l4b", "L4", 1, 1.25, None),   # +25%: on the bound, in
    ("gcp", "test-c", "tst-l4", "L4", 1, 1.20, 0.45),    # +20%, another cloud
    ("azure", "test-d", "tst_l4", "L4", 1, 1.30, 0.30),  # +30%: out (the cheapest spot offer)
    ("aws", "test-a", "tst.l4x4", "L4", 4, 4.40, None),  # 4 GPUs: another layout, out
    ("aws", "test-a", "tst.a10g", "A10G", 1, 1.05, None),  # another GPU within the premium: out
    ("aws", "test-a", "tst.t4", "T4", 1, 0.90, None),
]


def _spec(tmp_path, offers=OFFERS, **over) -> dict:
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    rows += [f"{c},{r},{it},{g},{n},{16 if g == 'T4' else 24},{4 * n},{16 * n},{p},{'' if s is None else s}"
             for c, r, it, g, n, p, s in offers]
    (tmp_path / "offers.csv").write_text("\n".join(rows) + "\n")
    spec = {"name": "fo", "offers": ["offers.csv"],
            "models": [{"name": "chat", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
                        "precision": "int4", "slo": {"ttft_ms": 2000, "tpot_ms": 100},
                        "demand": {"rate_rps": 3, "sizes": {"classes": [
                            {"name": "c", "input_tokens": 512, "output_tokens": 128, "share": 1}]}}}],
            "infrastructure": {"clouds": ["aws", "gcp", "azure"], "regions": ["test-a", "test-b", "test-c", "test-d"]},
            "deploy": {}}
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            spec.setdefault(section, {})[field] = value
        else:
            spec[section] = value
    return spec


def _places(a: dict) -> list:
    return [(x["cloud"], x["region"], x["instance_type"], x["price_per_hour"]) for x in a["alternates"]]


def test_alternates_same_gpu_and_layout_cheapest_first_within_premium(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path), "--no-baselines")
    (a,) = plan["allocations"]
    assert (a["cloud"], a["region"], a["instance_type"], a["spot"]) == ("aws", "test-a", "tst.l4a", False)
    assert _places(a) == [("aws", "test-b", "tst.l4a", 1.1), ("gcp", "test-c", "tst-l4", 1.2),
                          ("aws", "test-b", "tst.l4b", 1.25)]
    assert all(x["spot"] is False for x in a["alternates"]) and a["ondemand_fallback"] is None
    assert plan["cost_usd_per_hour"] == 1.0  # the planned offer's, not the alternates'
    assert plan["deploy"]["failover"] == {"max_alternates": 4, "max_premium": 0.25, "ondemand_fallback": True}


def test_alternates_stay_on_the_units_continent(tmp_path, plan_json):
    # made-up regions (the snapshot has no offers there) named as their clouds name regions
    offers = [("aws", "us-test-1", "tst.l4a", "L4", 1, 1.00, None),  # planned
              ("aws", "eu-test-1", "tst.l4a", "L4", 1, 1.02, None),  # cheaper than us-test-2, but in Europe
              ("gcp", "europe-test4", "tst-l4", "L4", 1, 1.03, None),
              ("aws", "us-test-2", "tst.l4a", "L4", 1, 1.10, None),
              ("azure", "test-d", "tst_l4", "L4", 1, 1.15, None),  # no continent known: not restricted
              ("gcp", "us-test5", "tst-l4", "L4", 1, 1.20, None)]
    regions = sorted({o[1] for o in offers})
    (a,) = plan_json(tmp_path, _spec(tmp_path, offers, infrastructure__regions=regions), "--no-baselines")["allocations"]
    assert a["region"] == "us-test-1"
    assert [p[:2] for p in _places(a)] == [("aws", "us-test-2"), ("azure", "test-d"), ("gcp", "us-test5")]


def test_premium_count_and_allowlists_narrow_the_alternates(tmp_path, plan_json):
    def alts(**over):
        (a,) = plan_json(tmp_path, _spec(tmp_path, **over), "--no-baselines")["allocations"]
        return [p[:3] for p in _places(a)]

    assert alts(deploy__failover={"max_premium": 0.15}) == [("aws", "test-b", "tst.l4a")]
    assert alts(deploy__failover={"max_alternates": 2}) == [("aws", "test-b", "tst.l4a"), ("gcp", "test-c", "tst-l4")]
    assert alts(deploy__failover={"max_alternates": 0}) == []
    # SkyPilot deploys only AWS units: no failover to GCP
    assert alts(deploy__skypilot_clouds=["aws"]) == [("aws", "test-b", "tst.l4a"), ("aws", "test-b", "tst.l4b")]
    assert alts(infrastructure__regions=["test-a", "test-c"]) == [("gcp", "test-c", "tst-l4")]
    assert alts(infrastructure__clouds=["aws"], infrastructure__regions=["test-a", "test-b"]) == [
        ("aws", "test-b", "tst.l4a"), ("aws", "test-b", "tst.l4b")]
    # no room under test-b's L4 cap
    assert alts(infrastructure__availability=[{"cloud": "aws", "region": "test-b", "gpu": "L4", "max_gpus": 0}]) == [
        ("gcp", "test-c", "tst-l4")]
    # locality keeps the unit's replicas in its origin region, where no other L4 offer is
    origin = {"origins": {"test-a": 1.0}}
    spec = _spec(tmp_path, planning={"locality": 0.5})
    spec["models"][0]["demand"].update(origin)
    (a,) = plan_json(tmp_path, spec, "--no-baselines")["allocations"]
    assert a["region"] == "test-a" and a["alternates"] == []


def test_spot_units_fall_back_to_on_demand(tmp_path, plan_json):
    spec = _spec(tmp_path, infrastructure__spot=True, deploy__failover={"max_premium": 0.5})
    plan = plan_json(tmp_path, spec, "--no-baselines")
    (a,) = plan["allocations"]
    assert (a["cloud"], a["region"], a["spot"], a["price_per_instance_usd_per_hour"]) == ("azure", "test-d", True, 0.3)
    # spot alternates, spot prices, within +50% of $0.30
    assert _places(a) == [("aws", "test-a", "tst.l4a", 0.4), ("gcp", "test-c", "tst-l4", 0.45)]
    assert all(x["spot"] is True for x in a["alternates"])
    assert a["ondemand_fallback"] == {"price_per_hour": 1.3}  # the planned offer's on-demand price
    assert not any("on-demand ones" in w for w in plan["warnings"])  # no budget to exceed

    spec["deploy"]["failover"]["ondemand_fallback"] = False
    assert plan_json(tmp_path, spec, "--no-baselines")["allocations"][0]["ondemand_fallback"] is None

    spec["deploy"]["failover"]["ondemand_fallback"] = True
    spec["budget_usd_per_hour"] = 0.5
    warnings = plan_json(tmp_path, spec, "--no-baselines")["warnings"]
    assert ("while spot replicas are replaced by on-demand ones (deploy.failover.ondemand_fallback) the fleet may cost "
            "up to $1.30/h, above the budget $0.5/h") in warnings


def test_tasks_list_the_alternates_and_the_fallback(tmp_path, run_cli):
    spec = _spec(tmp_path, infrastructure__spot=True, deploy__failover={"max_premium": 0.5},
                 deploy__runtime="virtualenv")
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(tmp_path / "service.yaml"), "--out", str(out), "--no-verify", "--no-baselines")
    assert code == 0, err
    (a,) = json.loads((out / "plan.json").read_text())["allocations"]
    task = yaml.safe_load((out / a["skypilot_task"]).read_text())
    res = task["resources"]
    assert res["ordered"] == [{"infra": "azure/test-d", "instance_type": "tst_l4"},
                              {"infra": "aws/test-a", "instance_type": "tst.l4a"},
                              {"infra": "gcp/test-c", "instance_type": "tst-l4"}]
    assert res["use_spot"] is True and "image_id" not in res and task["setup"] == "pip install vllm==0.12.0\n"
    # disk: int4 8B weights 4 GB + virtualenv 15 GB + the largest OS image of azure/aws/gcp (aws 75 GB), +10%
    assert res["disk_size"] == 110
    assert task["service"]["replica_policy"] == {"min_replicas": 1, "dynamic_ondemand_fallback": True}


def test_cidr_warning_where_skypilot_deploys(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path), "--no-baselines")
    assert not any("SkyPilot opens" in w for w in plan["warnings"])  # no unit deployed by SkyPilot by default
    plan = plan_json(tmp_path, _spec(tmp_path, deploy__skypilot_clouds=["aws"]), "--no-baselines")
    unit = plan["allocations"][0]["deployment_unit"]
    assert (f"SkyPilot opens port 8000 (deploy.ingress_cidrs) and SSH (deploy.ssh_cidrs) to 0.0.0.0/0 on the "
            f"SkyServe units ({unit}): it cannot restrict them to the spec's CIDRs (vLLM still requires VLLM_API_KEY); "
            "deploy them with the Pulumi stacks where the CIDRs must hold") in plan["warnings"]
    world = _spec(tmp_path, deploy__skypilot_clouds=["aws"], deploy__ingress_cidrs=["0.0.0.0/0"],
                  deploy__ssh_cidrs=["0.0.0.0/0"])
    assert not any("SkyPilot opens" in w for w in plan_json(tmp_path, world, "--no-baselines")["warnings"])


def test_summary_states_what_failover_may_cost(tmp_path, run_cli):
    spec = _spec(tmp_path, infrastructure__spot=True, deploy__failover={"max_premium": 0.5})
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(spec))
    code, out, err = run_cli("plan", str(tmp_path / "service.yaml"), "--no-verify", "--no-baselines")
    assert code == 0, err
    # dearest alternate $0.45 - $0.30 planned; on-demand $1.30 - $0.30 spot
    assert ("failover (SkyPilot tasks): 1 of 1 unit(s) may fail over to equivalent offers (same GPU and layout, at most "
            "+50%/h): up to $0.15/h more; 1 spot unit(s) fall back to on-demand while spot is preempted or starting: up "
            "to $1.00/h more. The plan's $0.30/h is the planned offers'.") in " ".join(out.split())
