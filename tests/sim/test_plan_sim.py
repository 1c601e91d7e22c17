"""Workload sampling, plan simulation end to end, determinism and bad inputs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.sim import Objective, WorkloadConfig, simulate_plan_file
from hetinfra.sim.plan_sim import PLAN_VERSION, load_plan
from hetinfra.sim.stats import evaluate, summarize
from hetinfra.sim.workload import arrival_gaps, arrival_times, class_sizes

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chat_plan(example_plans) -> Path:
    """The README's plan of services/chat.yaml (planned once per test run; read only)."""
    return example_plans["chat"][0]


def test_plan_version_matches_plan_json():
    from hetinfra.plan.plan_json import PLAN_VERSION as current

    assert PLAN_VERSION == current


@pytest.mark.parametrize("cv", [1.0, 3.0, 0.5])
def test_gamma_arrivals_rate_and_cv(cv):
    t = arrival_times(arrival_gaps(random.Random(0), 40000, cv), 4.0, cv).tolist()
    gaps = [b - a for a, b in zip([0.0] + t, t)]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert mean == pytest.approx(0.25, rel=0.03)
    assert sd / mean == pytest.approx(cv, rel=0.05)


@pytest.mark.parametrize("cv", [1.0, 2.0, 0.7])
def test_arrivals_are_the_random_modules_draws_bit_for_bit(cv):
    """The gaps drawn once and scaled to a rate equal ``random``'s expovariate/gammavariate at that
    rate, summed in order: the over-provisioning bisection's arrivals are a fresh draw's."""
    for rate in (0.37, 4.0, 1234.5):
        rng, t, ref = random.Random(5), 0.0, []
        shape = 1.0 / (cv * cv)
        for _ in range(3000):
            t += rng.expovariate(rate) if cv == 1.0 else rng.gammavariate(shape, 1.0 / (rate * shape))
            ref.append(t)
        assert arrival_times(arrival_gaps(random.Random(5), 3000, cv), rate, cv).tolist() == ref


def test_sizes_are_drawn_inside_the_bucket():
    from hetinfra.spec.load import load_spec

    from hetinfra.document.sections import RequestClass

    def cls(name: str, i: int, o: int) -> RequestClass:  # plan.json models[].classes[], as the simulator reads it
        return RequestClass(name=name, input_tokens=i, output_tokens=o, share=0.5, rate_rps=1.0)

    spec, _, _ = load_spec(REPO / "services/chat.yaml")
    classes = [cls("in<=1000,out<=500", 1000, 500), cls("in<=250,out<=100", 250, 100)]
    s = class_sizes(spec.models[0], REPO / "services", classes)
    rng = random.Random(0)
    a = [s[0].draw(rng) for _ in range(2000)]
    assert all(250 < i <= 1000 and 100 < o <= 500 for i, o in a)
    assert min(i for i, _ in a) < 300 and max(i for i, _ in a) > 950  # the spread, not the upper edge
    assert all(1 <= i <= 250 and 1 <= o <= 100 for i, o in (s[1].draw(rng) for _ in range(500)))
    with pytest.raises(InvalidInputError, match="no bucket edge"):
        class_sizes(spec.models[0], REPO / "services", [cls("x", 300, 100)])


def test_objective_percentile_and_attainment():
    ttft, tpot = summarize([0.1] * 98 + [3.0, 3.0]), summarize([0.05] * 100)
    assert evaluate(Objective(2000, 100, "p50"), ttft, tpot, 0.98)["met"]
    r = evaluate(Objective(2000, 100, "p99"), ttft, tpot, 0.98)
    assert not r["met"] and r["ratio"] == pytest.approx(1.5, rel=1e-3)
    assert not evaluate(Objective(2000, 100, "p50", attainment=0.99), ttft, tpot, 0.98)["met"]
    assert evaluate(Objective(2000, 100, "p50", attainment=0.98), ttft, tpot, 0.98)["met"]


@pytest.mark.parametrize("kw", [{"load": 0}, {"load": -1.0}, {"burst_cv": 0}, {"requests": 0}, {"requests": -5}])
def test_bad_workload_parameters(kw):
    with pytest.raises(InvalidInputError):
        WorkloadConfig(**kw)


