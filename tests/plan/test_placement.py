"""Placement (hetinfra.plan.placement) against hand-solved instances and Coral's ILP in Pyomo/HiGHS."""

from __future__ import annotations

import random

import pyomo.environ as pyo
import pytest

from hetinfra.plan.placement import best_placement, split_layers, stage_orders


def _limit_from(table):
    return lambda node, k, first, last, l: table(node, first, last, l)


def test_hand_solved_two_stages():
    # A is twice as fast per layer as B: 6 layers split 4/2 levels both stages at 25.
    speed = {"A": 100.0, "B": 50.0}
    p = best_placement(["A", "B"], 6, _limit_from(lambda n, f, la, l: speed[n] / l))
    assert p.layers[p.nodes.index("A")] == 4 and p.layers[p.nodes.index("B")] == 2
    assert p.value == pytest.approx(25.0)


def test_memory_limit_caps_a_stage():
    # B cannot hold more than 1 layer (its table drops to 0), so A must carry the other 5.
    def t(n, f, la, l):
        if n == "B":
            return 80.0 if l <= 1 else 0.0
        return 100.0 / l
    p = best_placement(["B", "A"], 6, _limit_from(t))
    assert dict(zip(p.nodes, p.layers)) == {"A": 5, "B": 1}
    assert p.value == pytest.approx(20.0)


def test_infeasible_when_nodes_cannot_hold_the_model():
    assert best_placement(["A", "B"], 10, _limit_from(lambda n, f, la, l: 1.0 if l <= 4 else 0.0)) is None
    assert split_layers([[3.0, 2.0], []], 2) is None


def test_first_and_last_positions_matter():
    # the LM head costs 30 units on the last stage: put it on the fast node
    speed = {"A": 100.0, "B": 40.0}
    p = best_placement(["A", "B"], 8, _limit_from(lambda n, f, la, l: speed[n] / (l + (3 if la else 0))))
    assert p.nodes[-1] == "A"


def test_stage_orders_dedupe_middles():
    assert stage_orders(["A", "B", "B"]) == [("A", "B", "B"), ("B", "A", "B"), ("B", "B", "A")]
    assert len(stage_orders(["A", "B", "C", "D"])) == 12  # (first, last) pairs; middles sorted


def coral_ilp(nodes, layers, table):
    """Coral's placement ILP with one node per stage (x[k,l], y[n,k], z = x*y linearised)."""
    from pyomo.contrib.solver.common.factory import SolverFactory

    K, N, L = len(nodes), range(len(nodes)), range(1, layers + 1)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(K), L, within=pyo.Binary)
    m.y = pyo.Var(N, range(K), within=pyo.Binary)
    m.z = pyo.Var(N, range(K), L, within=pyo.Binary)
    m.T = pyo.Var(within=pyo.NonNegativeReals)
    m.one_count = pyo.Constraint(range(K), rule=lambda m, k: sum(m.x[k, l] for l in L) == 1)
    m.one_stage = pyo.Constraint(N, rule=lambda m, n: sum(m.y[n, k] for k in range(K)) == 1)
    m.one_node = pyo.Constraint(range(K), rule=lambda m, k: sum(m.y[n, k] for n in N) == 1)
    m.total = pyo.Constraint(expr=sum(l * m.x[k, l] for k in range(K) for l in L) == layers)
    m.zx = pyo.Constraint(N, range(K), L, rule=lambda m, n, k, l: m.z[n, k, l] <= m.x[k, l])
    m.zy = pyo.Constraint(N, range(K), L, rule=lambda m, n, k, l: m.z[n, k, l] <= m.y[n, k])
    m.zxy = pyo.Constraint(N, range(K), L, rule=lambda m, n, k, l: m.z[n, k, l] >= m.x[k, l] + m.y[n, k] - 1)
    m.thr = pyo.Constraint(range(K), rule=lambda m, k: m.T <= sum(
        table(nodes[n], k == 0, k == K - 1, l) * m.z[n, k, l] for n in N for l in L))
    m.obj = pyo.Objective(expr=m.T, sense=pyo.maximize)
    res = SolverFactory("highs").solve(m, tee=False, rel_gap=0.0, raise_exception_on_nonoptimal_result=False)
    return res.incumbent_objective


@pytest.mark.parametrize("seed", range(12))
def test_matches_coral_ilp(seed):
    rng = random.Random(seed)
    k = rng.choice([2, 3])
    nodes = [rng.choice("ABC") for _ in range(k)]
    layers = rng.randint(k, 14)
    speed = {n: rng.uniform(20, 120) for n in "ABC"}
    cap = {n: rng.randint(3, 12) for n in "ABC"}
    head = {n: rng.uniform(0, 3) for n in "ABC"}

    def table(n, first, last, l):
        if l > cap[n]:
            return 0.0
        return speed[n] / (l + (head[n] if last else 0.0) + (0.5 if first else 0.0))

    p = best_placement(nodes, layers, _limit_from(table))
    ilp = coral_ilp(nodes, layers, table)
    if p is None:
        assert ilp is None or ilp <= 1e-9
    else:
        assert sum(p.layers) == layers and min(p.layers) >= 1 and sorted(p.nodes) == sorted(nodes)
        assert p.value == pytest.approx(ilp, rel=1e-6)
