"""Decomposition, the direct HiGHS path and the feasibility-first heuristic (issue 16), hand-solved.

Units below are (id, model, $/h, GPUs, group, {class: req/s per instance}, region, spot).
"""

from __future__ import annotations

import pytest

from hetinfra.solver.direct import DirectModel
from hetinfra.solver.heuristic import feasible_start
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve, solve_pyomo


def unit(uid, model, cost, gpu, rates, region="r1", spot=False, gpus=1):
    return SolverUnit(uid, model, cost, gpus, ((("lab", region, gpu), gpus),), dict(rates), region, spot)


# Two models, each can use the cheap X (shared group lab/r1/X) or the dear Y (own group per model).
# a: 15 req/s; X serves 10/inst at $1, Ya 10/inst at $1.5. b: 8 req/s; X serves 4 at $1, Yb 8 at $2.5.
# Alone: a = 2 X ($2), b = 2 X ($2): 4 X. With X capped at 3 GPUs, jointly: best is
# $4.5, two ways: a 1 X + 1 Ya ($2.5) with b 2 X ($2), or a 2 X ($2) with b 1 Yb ($2.5)
# (a 2 X + b 1 X + 1 Yb = $5.5; a 2 Ya + b 2 X = $5).
SHARED = (unit("xa", "a", 1.0, "X", {"c": 10.0}), unit("ya", "a", 1.5, "Ya", {"c": 10.0}),
          unit("xb", "b", 1.0, "X", {"c": 4.0}), unit("yb", "b", 2.5, "Yb", {"c": 8.0}))
DEMAND = {("a", "c"): 15.0, ("b", "c"): 8.0}


def shared(**kw) -> AllocationProblem:
    return AllocationProblem(units=SHARED, demand=DEMAND, **kw)


def test_unlinked_models_are_solved_alone_and_give_the_joint_optimum():
    r = solve(shared(), time_limit_s=10, mip_gap=0)
    assert r.method == "decomposed" and [b["method"] for b in r.blocks] == ["independent", "independent"]
    assert r.n == {"xa": 2, "xb": 2} and r.objective == pytest.approx(4.0)
    assert solve_pyomo(shared(), time_limit_s=10, mip_gap=0).objective == pytest.approx(4.0)


def test_a_slack_shared_cap_keeps_the_per_model_answer():
    r = solve(shared(caps={("lab", "r1", "X"): 4}), time_limit_s=10, mip_gap=0)
    assert r.blocks == [dict(r.blocks[0], models=["a", "b"], method="independent")]
    assert r.objective == pytest.approx(4.0) and r.gap == pytest.approx(0.0)


def test_a_binding_shared_cap_is_solved_jointly_and_matches_the_monolithic_optimum():
    p = shared(caps={("lab", "r1", "X"): 3})
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert [b["method"] for b in r.blocks] == ["joint"] and r.blocks[0]["models"] == ["a", "b"]
    assert r.n in ({"xa": 1, "ya": 1, "xb": 2}, {"xa": 2, "yb": 1}) and r.objective == pytest.approx(4.5)
    assert solve(p, time_limit_s=10, mip_gap=0, decompose=False).objective == pytest.approx(4.5)
    assert solve_pyomo(p, time_limit_s=10, mip_gap=0).objective == pytest.approx(4.5)
    assert r.bound == pytest.approx(4.5, rel=1e-6)  # proven: the gap is against a real bound


def test_budget_links_only_when_it_binds():
    slack = solve(shared(budget=5.0), time_limit_s=10, mip_gap=0)
    assert slack.method == "decomposed" and slack.objective == pytest.approx(4.0)
    # a binding budget with unmet demand allowed: the whole problem becomes one joint block
    p = shared(budget=3.0, unmet_penalty=0.5)
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert r.method == "joint" and r.blocks[0]["method"] == "joint (budget)"
    assert r.cost(p) <= 3.0 + 1e-9
    assert r.objective == pytest.approx(solve_pyomo(p, time_limit_s=10, mip_gap=0).objective)
    assert not solve(shared(budget=3.5), time_limit_s=10, mip_gap=0).feasible  # $4 is the least


