"""Demand-log timestamps outside the sane window of now (before 2020-01-01 UTC, or more than a day
ahead) are skipped with a note, never taken as current; the window follows an injected clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.replan.demand_log import AHEAD_S, EARLIEST_S, read_demand_log

HEADER = "timestamp,model,input_tokens,output_tokens,region"
NOW = 1_790_000_000.0  # 2026-09-21, the injected clock


def _log(tmp_path: Path, stamps: list[str]) -> Path:
    p = tmp_path / "demand.csv"
    p.write_text("\n".join([HEADER] + [f"{t},m,10,10," for t in stamps]) + "\n")
    return p


@pytest.mark.parametrize("stamp", ["0", "86400", "1970-01-01T00:00:00Z", "2019-12-31T23:59:59Z", "3376684800",
                                   "2076-01-01T00:00:00Z", "2026-09-23T00:00:00+00:00", "9999-12-31T00:00:00"])
def test_a_stamp_outside_the_window_is_skipped_and_said(tmp_path, stamp):
    log = read_demand_log(_log(tmp_path, [stamp, str(NOW - 60), str(NOW)]), clock=lambda: NOW)
    assert log.timestamps.tolist() == [NOW - 60, NOW]
    assert len(log.skipped) == 1 and "1 row(s) stamped before 2020-01-01 or more than a day after now" in \
        log.skipped[0] and "demand.csv:2" in log.skipped[0]


def test_a_log_with_no_sane_stamp_is_an_error(tmp_path):
    with pytest.raises(InvalidInputError, match="no request is stamped between 2020-01-01 and a day after now"):
        read_demand_log(_log(tmp_path, ["1", "2", "1970-05-01T00:00:00Z"]), clock=lambda: NOW)


@settings(max_examples=80, derandomize=True, deadline=None)
@given(st.lists(st.floats(0, 4_102_444_800, allow_nan=False), min_size=1, max_size=8),
       st.floats(EARLIEST_S, 4_000_000_000, allow_nan=False))
def test_property_every_kept_stamp_is_in_the_window_of_the_clock(tmp_path_factory, stamps, now):
    path = _log(tmp_path_factory.mktemp("w"), [repr(t) for t in stamps] + [repr(now)])
    log = read_demand_log(path, clock=lambda: now)
    kept = log.timestamps.tolist()
    assert all(EARLIEST_S <= t <= now + AHEAD_S for t in kept)
    assert len(kept) == sum(EARLIEST_S <= t <= now + AHEAD_S for t in stamps) + 1
