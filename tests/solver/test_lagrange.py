"""Lagrangian relaxation of shared caps with repair (solver/lagrange.py), hand-solved, and the merged
per-model relaxation it solves. Units are (id, model, $/h, GPU group, {class: req/s}, region)."""

from __future__ import annotations

import pytest

import hetinfra.solver.decompose as decompose
from hetinfra.solver.merge import merge_duplicates
from hetinfra.solver.problem import AllocationProblem, SolverUnit
from hetinfra.solver.solve import solve, solve_pyomo


def unit(uid, model, cost, region, gpu="X", rate=10.0, gpus=1, spot=False):
    return SolverUnit(uid, model, cost, gpus, ((("lab", region, gpu), gpus),), {"c": rate}, region, spot)


# Models a and b each need 10 req/s = one X anywhere. X costs $1 in r1, $1.1 in r2, $1.2 in r3;
# r1 and r2 hold one X each (shared by both models), r3 is uncapped. Alone both take r1 ($2 together,
# breaking r1's cap). Jointly: one in r1 and one in r2, $2.1. Lagrangian: at a price mu = 0.1 on
# r1's cap each model pays $1.1 wherever it goes, L = 2 x 1.1 - 0.1 x 1 = 2.1 = the optimum.
REGIONAL = tuple(unit(f"{m}{r}", m, cost, r) for m in ("a", "b") for r, cost in (("r1", 1.0), ("r2", 1.1), ("r3", 1.2)))
DEMAND = {("a", "c"): 10.0, ("b", "c"): 10.0}
CAPS = {("lab", "r1", "X"): 1, ("lab", "r2", "X"): 1}


@pytest.fixture
def lagrangian_always(monkeypatch):
    monkeypatch.setattr(decompose, "JOINT_MAX_UNITS", 0)


def test_lagrangian_bound_closes_the_gap_by_hand(lagrangian_always):
    p = AllocationProblem(units=REGIONAL, demand=DEMAND, caps=CAPS)
    r = solve(p, time_limit_s=10, mip_gap=0)
    (blk,) = r.blocks
    assert blk["method"] == "lagrangian" and blk["models"] == ["a", "b"] and blk["iterations"] >= 2
    assert r.objective == pytest.approx(2.1) and r.bound == pytest.approx(2.1, abs=1e-6)
    assert sorted(r.n) in (["ar1", "br2"], ["ar2", "br1"]) and set(r.n.values()) == {1}
    assert r.status == "optimal" and solve_pyomo(p, time_limit_s=10, mip_gap=0).objective == pytest.approx(2.1)


def test_lagrangian_plan_keeps_the_caps_when_only_the_uncapped_region_is_left(lagrangian_always):
    # r2 holds nothing: the second model must go to r3 ($1.2): $2.2; mu on r1 up to 0.2 proves it
    p = AllocationProblem(units=REGIONAL, demand=DEMAND, caps={("lab", "r1", "X"): 1, ("lab", "r2", "X"): 0})
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert r.blocks[0]["method"] == "lagrangian"
    assert r.objective == pytest.approx(2.2) and r.n.get("ar2", 0) + r.n.get("br2", 0) == 0
    assert r.bound <= 2.2 + 1e-9 and r.bound >= 2.0 - 1e-9  # a bound, never above the optimum


def test_small_linked_components_take_the_lagrangian_where_it_closes():
    p = AllocationProblem(units=REGIONAL, demand=DEMAND, caps=CAPS)
    r = solve(p, time_limit_s=10, mip_gap=0)
    assert r.blocks[0]["method"] == "lagrangian" and r.objective == pytest.approx(2.1)
    assert solve(p, time_limit_s=10, mip_gap=0, decompose=False).objective == pytest.approx(2.1)


def _grid(n_models=5, regions=4):
    """Models of 7..19 req/s over X (10 req/s/GPU, 1- and 2-GPU sizes), Y (6 req/s, dearer per req/s)
    and an uncapped Z; X and Y capped at 3 GPUs per region: the alone plans break the caps."""
    units, demand = [], {}
    for i in range(n_models):
        m = f"m{i}"
        demand[(m, "c")] = 7.0 + 3 * i
        for j in range(regions):
            r, f = f"r{j}", 1 + 0.03 * j
            units += [unit(f"{m}-x1-{r}", m, 1.0 * f, r, "X", 10.0), unit(f"{m}-x2-{r}", m, 1.9 * f, r, "X", 20.0, 2),
                      unit(f"{m}-y1-{r}", m, 0.7 * f, r, "Y", 6.0), unit(f"{m}-z1-{r}", m, 1.6 * f, r, "Z", 10.0)]
    caps = {("lab", f"r{j}", g): 3 for j in range(regions) for g in ("X", "Y")}
    return AllocationProblem(units=tuple(units), demand=demand, caps=caps)


def test_lagrangian_matches_the_pyomo_reference_within_the_gap(lagrangian_always):
    p = _grid()
    ref = solve_pyomo(p, time_limit_s=30, mip_gap=0)
    r = solve(p, time_limit_s=30, mip_gap=0.01)
    assert r.blocks[0]["method"] == "lagrangian"
    assert r.objective >= ref.objective - 1e-6  # a plan: never below the optimum
    assert r.bound <= ref.objective + 1e-6  # a bound: never above it
    assert (r.objective - r.bound) / r.objective <= 0.01 + 1e-9
    again = solve(p, time_limit_s=30, mip_gap=0.01)
    assert (again.n, again.objective, again.bound, again.blocks) == (r.n, r.objective, r.bound, r.blocks)