def test_bad_plans(tmp_path, chat_plan):
    doc = json.loads((chat_plan / "plan.json").read_text())
    doc["plan_version"] = 99
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="plan_version"):
        load_plan(tmp_path)
    with pytest.raises(InvalidInputError, match="not found"):
        load_plan(tmp_path / "nowhere")
    with pytest.raises(InvalidInputError):
        Objective(100, 10, "p42")
    doc["plan_version"] = PLAN_VERSION
    doc["models"][0]["classes"][0]["name"] = "in<=333,out<=100"
    doc["models"][0]["classes"][0]["input_tokens"] = 333
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="re-plan"):
        simulate_plan_file(tmp_path, REPO / "services/chat.yaml", WorkloadConfig(requests=100))


def test_chat_plan_end_to_end(chat_plan):
    doc = simulate_plan_file(chat_plan, config=WorkloadConfig(requests=4000, seed=1))
    (m,) = doc["models"]
    assert m["requests"] == 4000 and m["warmup_requests"] == 400 and m["count"] + m["unrouted"] == 3600
    assert m["slo"]["percentile"] == "p99" and m["met"] == m["objective"]["met"]
    assert sum(c["count"] for c in m["classes"]) == m["count"]
    assert m["throughput_rps"] == pytest.approx(12.0, rel=0.1)  # the planned demand is served
    plan = json.loads((chat_plan / "plan.json").read_text())
    assert {u["unit"] for u in doc["units"]} == {a["unit"] for a in plan["allocations"]}
    for u in doc["units"]:
        assert 0 < u["utilization"] <= 1 and 0 < u["kv_occupancy"]["mean"] <= u["kv_occupancy"]["max"] <= 1
        assert u["ttft_ms"]["p50"] <= u["ttft_ms"]["p99"] and u["objective"]["ratio"] > 0
    # 3x the load the plan was sized for: the objectives cannot all hold
    over = simulate_plan_file(chat_plan, config=WorkloadConfig(requests=4000, seed=1, load=3.0))
    assert not over["met"] and max(u["objective"]["ratio"] for u in over["units"]) > 1
    assert over["models"][0]["ttft_ms"]["p99"] > m["ttft_ms"]["p99"]


def test_determinism(chat_plan):
    cfg = WorkloadConfig(requests=2000, seed=7, burst_cv=2.0)
    a = simulate_plan_file(chat_plan, config=cfg)
    b = simulate_plan_file(chat_plan, config=cfg)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c = simulate_plan_file(chat_plan, config=WorkloadConfig(requests=2000, seed=8, burst_cv=2.0))
    assert c["models"][0]["ttft_ms"] != a["models"][0]["ttft_ms"]


def test_command_writes_files(chat_plan, tmp_path):
    from click.testing import CliRunner

    from hetinfra.cli.simulate import simulate_command

    res = CliRunner().invoke(simulate_command, [str(chat_plan), "--requests", "1500", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "simulation.json").read_text())
    assert doc["simulator_version"] == "sim-v1" and doc["requests"] == 1500
    svg = (tmp_path / "simulation.svg").read_text()
    assert svg.startswith("<svg") and "TTFT CDF" in svg and "TPOT CDF" in svg
    bad = CliRunner().invoke(simulate_command, [str(chat_plan), "--burst-cv", "0", "--json"])
    assert bad.exit_code == 2 and "--burst-cv" in bad.output


def test_profile_comparison_signed_error(chat_plan, tmp_path):
    from hetinfra.sim.compare import profile_comparison

    plan = json.loads((chat_plan / "plan.json").read_text())
    a = plan["allocations"][0]
    cap = next(t for t in plan["templates"] if t["id"] == a["template"])["capacity_rps"]["in<=250,out<=100"]
    csv = tmp_path / "p.csv"
    csv.write_text("model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\n"
                   f"llama-3.1-8b,{a['gpu']},1,1,250,100,2000,120,{cap / 2}\n")
    rows = [r for r in profile_comparison(plan, csv) if r["unit"] == a["unit"]]
    hit = next(r for r in rows if r["class"] == "in<=250,out<=100")
    assert hit["signed_error"] == pytest.approx(1.0, rel=1e-3)  # the plan promises twice the measured rate
    assert all(r["signed_error"] is None for r in rows if r["class"] != "in<=250,out<=100")


