"""Variants and an accuracy floor (issue 17, AGH's quantization tiers).

Hand-solved case: one class (500 -> 200 tokens), a custom cloud whose only instance type has one L4
at $1/h, 6 req/s, and measured profiles of the three variants on it:

    variant  accuracy  req/s per instance  instances for 6 req/s  $/h
    bf16     0.80      1.0                 6                      6
    fp8      0.79      1.5                 4                      4
    int4     0.75      2.0                 3                      3

so int4 is the cheapest, and the plan may use it only when the floor admits 0.75.
"""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import write_offers, write_profiles

SCORES = {"bf16": 0.80, "fp8": 0.79, "int4": 0.75}
RATES = {"bf16": 1.0, "fp8": 1.5, "int4": 2.0}


def _spec(tmp_path, floor: float | None, rate: float = 6.0, **model) -> dict:
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "lab", "region": "r1", "instance_type": "g1", "gpu": "L4", "gpu_count": 1, "gpu_memory_gb": 24,
         "vcpus": 8, "memory_gb": 32, "price_per_hour": 1.0}])
    write_profiles(tmp_path / "profiles.csv", [
        {"model": f"chat:{v}", "gpu": "L4", "tp": 1, "pp": 1, "input_tokens": 500, "output_tokens": 200,
         "ttft_slo_ms": 2000, "tpot_slo_ms": 100, "max_rps": r} for v, r in RATES.items()])
    slo = {"ttft_ms": 2000, "tpot_ms": 100}
    if floor is not None:
        slo["min_accuracy"] = floor
    return {
        "name": "variants",
        "models": [{"name": "chat", "model": "llama-3.1-8b", "source": "org/chat", "slo": slo,
                    "variants": [{"name": "bf16", "precision": "bf16", "accuracy": SCORES["bf16"]},
                                 {"name": "fp8", "precision": "fp8", "accuracy": SCORES["fp8"]},
                                 {"name": "int4", "precision": "int4", "source": "org/chat-int4",
                                  "accuracy": SCORES["int4"]}],
                    "demand": {"rate_rps": rate, "sizes": {"classes": [
                        {"name": "c", "input_tokens": 500, "output_tokens": 200, "share": 1}]}}, **model}],
        "infrastructure": {"clouds": ["lab"]},
        "planning": {"mip_gap": 0},
        "offers": ["offers.csv"], "profiles": ["profiles.csv"],
    }


def _chosen(plan: dict) -> dict[str, int]:
    return {a["variant"]: a["count"] for a in plan["allocations"]}


@pytest.mark.parametrize("floor, variant, count, cost", [
    (0.7501, "fp8", 4, 4.0),  # just above int4's 0.75: int4 is never planned, fp8 is the cheapest left
    (0.7499, "int4", 3, 3.0),  # just below: int4 meets the floor and is the cheapest
    (0.75, "int4", 3, 3.0),  # the floor is inclusive
    (0.7901, "bf16", 6, 6.0),  # only bf16 meets it
])
def test_a_lower_precision_is_chosen_only_when_it_meets_the_floor(tmp_path, plan_json, monkeypatch, floor, variant,
                                                                  count, cost):
    from hetinfra.solver import cutoff

    cut = []  # raise_floors' trials of the more accurate variants: each costs more, so ends at its LP bound
    real = cutoff.cut_off
    monkeypatch.setattr(cutoff, "cut_off", lambda p, t: cut.append(real(p, t)) or cut[-1])
    plan = plan_json(tmp_path, _spec(tmp_path, floor), "--no-baselines")
    assert _chosen(plan) == {variant: count}
    assert cut.count(True) == sum(s > SCORES[variant] for s in SCORES.values())  # solver.cutoff
    assert plan["cost_usd_per_hour"] == pytest.approx(cost)
    (a,) = plan["allocations"]
    assert a["unit"] == f"chat|lab|g1|tp1x1|{variant}|r1|ondemand" and a["template"].endswith(f"|{variant}")
    assert plan["templates"][0]["variant"] == variant
    # the rate is the variant's own profile row (chat:<variant>), not another variant's
    assert plan["templates"][0]["sources"]["c"].endswith(f"profiles.csv:{list(RATES).index(variant) + 2}")
    acc = plan["models"][0]["accuracy"]
    assert acc["served"] == pytest.approx(SCORES[variant]) and acc["best"] == 0.80 and acc["best_variant"] == "bf16"
    assert acc["given_up"] == pytest.approx(0.80 - SCORES[variant]) and acc["min_accuracy"] == floor
    assert acc["by_variant"] == {variant: {"rps": 6.0, "share": 1.0}}
    meets = {v["name"]: v["meets_floor"] for v in plan["models"][0]["variants"]}
    assert meets == {v: s >= floor for v, s in SCORES.items()}


def test_without_a_floor_the_cheapest_variant_serves(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(tmp_path, None), "--no-baselines")
    assert _chosen(plan) == {"int4": 3} and plan["models"][0]["accuracy"]["min_accuracy"] is None


def test_no_accuracy_is_given_up_for_nothing(tmp_path, plan_json):
    """3 req/s: fp8 and int4 both need 2 instances ($2/h), bf16 3. The pruning keeps int4 (it has the
    higher rate for the same price), so the first solve serves int4; raising the floor to fp8's score
    costs nothing, so the plan serves fp8."""
    plan = plan_json(tmp_path, _spec(tmp_path, 0.7, rate=3.0), "--no-baselines")
    assert _chosen(plan) == {"fp8": 2} and plan["cost_usd_per_hour"] == pytest.approx(2.0)
    assert plan["models"][0]["accuracy"]["served"] == pytest.approx(0.79)