def test_merge_keeps_the_cheapest_of_each_interchangeable_set():
    p = AllocationProblem(units=REGIONAL, demand=DEMAND, caps=CAPS, budget=1.0)
    m = merge_duplicates(p)
    assert [u.id for u in m.units] == ["ar1", "br1"] and m.caps == {} and m.budget is None
    # prices on r1's group (a Lagrangian multiplier) move the choice; r2 wins a tie on the id
    assert [u.id for u in merge_duplicates(p, {"ar1": 0.3, "br1": 0.1}).units] == ["ar2", "br1"]


def test_merge_keeps_locality_regions_and_running_units_apart():
    p = AllocationProblem(units=REGIONAL, demand=DEMAND, locality=0.5, local_demand={("a", "r3"): 4.0},
                          running={"br2": 1}, churn_hours=1.0)
    ids = [u.id for u in merge_duplicates(p).units]
    # a: r3 is a locality region (kept apart), r1 the cheapest of the rest; b: br2 runs (always kept
    # apart), and of the others br1 (1.0 + churn 1.0) beats br3 (1.2 + 1.2)
    assert ids == ["ar1", "ar3", "br1", "br2"]


def _repair_problem():
    """A repair's MIP: one model of ``_grid`` (16 units) at 25 req/s with one GPU per capped group left."""
    p = _grid(1, 4)
    return p.replace(demand={("m0", "c"): 25.0}, caps={g: 1 for g in p.caps})


def test_a_repair_mip_starts_from_the_greedy_plan_and_finds_the_cold_optimum(monkeypatch):
    import hetinfra.solver.lagrange as lagrange
    from hetinfra.solver.direct import DirectModel

    q = _repair_problem()
    assert len(q.units) >= lagrange.WARM_MIN_UNITS and q.caps
    starts = []
    real = DirectModel.mip
    monkeypatch.setattr(DirectModel, "mip", lambda self, **kw: starts.append(kw.get("start")) or real(self, **kw))
    warm = lagrange._solve_mip(q, None, mip_gap=0.0, max_nodes=2000, deadline=1e18)
    monkeypatch.setattr(lagrange, "WARM_MIN_UNITS", 10**9)  # below the threshold: cold, as before
    cold = lagrange._solve_mip(q, None, mip_gap=0.0, max_nodes=2000, deadline=1e18)
    assert starts[0] is not None and starts[1] is None
    assert warm.objective == pytest.approx(cold.objective, abs=1e-9)  # at mip_gap 0 both are the optimum


def test_a_clock_cut_at_a_repairs_start_is_reported(monkeypatch):
    """The start's fixed-count LP cut by the clock: without its start the MIP may find another plan, so
    the cut must surface (SafetyStopped: ``solver.linked`` reports it), never fall back silently."""
    import hetinfra.solver.lagrange as lagrange
    from hetinfra.solver.direct import DirectModel, Outcome
    from hetinfra.solver.result import SafetyStopped

    monkeypatch.setattr(DirectModel, "with_counts", lambda self, counts, time_limit_s: Outcome("time_limit"))
    with pytest.raises(SafetyStopped):
        lagrange._solve_mip(_repair_problem(), None, mip_gap=0.0, max_nodes=2000, deadline=1e18)


def test_units_whose_flows_travel_differently_are_not_merged_and_subproblems_keep_their_own_round_trips():
    """Routing by origin (AllocationProblem.network_ms, the objective's tie-break): a1 in r1 and a2 in r2
    cost the same and serve the same; a's clients are in r1, 40 ms from r2. Merged as interchangeable,
    the stand-in (a1, the lower id) would price a2's flows with its own round trips, or the other way
    round; kept apart, the merged relaxation routes to the near one. A model's subproblem keeps only
    its own units' round trips (they were the whole fleet's, and every model's memo key moved with
    any other model's units)."""
    units = (unit("a1", "a", 1.0, "r2"), unit("a2", "a", 1.0, "r1"), unit("b1", "b", 1.0, "r1"))
    p = AllocationProblem(units=units, demand={("a", "c"): 10.0, ("b", "c"): 10.0},
                          network_ms={("a1", ("a", "c")): 40.0, ("b1", ("b", "c")): 5.0})
    merged = merge_duplicates(p)
    assert [u.id for u in merged.units] == ["a1", "a2", "b1"]
    assert merged.network_ms == p.network_ms
    r = solve(merged, time_limit_s=10, mip_gap=0)
    assert r.n == {"a2": 1, "b1": 1} and r.objective == pytest.approx(2.0 + 1e-7 * 5.0 * 10.0)
    # the Pyomo model reads the same objective (solver.rows), and sliced routing weighs slices by req/s
    by_pyomo = solve_pyomo(merged, time_limit_s=10, mip_gap=0)
    assert by_pyomo.n == r.n and by_pyomo.objective == pytest.approx(r.objective, abs=1e-9)
    sliced = solve(merged.replace(routing="sliced", slice_factor=4), time_limit_s=10, mip_gap=0)
    assert sliced.n == r.n and sliced.objective == pytest.approx(r.objective, abs=1e-9)
    only_a = p.replace(units=tuple(u for u in units if u.model == "a"))
    assert only_a.network_ms == {("a1", ("a", "c")): 40.0}
