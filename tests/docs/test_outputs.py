"""The rules by which a page's shown output is compared with a real run (tests/docs/outputs.py)."""

from __future__ import annotations

from tests.docs.outputs import drift, normalised, refreshed

PRINTED = """chat: $3.72/h, 2 GPUs
│ L4        │         7 │ 10.09 │ 63.1% ($6.37/h)  │
│ L40S      │         2 │  3.72 │ 0.0% ($0.00/h)   │
solver: HiGHS optimal, 90 vars, build 0.00s + solve 0.01s; warm start:
rounded LP ($3.72/h)
wrote /tmp/x/out/chat/: plan.json
"""


def test_timing_paths_and_whitespace_are_normalised():
    assert normalised("build 0.00s + solve 1.5 s at /tmp/x/out", "/tmp/x") == "build Xs + solve Xs at out"
    assert normalised("TTFT 347 ms,  p99 86.8 ms") == "TTFT 347 ms, p99 86.8 ms"  # simulated latencies stay


def test_an_excerpt_in_order_matches():
    shown = ["chat: $3.72/h, 2 GPUs", "│ L40S │ 2 │ 3.72 │ 0.0% ($0.00/h) │",
             "solver: HiGHS optimal, 90 vars, build 0.31s + solve 9.99s; warm start: rounded LP ($3.72/h)",
             "wrote out/chat/: plan.json"]
    assert drift(shown, PRINTED, "/tmp/x") is None


def test_elisions_stand_for_lines_and_for_text():
    assert drift(["chat: ...", "...", "solver: HiGHS ... warm start:"], PRINTED) is None
    assert drift(["chat: ... 9 GPUs"], PRINTED) is not None


def test_a_changed_figure_or_order_drifts():
    found = drift(["│ L4 │ 7 │ 10.09 │ 49.0% ($6.37/h) │"], PRINTED)
    assert found is not None and found.nearest.startswith("│ L4 ")
    assert drift(["│ L40S │", "│ L4 │"], PRINTED) is not None  # shown out of order
    assert drift(["anything"], "") is not None


def test_refresh_mends_what_drifted_and_keeps_the_excerpt():
    shown = ["chat: $5.58/h, 3 GPUs", "...", "│ L4 │ 7 │ 10.09 │ 49.0% ($6.37/h) │", "wrote out/chat/: plan.json"]
    mended = refreshed(shown, PRINTED, "/tmp/x")
    assert mended == ["chat: $3.72/h, 2 GPUs", "...", "│ L4        │         7 │ 10.09 │ 63.1% ($6.37/h)  │",
                      "wrote out/chat/: plan.json"]
    assert drift(mended, PRINTED, "/tmp/x") is None