def test_variants_split_the_classes_when_that_is_cheapest(tmp_path, plan_json):
    """Two classes: int4 serves short requests at 2 req/s per instance but is profiled at 0 on long
    ones (not servable); fp8 serves both at 1 req/s. 4 short + 2 long req/s: fp8 alone needs 6
    instances, int4 on the short class and fp8 on the long one 2 + 2. The summary says which variant
    serves which class."""
    spec = _spec(tmp_path, 0.7)
    rows = [("int4", 200, 100, 2.0), ("int4", 2000, 500, 0), ("fp8", 200, 100, 1.0), ("fp8", 2000, 500, 1.0),
            ("bf16", 2000, 500, 0.5)]
    write_profiles(tmp_path / "profiles.csv", [
        {"model": f"chat:{v}", "gpu": "L4", "tp": 1, "pp": 1, "input_tokens": i, "output_tokens": o,
         "ttft_slo_ms": 2000, "tpot_slo_ms": 100, "max_rps": r} for v, i, o, r in rows])
    spec["models"][0]["demand"] = {"rate_rps": 6, "sizes": {"classes": [
        {"name": "short", "input_tokens": 200, "output_tokens": 100, "share": 4},
        {"name": "long", "input_tokens": 2000, "output_tokens": 500, "share": 2}]}}
    spec["planning"]["max_nodes_per_template"] = 1  # no 2-node pipelines (their rates would be estimated)
    plan = plan_json(tmp_path, spec, "--no-baselines")
    assert _chosen(plan) == {"int4": 2, "fp8": 2} and plan["cost_usd_per_hour"] == pytest.approx(4.0)
    variant = {a["unit"]: a["variant"] for a in plan["allocations"]}
    served = {c: {variant[r["unit"]] for r in routes} for c, routes in plan["routing"]["chat"].items()}
    assert served == {"short": {"int4"}, "long": {"fp8"}}
    acc = plan["models"][0]["accuracy"]
    assert acc["by_variant"] == {"fp8": {"rps": 2.0, "share": pytest.approx(1 / 3, abs=1e-6)},
                                 "int4": {"rps": 4.0, "share": pytest.approx(2 / 3, abs=1e-6)}}
    assert acc["served"] == pytest.approx((4 * 0.75 + 2 * 0.79) / 6)
    # the same spec with the floor above int4: fp8 serves everything, 6 instances
    spec["models"][0]["slo"]["min_accuracy"] = 0.76
    assert _chosen(plan_json(tmp_path, spec, "--no-baselines")) == {"fp8": 6}


def test_the_summary_says_which_variant_serves_which_class(tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec(tmp_path, 0.7501)))
    code, out, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert code == 0, err
    assert "chat (fp8)" in out  # the allocation's model column names the variant
    row = next(line for line in out.splitlines() if line.startswith("│ chat ") and "fp8 100%" in line)
    assert "0.79" in row
    assert ("chat: accuracy 0.79 served (mean over its traffic), best variant bf16 0.8: 0.01 given up; "
            "floor 0.7501, never planned: int4 (0.75)") in out


def test_no_variant_meets_the_floor_exits_3(tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec(tmp_path, 0.9)))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify")
    assert code == 3
    assert "model chat: no variant meets slo.min_accuracy 0.9: the most accurate is bf16 at 0.8" in err
    assert "lower slo.min_accuracy to at most 0.8" in err and "Traceback" not in err


def test_what_the_floor_leaves_out_is_named_when_the_rest_cannot_serve(tmp_path, run_cli):
    """Only int4 is profiled fast enough... here: the floor leaves bf16 only, and a TPOT no L4 layout
    meets for it is reported with the variants the floor left out."""
    spec = _spec(tmp_path, 0.7901)
    spec["profiles"] = []
    spec["models"][0]["slo"]["tpot_ms"] = 5
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify")
    assert code == 3 and "variants below slo.min_accuracy 0.7901 not planned: fp8 (0.79), int4 (0.75)" in err


def test_a_plan_with_variants_is_verified_by_simulation(tmp_path, plan_json):
    spec = _spec(tmp_path, 0.7501)
    spec["planning"]["verify"] = {"requests": 2000, "max_rounds": 2, "settle_rounds": 0}
    plan = plan_json(tmp_path, spec, "--no-baselines", verify=True)
    f = plan["fidelity"]
    assert f["verified"] and [m["model"] for m in f["models"]] == ["chat"] and f["models"][0]["requests"] > 0
    assert {a["variant"] for a in plan["allocations"]} == {"fp8"}


def test_builtin_scores_fill_in_a_variant_without_one(tmp_path, plan_json):
    spec = _spec(tmp_path, 99.5)
    m = spec["models"][0]
    m["source"] = "meta-llama/Llama-3.1-8B-Instruct"
    m["variants"] = [{"name": "bf16"},
                     {"name": "fp8", "precision": "fp8", "source": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic"},
                     {"name": "int4", "precision": "int4",
                      "source": "neuralmagic/meta-llama-3.1-8b-instruct-quantized.w4a16"}]
    plan = plan_json(tmp_path, spec, "--no-baselines")
    scores = {v["name"]: (v["accuracy"], v["accuracy_from"], v["meets_floor"]) for v in plan["models"][0]["variants"]}
    assert scores == {"bf16": (100.0, "builtin", True), "fp8": (99.7, "builtin", True),
                      "int4": (98.9, "builtin", False)}
    assert {a["variant"] for a in plan["allocations"]} <= {"bf16", "fp8"}