def test_bad_input_on_the_command_line_is_exit_2(chat_plan, tmp_path, run_cli):
    doc = json.loads((chat_plan / "plan.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps({**doc, "plan_version": 7}))
    code, _, err = run_cli("simulate", str(tmp_path))
    assert code == 2 and "plan_version 7" in err and "hint:" in err
    # a spec whose sizes cannot produce the plan's classes
    code, _, err = run_cli("simulate", str(chat_plan), "--spec", str(REPO / "services" / "summarize.yaml"))
    assert code == 2 and "error:" in err and "Traceback" not in err
    code, _, err = run_cli("simulate", str(chat_plan), "--load", "-1")
    assert code == 2 and "load" in err


def test_a_dataset_that_cannot_sample_a_planned_class_is_exit_2(tmp_path, run_cli):
    rng = random.Random(0)
    rows = [f"{rng.randint(10, 900)},{rng.randint(5, 300)}" for _ in range(400)]
    (tmp_path / "sizes.csv").write_text("input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    (tmp_path / "svc.yaml").write_text(
        "name: ds\nmodels:\n  - name: m\n    model: llama-3.1-8b\n    source: meta-llama/Llama-3.1-8B-Instruct\n"
        "    slo: {ttft_ms: 2000, tpot_ms: 100}\n    demand:\n      rate_rps: 4\n      sizes:\n"
        "        dataset: {path: sizes.csv, input_edges: [0, 300, 1000], output_edges: [0, 100, 400]}\n"
        "infrastructure: {clouds: [aws], gpus: [L4, A10G]}\n")
    code, _, err = run_cli("plan", str(tmp_path / "svc.yaml"), "--out", str(tmp_path / "out"), "--no-baselines",
                           "--no-verify")
    assert code == 0, err
    # the dataset loses every long prompt: the plan's in<=1000 classes cannot be sampled any more
    kept = [r for r in rows if int(r.split(",")[0]) <= 300]
    (tmp_path / "sizes.csv").write_text("input_tokens,output_tokens\n" + "\n".join(kept) + "\n")
    code, _, err = run_cli("simulate", str(tmp_path / "out"), "--requests", "1000")
    assert code == 2 and "the dataset has no row in bucket 'in<=1000" in err and "re-plan" in err


@pytest.mark.parametrize("name", ["mixed-pipeline", "chat", "variants"])  # each has a model served by one unit
def test_a_one_unit_models_entry_reuses_its_units_block_exactly(name, monkeypatch):
    """A model served by one unit takes that unit's latency block over its own span: the simulation
    (with detail and without) is what computing the model's block again gives (a reused block with a
    wrong throughput, or one shared with the unit entry and edited there, fails this)."""
    from dataclasses import replace

    from hetinfra.sim import plan_sim
    from hetinfra.spec.load import load_spec
    from tests.plan.golden_plans import filled_golden

    doc, path = filled_golden(name), REPO / "services" / f"{name}.yaml"
    spec = load_spec(path)[0]
    config = WorkloadConfig(requests=3000, seed=5, load=1.2)
    reused = [plan_sim.simulate_plan(doc, spec, path, replace(config), detail=d) for d in (True, False)]
    real = plan_sim._model_entry
    monkeypatch.setattr(plan_sim, "_model_entry", lambda *args: real(*args[:-1], {}))
    assert reused == [plan_sim.simulate_plan(doc, spec, path, replace(config), detail=d) for d in (True, False)]
    one_unit = [m["model"] for m in reused[1]["models"] if sum(u["model"] == m["model"] for u in reused[1]["units"]) == 1]
    assert one_unit and all(next(m for m in reused[1]["models"] if m["model"] == n)["ttft_ms"] is not
                            next(u for u in reused[1]["units"] if u["model"] == n)["ttft_ms"] for n in one_unit)


def test_units_count_the_plans_replicas_and_the_engines_simulated():
    """simulation.json units[].replicas is the plan's count (as plan.json, the router, SkyPilot and the
    stacks count replicas); engines is what ran: count x engines per instance. The batch example
    runs several engines per instance, so the two differ there (the table shows both)."""
    from hetinfra.sim import plan_sim
    from hetinfra.sim.report import _replicas
    from hetinfra.spec.load import load_spec
    from tests.plan.golden_plans import filled_golden

    doc, path = filled_golden("batch"), REPO / "services" / "batch.yaml"
    sim = plan_sim.simulate_plan(doc, load_spec(path)[0], path, WorkloadConfig(requests=2000, seed=5, load=1.2))
    allocs = {a["unit"]: a for a in doc["allocations"]}
    assert {u["unit"] for u in sim["units"]} == set(allocs)
    for u in sim["units"]:
        a = allocs[u["unit"]]
        assert (u["replicas"], u["engines"]) == (a["count"], a["count"] * a["engines_per_instance"])
    several = [u for u in sim["units"] if u["engines"] > u["replicas"]]
    assert several and _replicas(several[0]) == f"{several[0]['replicas']} ({several[0]['engines']} engines)"