@pytest.mark.parametrize("kw", [
    {}, {"caps": {("lab", "r1", "X"): 3}}, {"budget": 4.6, "caps": {("lab", "r1", "X"): 3}},
    {"headroom": 0.2}, {"routing": "sliced", "slice_factor": 4},
    {"running": {"ya": 2, "yb": 1}, "churn_hours": 2.0}, {"unmet_penalty": 0.05},
    {"objective": "max_throughput", "budget": 6.0},
    {"max_spot_fraction": {"a": 0.5}},
    {"locality": 0.5, "local_demand": {("a", "r1"): 15.0, ("b", "r1"): 4.0}, "caps": {("lab", "r1", "X"): 3}},
])
def test_direct_highs_path_gives_the_pyomo_reference_optimum(kw):
    units = SHARED + (unit("sa", "a", 0.4, "X", {"c": 10.0}, spot=True),)
    p = AllocationProblem(units=units, demand=DEMAND, **kw)
    direct = solve(p, time_limit_s=10, mip_gap=0, decompose=False)
    ref = solve_pyomo(p, time_limit_s=10, mip_gap=0)
    assert direct.status == ref.status == "optimal"
    assert direct.objective == pytest.approx(ref.objective, rel=1e-6)
    assert DirectModel(p).size()["integer_variables"] == ref.size["integer_variables"]


def _ledger_checks(p: AllocationProblem, counts: dict[str, int]) -> None:
    units = {u.id: u for u in p.units}
    for g, cap in p.caps.items():
        assert sum(dict(units[u].gpu_use).get(g, 0) * c for u, c in counts.items()) <= cap
    if p.budget is not None:
        assert sum(units[u].cost * c for u, c in counts.items()) <= p.budget + 1e-9
    for m, f in p.max_spot_fraction.items():
        tot = sum(units[u].gpus * c for u, c in counts.items() if units[u].model == m)
        assert sum(units[u].gpus * c for u, c in counts.items() if units[u].model == m and units[u].spot) <= f * tot
    o = DirectModel(p).with_counts(counts, 10)  # a routing exists that meets demand and locality
    assert o.has_solution and o.status == "optimal"


def test_heuristic_respects_a_shared_cap():
    p = shared(caps={("lab", "r1", "X"): 3})
    counts, _ = feasible_start(p)
    _ledger_checks(p, counts)
    assert sum(c for u, c in counts.items() if u.startswith("x")) <= 3


def test_heuristic_respects_the_budget_and_spot_fraction():
    units = SHARED + (unit("sa", "a", 0.4, "S", {"c": 10.0}, spot=True),)
    p = AllocationProblem(units=units, demand=DEMAND, budget=4.0, max_spot_fraction={"a": 0.5})
    counts, obj = feasible_start(p)
    _ledger_checks(p, counts)
    assert counts.get("sa", 0) == 1 and obj <= 4.0  # half of a's GPUs on spot: 1 S + 1 X
    assert not feasible_start(p.replace(budget=2.0))  # nothing serves both for $2


def test_heuristic_respects_locality():
    # X in r1 is cheap; locality 0.5 of 10 req/s from r2 needs a unit in r2 (Z, dearer).
    units = (unit("x1", "m", 1.0, "X", {"c": 10.0}, region="r1"), unit("z2", "m", 3.0, "Z", {"c": 10.0}, region="r2"))
    p = AllocationProblem(units=units, demand={("m", "c"): 20.0}, local_demand={("m", "r2"): 10.0}, locality=0.5)
    counts, obj = feasible_start(p)
    _ledger_checks(p, counts)
    assert counts == {"x1": 2, "z2": 1} or counts == {"x1": 1, "z2": 1}
    assert obj == pytest.approx(solve_pyomo(p, time_limit_s=10, mip_gap=0).objective)


