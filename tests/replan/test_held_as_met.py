"""A move forced by the new plan's cost alone, held where the running fleet still meets
(hetinfra.plan.still_meets judges it; hetinfra.replan.diff.held_as_met records it)."""

from __future__ import annotations

from hetinfra.replan.diff import FORCED, HOLD, Decision, held_as_met


def test_a_forced_move_held_says_why_and_keeps_its_other_triggers():
    d = Decision(FORCED, [], 10.0, 10.0, 11.0, ["L40S price up", "the running fleet no longer meets the demand or "
                                                                 "caps; the new plan costs more"], costlier=True)
    held = held_as_met(d, "the running fleet still meets")
    assert held.kind == HOLD and held.note == "the running fleet still meets" and held.triggers == ["L40S price up"]
