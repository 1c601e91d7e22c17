"""live_read.live_lines reads state.json's ``live`` through its model (document.state.LiveRead): a read
written by an older version (state_main_a57321e.json: no costs, units without path) or with any
subset of its keys prints '?' where a key is missing, where it raised KeyError (a traceback from
`hetinfra status --no-refresh`); a bundle's role counts are bounded like the unit's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.deploy.live_read import live_lines
from hetinfra.document.state import LiveRead

OLD = json.loads((Path(__file__).parent / "data" / "state_main_a57321e.json").read_text())["live"]
FULL_UNIT = {"path": "pulumi", "nodes": 2, "desired": 3, "live": 2, "unhealthy": 0, "lost": 1, "replacing": 0,
             "stalled": 0, "running_instances": 5, "cost_usd_per_hour": 295.84,
             "roles": {"prefill": {"engines_per_replica": 1, "planned": 3, "live": 2, "nodes_per_replica": 1,
                                   "nodes_planned": 3, "nodes_live": 2}}}
FULL = {"read_at": "2026-12-05T12:00:00Z", "refreshed": True, "desired_replicas": 3, "live_replicas": 2,
        "cost_usd_per_hour": 295.84, "planned_cost_usd_per_hour": 355.01, "drift": ["u: 2 of 3 replica(s) live"],
        "units": {"u": FULL_UNIT}}


def test_an_older_read_prints_question_marks_for_what_it_lacks():
    lines = live_lines(OLD)
    assert lines[0].startswith("live: 2 of 3 replica(s); $?/h running (planned $?/h)")
    assert lines[2].split()[0] == "?" and lines[2].split()[-1] == "?"


@settings(max_examples=30, deadline=None)
@given(st.sets(st.sampled_from(sorted(FULL))), st.sets(st.sampled_from(sorted(FULL_UNIT))))
def test_any_subset_of_a_reads_keys_prints(top, unit_keys):
    live = {k: v for k, v in FULL.items() if k in top}
    if "units" in live:
        live["units"] = {"u": {k: v for k, v in FULL_UNIT.items() if k in unit_keys}}
    lines = live_lines(live)
    assert lines and all(isinstance(x, str) for x in lines)


def test_a_roles_count_out_of_bounds_is_refused():
    bad = json.loads(json.dumps(FULL))
    bad["units"]["u"]["roles"]["prefill"]["nodes_live"] = -3
    with pytest.raises(ValidationError, match="nodes_live"):
        LiveRead.model_validate(bad)
