"""A demand profile's off-peak fleets (hetinfra.plan.levels): each distinct fleet of counts_by_period is
judged with each model at its largest demand over the periods it runs, routed as the gateway routes with the top-up gone, and mended
(replicas given back, judged again on fresh seeds) where it misses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hetinfra.plan.levels import mended_off_peak, off_peak_views
from tests.plan.conftest import REPO


@pytest.fixture(scope="module")
def committed():
    from hetinfra.plan.pipeline import plan_document
    from hetinfra.plan.plan_json import simulation_view

    pr, _doc = plan_document(REPO / "services" / "committed.yaml", with_baselines=False, verify=False)
    return pr, simulation_view(pr)


def test_each_distinct_off_peak_fleet_is_judged_at_its_busiest_period_with_every_class_routed(committed):
    """services/committed.yaml: committed L4s all day and on-demand top-ups at the busier hours. Each
    fleet other than the peak's is judged once, at the largest demand among the periods that run it;
    a class the peak routed to a top-up that is down goes to the units that stay (every class routed,
    the fleet's whole demand)."""
    pr, view = committed
    mults = [float(x) for x in view["models"][0]["demand_profile"]["multipliers"]] if "demand_profile" in view["models"][0] \
        else list(pr.inputs.spec.models[0].demand.profile)
    fleets = off_peak_views(pr, view)
    assert fleets and mults.index(max(mults)) not in {h for hours, _ in fleets for h in hours}
    seen: set = set()
    peak = {a["unit"]: a["count"] for a in view["allocations"]}
    for hours, fleet in fleets:
        assert not seen & set(hours)
        seen |= set(hours)
        assert {a["unit"]: a["count"] for a in fleet["allocations"]} != peak
        [m] = fleet["models"]
        assert m["rate_rps"] == pytest.approx(max(mults[h] for h in hours) * 12.0)
        units = {a["unit"] for a in fleet["allocations"]}
        rows = fleet["routing"]["chat-8b"]
        assert all(r and {e["unit"] for e in r} <= units for r in rows.values())
        assert sum(e["rps"] for r in rows.values() for e in r) == pytest.approx(m["rate_rps"])


class _Judge:
    """A stand-in for the confirmation's judge: ``meets(fleet view)`` decides chat-8b; records each
    judgement's fleet and the models sent to fresh seeds."""

    def __init__(self, meets):
        self.meets, self.seen, self.freshened = meets, [], []

    def __call__(self, fleet):
        self.seen.append({a["unit"]: a["count"] for a in fleet["allocations"]})
        return {"models": [{"model": m["name"], "met": self.meets(fleet)} for m in fleet["models"]], "units": []}

    def fresh(self, models):
        self.freshened.append(list(models))


def _running(fleet) -> int:
    return sum(a["count"] for a in fleet["allocations"])


def test_a_fleet_that_misses_gets_replicas_back_until_it_meets_each_judged_on_fresh_seeds(committed):
    """A fleet the judge misses with fewer than N replicas running gets one back at a time (never
    above the unit's peak count), re-judged on fresh seeds each time; counts_by_period and the
    plan's average cost include them, and the record says so. The peak is untouched."""
    pr, view = committed
    fleets = off_peak_views(pr, view)
    need = max(_running(f) for _, f in fleets) + 1  # more than any off-peak fleet runs: each must grow
    judge = _Judge(lambda fleet: _running(fleet) >= need)
    mended, records, warnings = mended_off_peak(pr, view, judge)
    assert warnings == [] and [r["periods"] for r in records] == [hours for hours, _ in fleets]
    assert all(r["met"] and r["missed"] == [] and r["replicas_added"] for r in records)
    assert judge.freshened and all(f == ["chat-8b"] for f in judge.freshened)
    assert mended.result.n == pr.result.n
    for before, after in zip(pr.result.periods, mended.result.periods):
        assert all(after["counts"].get(u, 0) <= pr.result.n[u] for u in after["counts"])
        grown = sum(after["counts"].values()) - sum(before["counts"].values())
        assert grown >= 0 and (sum(after["counts"].values()) >= need or grown == 0)
    for r in records:  # each record's replicas are exactly what its periods' counts gained
        assert sum(r["replicas_added"].values()) == need - min(_running(f) for h, f in fleets if h == r["periods"])
    from hetinfra.plan.purchase import average_count

    assert sum(average_count(mended, u) for u in pr.result.n) > sum(average_count(pr, u) for u in pr.result.n)


def test_a_fleet_that_never_meets_runs_the_peaks_counts_and_is_a_warning_naming_its_periods(committed):
    pr, view = committed
    fleets = off_peak_views(pr, view)
    mended, records, warnings = mended_off_peak(pr, view, _Judge(lambda fleet: False))
    assert [w.split(" misses ")[0] for w in warnings] == [
        f"the off-peak fleet of profile period(s) {', '.join(map(str, hours))}" for hours, _ in fleets]
    assert all(w.endswith("run the peak's counts in those periods (ignore counts_by_period there)") for w in warnings)
    assert all(not r["met"] and r["missed"] == ["chat-8b"] for r in records)
    peak = {u: c for u, c in pr.result.n.items() if c > 0}
    assert all({u: c for u, c in lv["counts"].items() if c > 0} == peak for lv in mended.result.periods)


def test_a_fleet_that_meets_is_unchanged(committed):
    pr, view = committed
    judge = _Judge(lambda fleet: True)
    mended, records, warnings = mended_off_peak(pr, view, judge)
    assert warnings == [] and judge.freshened == [] and len(judge.seen) == len(off_peak_views(pr, view))
    assert all(r["met"] and r["replicas_added"] == {} for r in records)
    assert mended.result.periods == pr.result.periods


def test_a_spent_work_budget_judges_nothing_and_says_so(committed):
    pr, view = committed
    judge = _Judge(lambda fleet: True)
    mended, records, warnings = mended_off_peak(pr, view, judge, more=lambda: False)
    assert judge.seen == [] and records == [] and len(warnings) == len(off_peak_views(pr, view))
    assert all("was not simulated (the work budget" in w for w in warnings)
    assert mended.result.periods == pr.result.periods


def test_the_summary_states_each_off_peak_fleet_met_mended_or_missing():
    from hetinfra.document.fidelity import OffPeakFleet
    from hetinfra.plan.summary_promise import _off_peak_lines

    fleets = [OffPeakFleet(periods=[0, 1], met=True, replicas_added={}, missed=[]),
              OffPeakFleet(periods=[2], met=True, replicas_added={"u1": 1, "u2": 1}, missed=[]),
              OffPeakFleet(periods=[3], met=False, replicas_added={"u1": 1}, missed=["chat"])]
    [line] = _off_peak_lines(SimpleNamespace(confirmation=SimpleNamespace(off_peak=fleets)))
    assert line.startswith("off-peak: 3 fleet(s) of counts_by_period judged")
    assert "period(s) 2 met with 2 replica(s) given back; period(s) 3 still miss chat" in line
    [line] = _off_peak_lines(SimpleNamespace(confirmation=SimpleNamespace(off_peak=fleets[:1])))
    assert "all met" in line
    assert _off_peak_lines(SimpleNamespace(confirmation=SimpleNamespace(off_peak=[]))) == []


def _profiled(counts_by_level: list[dict], mults: list[dict], **problem):
    """A plan as levels.py reads it: units a (spot, 2 GPUs each, one cap) and b, with per-level counts."""
    from hetinfra.solver.problem import Period
    from hetinfra.solver.result import SolveResult

    periods = [Period(1 / len(mults), tuple(sorted(m.items())), (k,)) for k, m in enumerate(mults)]
    units = {"ua": SimpleNamespace(model="a", spot=True, gpus=2, gpu_use=((("c", "r", "H100"), 2),), cost=4.0),
             "ub": SimpleNamespace(model="b", spot=False, gpus=1, gpu_use=((("c", "r", "L4"), 1),), cost=1.0)}
    peak = {u: max(lv.get(u, 0) for lv in counts_by_level) for u in units}
    result = SolveResult("optimal", n=peak, periods=[{"counts": dict(c), "load": {}} for c in counts_by_level])
    prob = SimpleNamespace(periods=periods, demand={("a", "x"): 1.0, ("b", "x"): 1.0}, caps={}, elastic_caps=False,
                           max_spot_fraction={}, units=[SimpleNamespace(id=u, **vars(x)) for u, x in units.items()])
    for k, v in problem.items():
        setattr(prob, k, v)
    return SimpleNamespace(problem=prob, result=result, units=units)


def test_a_fleet_run_by_several_levels_judges_each_model_at_its_own_largest_demand_there():
    """Two levels run the same counts; a runs at 0.6 in the first, b at 0.7 in the second: the fleet
    is judged with a at 0.6 and b at 0.7 (the level busiest in sum would have judged a at 0.3)."""
    from hetinfra.plan.levels import _fleets

    pr = _profiled([{"ua": 1, "ub": 1}, {"ua": 1, "ub": 1}, {"ua": 2, "ub": 2}],
                   [{"a": 0.6, "b": 0.3}, {"a": 0.3, "b": 0.7}, {"a": 1.0, "b": 1.0}])
    [(levels, counts, scale)] = _fleets(pr)
    assert levels == [0, 1] and counts == {"ua": 1, "ub": 1} and scale == pytest.approx({"a": 0.6, "b": 0.7})


def test_a_replica_given_back_keeps_the_spot_fraction_the_caps_and_the_budget():
    from hetinfra.plan.levels import _allowed

    base = ([{"ua": 1, "ub": 2}, {"ua": 2, "ub": 2}], [{"a": 0.5, "b": 0.5}, {"a": 1.0, "b": 1.0}])
    pr = _profiled(*base)
    levels = [dict(lv) for lv in pr.result.periods]
    assert _allowed(pr, {"ua": 1, "ub": 2}, "ua", [0], levels, None)
    spot = _profiled(*base, max_spot_fraction={"a": 0.5})  # a's GPUs are all spot: one more breaks half
    assert not _allowed(spot, {"ua": 1, "ub": 2}, "ua", [0], levels, None)
    capped = _profiled(*base, caps={("c", "r", "H100"): 3})  # 2 replicas of 2 GPUs: 4 > 3
    assert not _allowed(capped, {"ua": 1, "ub": 2}, "ua", [0], levels, None)
    assert _allowed(capped, {"ua": 1, "ub": 2}, "ub", [0], levels, None)  # b uses no H100
    # the horizon's average: (4 + 2) / 2 + (8 + 2) / 2 = 8 now; a's replica in level 0 adds 2
    assert _allowed(pr, {"ua": 1, "ub": 2}, "ua", [0], levels, 10.0)
    assert not _allowed(pr, {"ua": 1, "ub": 2}, "ua", [0], levels, 9.99)
