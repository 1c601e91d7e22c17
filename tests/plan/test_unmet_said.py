"""Demand a plan leaves unserved (planning.allow_unmet) is said wherever the plan's figures are read:
the headline, a warning with its cause, the baselines (no saving against a plan that serves all of it),
the over-provisioning and `simulate`; a model it serves nothing of is "unserved", not a latency miss;
an undecided model is "undecided", not a miss. Held-out specs of stop 59: a 70B at 10 req/s under a
$20/h budget planned "$14.69/h, 4 GPUs", serving 1.19 req/s with nothing in the summary saying so."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from hetinfra.plan.fidelity import not_met_words

SPEC = {"name": "unmet", "models": [{
    "name": "big", "model": "llama-3.1-70b", "source": "meta-llama/Llama-3.1-70B-Instruct",
    "slo": {"ttft_ms": 2000, "tpot_ms": 70, "percentile": "p90"},
    "demand": {"rate_rps": 10, "sizes": {"classes": [{"name": "c", "input_tokens": 1500, "output_tokens": 300,
                                                      "share": 1}]}}}],
    "infrastructure": {"clouds": ["aws", "gcp", "azure"]}, "planning": {"allow_unmet": True}}


def _plan(tmp_path, run_cli, budget: float):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "budget_usd_per_hour": budget}))
    code, out, err = run_cli("plan", str(spec), "--out", str(tmp_path / "out"))
    assert code == 0, err
    return out, json.loads((tmp_path / "out" / "plan.json").read_text())


def test_a_budget_that_leaves_demand_unserved_is_said_in_every_figure(tmp_path, run_cli):
    out, plan = _plan(tmp_path, run_cli, 20)
    unmet = sum(plan["unmet_rps"].values())
    assert 0 < unmet < 10
    text = " ".join(out.split())  # the summary wraps at the console's width
    assert f"serves {10 - unmet:.3g} of 10 req/s ({unmet:.3g} left unserved: unmet_rps)" in text
    said = [w for w in plan["warnings"] if w.startswith("model big:")]
    assert len(said) == 1 and f"{unmet:.3g} of its 10 req/s" in said[0] and "budget ($20/h)" in said[0]
    feasible = [b for b in plan["baselines"] if b["feasible"]]
    assert feasible and all(b["savings_pct"] is None and b["savings_usd_per_hour"] is None for b in feasible)
    table = text.split("Single-GPU-type baselines")[1].split("baselines:")[0]
    assert "it serves all the demand" in table and "% ($" not in table  # no saving claimed
    over = plan["fidelity"]["over_provisioning"]
    assert "x multiplies the demand the plan serves" in over["definition"] and "the served demand sustained" in text
    code, sim, _ = run_cli("simulate", str(tmp_path / "out"), "--seed", "1002", "--out", str(tmp_path / "sim"))
    assert code == 0 and "requests unrouted (demand the plan leaves unserved: unmet_rps)" in " ".join(sim.split())


def test_a_model_served_not_at_all_is_unserved_not_a_latency_miss(tmp_path, run_cli):
    out, plan = _plan(tmp_path, run_cli, 2)
    assert plan["gpus"] == 0 and sum(plan["unmet_rps"].values()) == pytest.approx(10)
    text = " ".join(" ".join(plan["warnings"]).split())
    assert "rounds to no capacity" not in text and "misses the latency objective" not in text
    assert "serves none of the demand of big (unmet_rps)" in text
    assert "unserved" in out and "NO" not in out


def test_undecided_and_missed_models_are_said_apart():
    models = [{"model": "a", "met": False, "decision": "missed"}, {"model": "b", "met": False, "decision": "undecided"},
              {"model": "c", "met": True, "decision": "met"}, {"model": "d", "met": False, "decision": "missed"}]
    words = not_met_words(models, unserved={"d"})
    assert words.startswith("the plan misses the latency objective of a;")
    assert "is not shown to meet the latency objective of b (undecided" in words
    assert "serves none of the demand of d" in words and "of c" not in words


def test_the_met_cell_says_undecided_and_unserved():
    from hetinfra.plan.summary import _verdict

    judged = lambda model, met, decision: SimpleNamespace(model=model, met=met, decision=decision)  # noqa: E731
    assert _verdict(judged("a", True, "met"), set()) == "yes"
    assert "NO" in _verdict(judged("a", False, "missed"), set())
    assert "undecided" in _verdict(judged("a", False, "undecided"), set())
    assert "unserved" in _verdict(judged("a", False, "missed"), {"a"})
