"""planning.solver: the hand-solved instances give the same optimum with HiGHS (the direct path) and
with CBC (Pyomo's SolverFactory on the Pyomo model of the same rows, ``solver.backends``); a solver
that is not available is a one-line input error (exit 2)."""

from __future__ import annotations

import pytest
import yaml

from hetinfra.errors import InvalidInputError
from tests.solver import test_allocation_features as feat
from tests.solver import test_hand_solved as hand


def cbc_runs() -> bool:
    from hetinfra.solver.backends import pyomo_solver

    try:
        pyomo_solver("cbc")
    except InvalidInputError:
        return False
    return True


needs_cbc = pytest.mark.skipif(not cbc_runs(), reason="no cbc on PATH and PuLP's bundled CBC cannot run here")


def _hand(tmp_path, **planning):
    return hand._spec(tmp_path, planning={"mip_gap": 0, **planning})


def _cap_y(tmp_path):
    doc = hand._spec(tmp_path)
    doc["infrastructure"]["availability"] = [{"cloud": "lab", "region": "r1", "gpu": "Y", "max_gpus": 0}]
    return doc


#: name -> (spec builder, cost $/h, demand scale): the hand-worked optima of tests/solver
INSTANCES = {
    "mix two GPU types": (lambda t: _hand(t), 3.0, 1.0),
    "headroom": (lambda t: _hand(t, headroom=0.2), 5.0, 1.0),
    "max_throughput": (lambda t: hand._spec(t, budget_usd_per_hour=5, planning={"objective": "max_throughput",
                                                                                 "mip_gap": 0}), 5.0, 17 / 11),
    "availability cap": (_cap_y, 9.0, 1.0),
    "joint contention": (lambda t: feat._contention(t, [feat.model("a", 10), feat.model("b", 10)]), 4.0, 1.0),
    "locality": (lambda t: feat.spec(t, [feat.model("a", 10, origins={"r1": 1, "r2": 1})],
                                     [feat.offer("n", "G", 1.0, "r1"), feat.offer("n", "G", 2.0, "r2")],
                                     [feat.prof("a", "G", 10)], planning={"locality": 0.5}), 3.0, 1.0),
    "spot fraction": (lambda t: feat.spec(t, [{**feat.model("a", 40), "max_spot_fraction": 0.5}],
                                          [feat.offer("n", "G", 1.0, spot=0.5)], [feat.prof("a", "G", 10)],
                                          infrastructure={"clouds": ["lab"], "spot": True}), 3.0, 1.0),
    "unmet demand": (lambda t: feat.spec(t, [feat.model("a", 15)], [feat.offer("n", "G", 1.0)], [feat.prof("a", "G", 10)],
                                         infrastructure={"clouds": ["lab"], "availability": [
                                             {"cloud": "lab", "region": "r1", "gpu": "G", "max_gpus": 1}]},
                                         planning={"allow_unmet": True, "unmet_penalty_usd_per_rps_hour": 50}), 1.0, 1.0),
}


@needs_cbc
@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_cbc_finds_highs_optimum(tmp_path, plan_json, name):
    build, cost, scale = INSTANCES[name]
    plans = {}
    for solver in ("highs", "cbc"):
        doc = build(tmp_path)
        doc["planning"] = {**doc.get("planning", {}), "solver": solver}
        plans[solver] = plan_json(tmp_path, doc, "--no-baselines")
    for solver, plan in plans.items():
        assert plan["solver"]["name"] == solver
        assert plan["cost_usd_per_hour"] == pytest.approx(cost, rel=1e-6), solver
        assert plan["demand_scale"] == pytest.approx(scale, rel=1e-5), solver
    assert plans["cbc"]["unmet_rps"] == pytest.approx(plans["highs"]["unmet_rps"])


def test_unavailable_solver_is_exit_2(tmp_path, run_cli):
    doc = _hand(tmp_path, solver="no_such_solver")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify")
    assert code == 2
    assert "planning.solver: 'no_such_solver' is not available" in err and "Traceback" not in err + out


def test_solver_name_is_checked_by_the_spec(tmp_path, run_cli):
    doc = _hand(tmp_path, solver="Gurobi 11")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify")
    assert code == 2 and "solver" in err
