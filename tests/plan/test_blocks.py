"""Verification's choice by block (hetinfra.plan.blocks): each group of linked models takes the
cheapest round in which it met, and the plan made of those choices is kept only where it meets in
simulation and is cheaper than the cheapest round in which every model met."""

from __future__ import annotations

from dataclasses import replace

from types import SimpleNamespace

import pytest

from hetinfra.plan.blocks import choose, group_cost, model_groups
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.result import SolveResult


def _unit(uid: str, model: str, group: tuple[str, str, str], cost: float) -> SolverUnit:
    return SolverUnit(uid, model, cost, 1, ((group, 1),), {"c": 1.0})


def _round(units, caps=None, n=None, **kw) -> SimpleNamespace:
    demand = {(m, "c"): 1.0 for m in sorted({u.model for u in units})}
    problem = AllocationProblem(units=tuple(units), demand=demand, caps=caps or {}, **kw)
    return SimpleNamespace(problem=problem, result=SolveResult(status="optimal", n=n or {}))


A, B, C = (("lab", "r1", "L4"), ("lab", "r2", "L4"), ("lab", "r3", "H100"))


def test_models_that_share_no_capped_group_in_any_round_are_groups_of_their_own():
    units = [_unit("a1", "a", A, 1.0), _unit("b1", "b", B, 1.0), _unit("c1", "c", C, 1.0)]
    assert model_groups([_round(units)]) == [("a",), ("b",), ("c",)]
    # a cap on a group both a and b use links them, in any round (pruning can drop a unit in one)
    linked = units + [_unit("b2", "b", A, 2.0)]
    assert model_groups([_round(units, {A: 4}), _round(linked, {A: 4})]) == [("a", "b"), ("c",)]
    # the same group without a cap links nothing
    assert model_groups([_round(linked)]) == [("a",), ("b",), ("c",)]


@pytest.mark.parametrize("kw", [{"budget": 10.0}, {"objective": "max_throughput"}, {"unmet_penalty": 5.0}])
def test_a_budget_one_demand_scale_or_priced_unmet_demand_is_one_choice(kw):
    units = [_unit("a1", "a", A, 1.0), _unit("b1", "b", B, 1.0)]
    assert model_groups([_round(units, **kw)]) is None


def _sim(**met) -> dict:
    return {"met": all(met.values()), "models": [{"model": m, "met": v} for m, v in met.items()]}


def test_each_group_takes_its_cheapest_round_in_which_it_met():
    units = [_unit("a1", "a", A, 1.0), _unit("b1", "b", B, 1.0)]
    rounds = [(_round(units, n={"a1": 5, "b1": 5}), _sim(a=True, b=True)),
              (_round(units, n={"a1": 3, "b1": 4}), _sim(a=True, b=False)),
              (_round(units, n={"a1": 2, "b1": 3}), _sim(a=False, b=True)),
              (_round(units, n={"a1": 3, "b1": 3}), _sim(a=True, b=True))]  # ties break to the earliest round
    assert group_cost(rounds[1][0], ("a",)) == 3.0
    assert choose(rounds, [("a",), ("b",)]) == [1, 2]
    assert choose(rounds[:1], [("a",), ("b",)]) == [0, 0]
    # a group that met in no round leaves nothing to choose
    assert choose(rounds[1:2], [("a",), ("b",)]) is None


def _fleet(d, models: int = 3) -> str:
    """The first models of benchmarks/bench_scale.py's independent fleet (``write_fleet``, no cap, no
    budget): rounds 4-6 miss in some model after others were credited, so each model's cheapest met
    round is not one round (the models' names seed their simulations: the same names, the same rounds)."""
    import importlib.util

    from tests.plan.golden_plans import REPO

    path = REPO / "benchmarks" / "bench_scale.py"
    spec = importlib.util.spec_from_file_location("bench_scale_under_test", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return str(bench.write_fleet(d, models, linked=False))


@pytest.mark.heavy
def test_a_fleet_of_independent_models_keeps_each_models_cheapest_met_round(tmp_path):
    """The plan kept meets, costs no more than the cheapest round in which every model met (strictly
    less where it is made of several rounds' plans), and each model's plan is from a round in which
    it met. A model a confirmation vetoed (issue 33) met in no round up to the veto: on this fleet
    mistral-7b's plan of rounds 1-6 met on the search's seeds and missed on the confirmation's, so
    every model's plan comes from the rounds after it (composed from several rounds before issue 33)."""
    from hetinfra.plan.pipeline import plan_document
    from hetinfra.plan.verify import simulators

    # 8 models: with estimator-v3's rates the first 3 to 6 all meet first in the same round
    pr, plan = plan_document(_fleet(tmp_path, 8), with_baselines=False, template_cache=False)
    doc = plan.to_dict()
    fid = doc["fidelity"]
    history = {h["round"]: h for h in fid["history"]}
    vetoes = fid["confirmation"]["vetoes"]

    def met_in(h: dict, model: str) -> bool:
        return h["models_met"][model] and not any(model in v["models"] and h["round"] <= v["after_round"]
                                                  for v in vetoes)

    assert fid["met"] and fid["confirmation"]["met"]
    for model, rnd in fid["round_by_model"].items():
        assert met_in(history[rnd], model), (model, rnd)
    all_met = [h["cost_usd_per_hour"] for h in history.values() if all(met_in(h, m) for m in h["models_met"])]
    # the padding's replicas (a model the confirmation still missed after the last veto) come on top of
    # the rounds' plan: here m04-llama-31-70b, whose H100 replica ran 246-248 of its 256 seats (under
    # pressure: judged at 99% on 13 seeds) gets a second one
    price = {a["unit"]: a["price_per_instance_usd_per_hour"] * a["instances"] / max(a["count"], 1)
             for a in doc["allocations"]}
    padding = sum(n * price[u] for p in fid["confirmation"].get("padded", []) for u, n in p["replicas_by_unit"].items()
                  if p["replicas_added"])
    assert doc["cost_usd_per_hour"] - padding <= min(all_met) + 1e-9
    if len(set(fid["round_by_model"].values())) > 1:
        assert doc["cost_usd_per_hour"] - padding < min(all_met) - 1e-9
    # the document's plan meets when judged again from scratch (a new memo), on both seed sets, at the
    # requests per replication it states (fidelity): simulators() would size them on this final plan
    decide, confirm = simulators(pr)
    decide.config = replace(decide.config, requests=fid["replications"]["decide_requests"])
    confirm.config = replace(confirm.config, requests=fid["requests"])
    assert decide(doc)["met"] and confirm(doc)["met"]
