"""Replan's diff of a prefill/decode bundle (issue 37): each role's engines beside the instances, as
status and drift show them (a bundle's instances run both roles, so their count alone hides them)."""

from __future__ import annotations

import copy

from hetinfra.document import Plan
from hetinfra.replan.diff import decide, decision_json, render
from tests.compile.split_plan import split_plan
from tests.plan.golden_plans import totals_added_up


def _with_count(doc: dict, count: int) -> Plan:
    doc = copy.deepcopy(doc)
    a = doc["allocations"][0]
    a["cost_usd_per_hour"] = round(a["cost_usd_per_hour"] / a["count"] * count, 4)
    a["count"] = a["instances"] = count
    return Plan.parse(totals_added_up(doc))


def test_a_bundles_change_shows_each_roles_engines():
    doc = split_plan("2P1D")  # 12 replicas of 2 prefill + 1 decode engines, one node each
    running, new = _with_count(doc, 10).allocations, _with_count(doc, 12)
    d = decide(running, new, [], {}, min_savings_pct=0, min_savings_usd_h=0)
    assert "10 -> 12  instance(s) (prefill 20 -> 24, decode 10 -> 12 engines)" in render(d)
    (row,) = decision_json(d)["changes"]
    assert (row["before"], row["after"]) == (10, 12)
    assert row["roles"] == {"prefill": {"before": 20, "after": 24}, "decode": {"before": 10, "after": 12}}


def test_a_colocated_change_has_no_roles():
    doc = split_plan()
    colocated = copy.deepcopy(doc)
    colocated["allocations"][0]["disaggregation"] = None
    d = decide(_with_count(colocated, 10).allocations, _with_count(colocated, 12), [], {}, min_savings_pct=0,
               min_savings_usd_h=0)
    assert "engines)" not in render(d) and decision_json(d)["changes"][0]["roles"] == {}