def test_heuristic_swaps_to_a_dearer_unit_when_a_cap_binds():
    # the greedy fills the cheap X up to its cap for model a first; local search keeps it feasible
    p = shared(caps={("lab", "r1", "X"): 2})
    counts, obj = feasible_start(p)
    _ledger_checks(p, counts)
    ref = solve_pyomo(p, time_limit_s=10, mip_gap=0)
    assert obj >= ref.objective - 1e-9
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert r.objective == pytest.approx(ref.objective)


def test_node_limit_is_deterministic_and_reported():
    p = shared(caps={("lab", "r1", "X"): 3})
    a = solve(p, time_limit_s=10, mip_gap=0, max_nodes=1)
    b = solve(p, time_limit_s=10, mip_gap=0, max_nodes=1)
    assert (a.n, a.objective, a.bound, a.blocks) == (b.n, b.objective, b.bound, b.blocks)
    assert not a.safety_stop and a.max_nodes == 1


@pytest.mark.parametrize("caps", [{}, {("lab", "r1", "X"): 3}])
def test_a_model_with_nothing_running_pays_churn_like_in_the_joint_problem(caps):
    # a has one X running; b has nothing running, so every instance of b is new and pays churn too:
    # blocks are solved with the whole running fleet, not their own share of it
    p = shared(caps=caps, running={"xa": 1}, churn_hours=0.5)
    joint = solve_pyomo(p, time_limit_s=10, mip_gap=0)
    split = solve(p, time_limit_s=10, mip_gap=0)
    assert split.objective == pytest.approx(joint.objective)
    assert split.bound <= joint.objective + 1e-6


def _fleet(seed: int, models: int = 5) -> AllocationProblem:
    """Models of two classes on three GPU types in two regions, rates and prices drawn from ``seed``;
    X capped per region, so each model alone is solved with caps (merged, then capped)."""
    import random

    rnd = random.Random(seed)
    units, demand = [], {}
    for i in range(models):
        m = f"m{i}"
        for g, price in (("X", 1.0), ("Y", 2.2), ("Z", 3.9)):
            for r, region in enumerate(("r1", "r2")):
                for gpus in (1, 2, 4):
                    rates = {"s": rnd.uniform(2, 9) * gpus * price, "l": rnd.uniform(0.5, 3) * gpus * price}
                    units.append(SolverUnit(f"{m}-{g}{gpus}-{region}", m, price * gpus * (1 + 0.05 * r) * rnd.uniform(0.9, 1.1),
                                            gpus, ((("lab", region, g), gpus),), rates, region, False))
        demand[(m, "s")], demand[(m, "l")] = rnd.uniform(5, 60), rnd.uniform(1, 20)
    return AllocationProblem(units=tuple(units), demand=demand, caps={("lab", "r1", "X"): 12, ("lab", "r2", "X"): 12})


@pytest.mark.parametrize("seed", (0, 3))  # 0: caps link models; 3: the start wins
def test_models_solved_ahead_in_threads_give_what_solving_in_order_gives(monkeypatch, seed):
    """solver.ahead solves the models alone in threads: the result and the memo's entries (and
    their order) are those of solving them one after the other, with and without a start."""
    import threading

    import hetinfra.solver.ahead as ahead
    import hetinfra.solver.decompose as decompose
    import hetinfra.solver.memo as memo

    p = _fleet(seed)
    threads = set()
    real = decompose._solve_alone
    monkeypatch.setattr(decompose, "_solve_alone",
                        lambda *a, **kw: threads.add(threading.current_thread().name) or real(*a, **kw))
    runs = {}
    for cores in (1, 4):
        monkeypatch.setattr(ahead, "cores", lambda cores=cores: cores)
        memo.clear()
        first = solve(p, time_limit_s=60, mip_gap=0.01)
        again = solve(p.replace(demand={k: v * 0.97 for k, v in p.demand.items()}), time_limit_s=60, mip_gap=0.01,
                      start=first.n)
        runs[cores] = [(r.n, r.flow, r.objective, r.bound, r.blocks, r.warm_start) for r in (first, again)], list(memo._memo())
    assert runs[1] == runs[4]
    assert any(name.startswith("hetinfra-solve") for name in threads)  # the threads did run
