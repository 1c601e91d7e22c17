"""One formulation (``solver.rows``): the direct HiGHS matrix and the Pyomo model are made from the
same compiled rows and agree on random problems; the heuristic's counts keep the rows it books
against; ``verify`` (the independent re-check) accepts every answer."""

from __future__ import annotations

import math

import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.solver.direct import DirectModel
from hetinfra.solver.heuristic import feasible_start
from hetinfra.solver.model import build_model
from hetinfra.solver.problem import AdapterHold, AllocationProblem, SolverUnit
from hetinfra.solver.rows import FAMILIES, compile_rows
from hetinfra.solver.solve import solve, solve_pyomo, verify


@st.composite
def problems(draw) -> AllocationProblem:
    """1-2 models, each on 2-4 units over two regions and three GPU kinds, with optional caps,
    budget, spot fraction, locality and a running fleet."""
    units, demand, local = [], {}, {}
    for m in ("a", "b")[:draw(st.integers(1, 2))]:
        demand[(m, "c")] = float(draw(st.integers(1, 30)))
        for i in range(draw(st.integers(2, 4))):
            gpu, region = draw(st.sampled_from(("G", "H", "K"))), draw(st.sampled_from(("r1", "r2")))
            gpus = draw(st.integers(1, 2))
            units.append(SolverUnit(f"{m}{i}", m, float(draw(st.integers(1, 8))), gpus, ((("lab", region, gpu), gpus),),
                                  {"c": float(draw(st.integers(2, 20)))}, region, spot=draw(st.booleans())))
        if draw(st.booleans()):
            local[(m, "r1")] = demand[(m, "c")] / 2
    caps = {("lab", r, g): draw(st.integers(2, 12)) for r in ("r1", "r2") for g in ("G", "H") if draw(st.booleans())}
    return AllocationProblem(
        units=tuple(units), demand=demand, caps=caps, budget=draw(st.sampled_from((None, 40.0, 80.0))),
        headroom=draw(st.sampled_from((0.0, 0.2))),
        max_spot_fraction={m: draw(st.sampled_from((1.0, 0.5))) for m, _ in demand},
        local_demand=local, locality=draw(st.sampled_from((0.0, 0.5))),
        running={units[0].id: 1} if draw(st.booleans()) else {}, churn_hours=0.5)


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(problems())
def test_direct_and_pyomo_paths_agree(p):
    fast = solve(p, time_limit_s=20, mip_gap=0, decompose=False)  # the direct matrix, whole
    reference = solve_pyomo(p, time_limit_s=20, mip_gap=0)
    assert fast.feasible == reference.feasible
    if fast.feasible:
        assert fast.objective == pytest.approx(reference.objective, rel=1e-6, abs=1e-6)
        assert verify(p, fast) == [] and verify(p, reference) == []


@SETTINGS
@given(problems())
def test_heuristic_counts_keep_the_rows(p):
    found = feasible_start(p)
    if found is None:
        return
    counts, _ = found
    r = compile_rows(p)
    x = [0.0] * len(r.cost)
    for u, k in counts.items():
        x[r.n[u]] = float(k)
    for (family, key), (lb, ub, idx, val) in zip(r.families, r.rows):
        if all(j in r.n.values() for j in idx) and family != "cover":
            act = sum(a * x[j] for j, a in zip(idx, val))
            assert lb - 1e-6 <= act <= ub + 1e-6, (family, key)
    # and a routing exists for them: the counts are a complete start
    assert DirectModel(p).with_counts(counts, 10).status == "optimal"


def test_every_family_is_one_pyomo_constraint_of_its_name():
    p = AllocationProblem(
        units=(SolverUnit("x", "m", 1.0, 1, ((("lab", "r1", "X"), 1),), {"c": 10.0}, "r1", spot=True),
               SolverUnit("y", "m", 2.0, 1, ((("lab", "r2", "Y"), 1),), {"c": 12.0, "c~a": 12.0, "c~b": 12.0}, "r2",
                          slots=2)),
        demand={("m", "c"): 15.0, ("m", "c~a"): 1.0, ("m", "c~b"): 1.0}, caps={("lab", "r1", "X"): 4}, budget=9.0,
        max_spot_fraction={"m": 0.5}, local_demand={("m", "r2"): 5.0}, locality=0.5, running={"y": 1},
        churn_hours=1.0, tied=(("x", "y"),), nested=(("x", "y"),),
        adapters=(AdapterHold("a", "m", (("m", "c~a"),)), AdapterHold("b", "m", (("m", "c~b"),))),
        tied_holds=((("y", "a"), ("y", "b")),))
    r = compile_rows(p, cuts=True)
    m = build_model(p, cuts=True)
    names = {f.__name__.removeprefix("add_") for f in FAMILIES}
    assert {family for family, _ in r.families} == names  # the instance exercises every family
    rows = sum(1 for _ in m.component_data_objects(pyo.Constraint, active=True))
    assert rows == len(r.rows)
    for family, key in r.families:
        con = getattr(m, family)
        data = con if key is None else con[key]
        lb, ub, idx, val = r.rows[r.families.index((family, key))]
        assert (data.lower is None and math.isinf(lb)) or pyo.value(data.lower) == lb
        assert (data.upper is None and math.isinf(ub)) or pyo.value(data.upper) == ub
    dm = DirectModel(p)
    assert dm.rows == r.rows and dm.cost == r.cost and dm.cols_ub == r.ub


@SETTINGS
@given(problems(), st.sampled_from((None, 3.0)), st.booleans())
def test_a_starts_objective_floor_is_below_its_priced_objective(p, unmet, elastic):
    """solver.block skips pricing a candidate start whose ``objective_floor`` reaches the best start's
    objective: the floor must never exceed what pricing the start gives (churn, unmet demand and
    extra GPUs only add), and is None where it cannot be stated (a negative coefficient). Checked on
    the counts of the heuristic's start and of the optimum, each with one more instance of a unit."""
    p = p.replace(unmet_penalty=unmet, elastic_caps=elastic, budget=None if elastic else p.budget)
    dm = DirectModel(p)
    found, best = feasible_start(p), solve(p, time_limit_s=20, mip_gap=0, decompose=False)
    starts = ([found[0]] if found else []) + ([best.n] if best.feasible else [])
    checked = 0
    for counts in starts + [{**n, u.id: n.get(u.id, 0) + 1} for n in starts for u in p.units[:2]]:
        floor, priced = dm.objective_floor(counts), dm.with_counts(counts, 10)
        if floor is not None and priced.has_solution and priced.status == "optimal":
            assert floor <= priced.objective + 1e-9, (counts, floor, priced.objective)
            checked += 1
    assert checked or not starts or dm.objective_floor(starts[0]) is None
