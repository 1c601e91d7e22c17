"""solver.result.settle_flows: the routing a solve extracts carries no flow that the solver's
feasibility tolerance let through (below FLOW_TOL, or on a unit with no instance), for every model;
each key keeps its total and its other flows their proportions. It replaces a case in plan/adapters
(adapter shares summing to 1 - 1e-6 left a 6e-6 req/s base class, routed to a unit that did not run)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.solver.direct import DirectModel
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.result import FLOW_TOL, settle_flows
from hetinfra.solver.solve import solve
from tests.solver.test_adapter_rows import problem as adapters_problem

UNITS = ("u0", "u1", "u2", "u3")


def unit(uid, rate=10.0, cost=1.0, classes=("c", "d")):
    return SolverUnit(uid, "m", cost, 1, ((("aws", "r1", "L4"), 1),), {w: rate for w in classes}, "r1")


flows = st.dictionaries(st.tuples(st.sampled_from(UNITS), st.sampled_from(("c", "d"))),
                        st.one_of(st.floats(1e-9, 9e-7), st.floats(1e-3, 50.0)), min_size=1)


@settings(max_examples=60, deadline=None)
@given(flows, st.sets(st.sampled_from(UNITS), min_size=1))
def test_no_stray_flow_and_every_key_keeps_its_total(raw, running):
    p = AllocationProblem(units=tuple(unit(u) for u in UNITS), demand={("m", "c"): 1.0, ("m", "d"): 1.0})
    n = {u: 2 for u in running}
    flow = {(u, "m", w): v for (u, w), v in raw.items()}
    out = settle_flows(p, n, flow)
    for key in {("m", w) for _, w in raw}:
        before = sum(v for (u, m, w), v in flow.items() if (m, w) == key)
        after = {u: v for (u, m, w), v in out.items() if (m, w) == key}
        assert sum(after.values()) == pytest.approx(before, rel=1e-12)
        assert all(n.get(u, 0) > 0 for u in after), after  # every flow on a unit that runs
        assert all(v >= FLOW_TOL for v in after.values()) or len(after) == 1  # a tiny key goes whole to one
        for u, v in flow.items():  # what was kept is never taken away
            if (u[1], u[2]) == key and v >= FLOW_TOL and n.get(u[0], 0):
                assert after[u[0]] >= v


def test_a_dropped_flow_goes_where_there_is_room():
    """A unit at its capacity takes none of a dropped flow while another unit of the key has room (a
    proportional share pushed a saturated unit past its row: 'loaded 1 > capacity 1')."""
    p = AllocationProblem(units=(unit("full", 3.0), unit("room", 3.0), unit("off", 3.0)), demand={("m", "c"): 1.0})
    out = settle_flows(p, {"full": 1, "room": 1}, {("full", "m", "c"): 3.0, ("room", "m", "c"): 1.0,
                                                   ("off", "m", "c"): 6e-6})
    assert out == {("full", "m", "c"): 3.0, ("room", "m", "c"): pytest.approx(1.0 + 6e-6, rel=1e-12)}


def test_a_class_below_tolerance_is_served_by_a_running_unit():
    """The end-to-end case: a 6e-6 req/s class (what adapter shares of 0.999999 leave their base)
    beside a real one. The solver may route it within tolerance to a unit it buys nothing of; the
    extracted routing sends it to a unit that runs."""
    # fastd's capacity row admits 6e-6 / 1000 instances within HiGHS's tolerance at n = 0 (seen without settling)
    units = (unit("big", 20.0, 1.0), unit("fastd", 1000.0, 5.0, ("d",)))
    p = AllocationProblem(units=units, demand={("m", "c"): 8.0, ("m", "d"): 6e-6})
    res = solve(p)
    assert res.feasible
    assert all(res.n.get(u, 0) > 0 for (u, _, _) in res.flow), res.flow
    assert sum(v for (_, _, w), v in res.flow.items() if w == "d") == pytest.approx(6e-6)


LEVELS = st.sampled_from((0.0, 4e-7, 0.3, 2.0))  # none, tolerance-sized, real


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_direct_path_settles_an_adapters_flows_as_the_pyomo_path_does(data):
    """solver.direct reads a point as solve_pyomo does: counts, adapters held (x > 0.5) and flows,
    settled with what is held, so a key left with no flow goes to a running unit holding its adapter
    on both paths (the direct path once settled without ``holds`` and left such a key where the solver
    put it). Drawn points over tests/solver/test_adapter_rows.py's three units and two adapters."""
    p = adapters_problem([0.5, 1.0])
    dm = DirectModel(p)
    values = [0.0] * len(dm.cost)
    for u, c in dm.n.items():
        values[c] = float(data.draw(st.integers(0, 2), label=f"n[{u}]"))
    for key, c in dm.x.items():
        values[c] = float(data.draw(st.integers(0, 1), label=f"x{key}"))
    for key, c in dm.flow.items():
        values[c] = data.draw(LEVELS, label=f"y{key}")
    counts = {u: int(values[c]) for u, c in dm.n.items() if values[c] > 0.5}
    holds = {key: 1 for key, c in dm.x.items() if values[c] > 0.5}  # as solve_pyomo reads m.x
    raw = {(u, k[0], k[1]): values[c] for (u, k), c in dm.flow.items() if values[c] > 1e-9}
    assert dm.holds(values) == holds
    assert dm.flows(values) == settle_flows(p, counts, raw, holds)
