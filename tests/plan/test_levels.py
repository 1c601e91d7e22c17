"""A demand profile's off-peak fleets (hetinfra.plan.levels): each distinct fleet of counts_by_period is
judged once, at the busiest period it runs, routed as the gateway routes with the top-up gone."""

from __future__ import annotations

import pytest

from hetinfra.plan.levels import off_peak_views, off_peak_warnings
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


def test_a_fleet_the_judge_misses_is_a_warning_naming_its_periods(committed):
    pr, view = committed
    fleets = off_peak_views(pr, view)
    missed = off_peak_warnings(pr, view, lambda fleet: {"models": [{"model": "chat-8b", "met": False}]})
    assert [w.split(" misses ")[0] for w in missed] == [
        f"the off-peak fleet of profile period(s) {', '.join(map(str, hours))}" for hours, _ in fleets]
    assert all(w.endswith("run the peak's counts in those periods (ignore counts_by_period there)") for w in missed)
    assert off_peak_warnings(pr, view, lambda fleet: {"models": [{"model": "chat-8b", "met": True}]}) == []
