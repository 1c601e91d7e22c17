"""One profile period's fleet (hetinfra.sim.period; `hetinfra simulate --period`): counts_by_period at
the period's demand, routed as the gateway routes (units, not replicas, are weighed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.sim.period import period_view
from tests.plan.conftest import REPO


@pytest.fixture(scope="module")
def committed(example_plans):
    out = example_plans["committed"][0]
    return out, json.loads((out / "plan.json").read_text())


def _view(doc: dict, k: int) -> dict:
    from hetinfra.document.plan import Plan

    return period_view(Plan.model_validate(doc), k, "plan.json")


def _mults(doc) -> list[float]:
    return [float(x) for x in doc["models"][0]["demand_profile"]["multipliers"]]


@settings(max_examples=24, deadline=None)
@given(st.data())
def test_each_period_runs_its_counts_at_its_demand_with_every_class_routed_to_a_running_unit(committed, data):
    _, doc = committed
    mults = _mults(doc)
    k = data.draw(st.integers(0, len(mults) - 1))
    view = _view(doc, k)
    want = {a["unit"]: (a["counts_by_period"][k] if a.get("counts_by_period") else a["count"])
            for a in doc["allocations"]}
    assert {a["unit"]: a["count"] for a in view["allocations"]} == {u: c for u, c in want.items() if c > 0}
    [m] = view["models"]
    assert m["rate_rps"] == pytest.approx(doc["models"][0]["rate_rps"] * mults[k] / max(mults))
    running = {a["unit"] for a in view["allocations"]}
    rows = view["routing"]["chat-8b"]
    assert set(rows) == set(doc["routing"]["chat-8b"])  # no class left unrouted
    assert all(r and {e["unit"] for e in r} <= running for r in rows.values())
    assert sum(e["rps"] for r in rows.values() for e in r) == pytest.approx(m["rate_rps"])
    assert all(sum(e["share"] for e in r) == pytest.approx(1.0, abs=1e-5) for r in rows.values())


def test_a_period_outside_the_profile_or_a_plan_without_one_is_invalid_input(committed, example_plans):
    _, doc = committed
    with pytest.raises(InvalidInputError, match=r"outside the plan's profile periods 0\.\.23"):
        _view(doc, 24)
    chat = json.loads((example_plans["chat"][0] / "plan.json").read_text())
    with pytest.raises(InvalidInputError, match="has no demand profile"):
        _view(chat, 0)


def test_simulate_period_runs_the_night_fleet_and_refuses_bad_periods(committed, example_plans, tmp_path, run_cli):
    out, doc = committed
    night = _mults(doc).index(min(_mults(doc)))
    code, text, err = run_cli("simulate", str(out), "--period", str(night), "--requests", "2000", "--json",
                              "--out", str(tmp_path))
    assert code == 0, err
    sim = json.loads(text)
    assert {u["unit"] for u in sim["units"]} == {a["unit"] for a in doc["allocations"] if not a.get("counts_by_period")}
    [m] = sim["models"]
    assert sim["period"] == night and m["offered_rps"] == pytest.approx(12.0 * min(_mults(doc)), rel=0.05)
    for bad, says in (("24", "outside the plan's profile periods"), ("-1", "-1")):
        code, _, err = run_cli("simulate", str(out), "--period", bad, "--out", str(tmp_path))
        assert code == 2 and says in err and "Traceback" not in err
    code, _, err = run_cli("simulate", str(example_plans["chat"][0]), "--period", "0", "--out", str(tmp_path))
    assert code == 2 and "has no demand profile" in err and "Traceback" not in err


def test_a_plan_with_origins_keeps_each_origins_rows_and_round_trips():
    """services/multi-region.yaml routes each origin by its own row, with the round trip to the unit's
    region in TTFT: at the peak's counts the period's view is the plan's routing as it is; with a
    unit down, each origin's rows lose it, renormalised, round trips kept (none dropped to 0)."""
    from hetinfra.sim.period import fleet_view

    doc = json.loads((REPO / "tests" / "plan" / "golden" / "multi-region.json").read_text())
    peak = {a["unit"]: a["count"] for a in doc["allocations"]}
    same = fleet_view(doc, peak, {})

    def rows_of(routing, key):  # one field of every row, in order
        return [[r[key] for r in rows] for by_o in routing.values() for per in by_o.values() for rows in per.values()]

    for key in ("unit", "region", "network_ms"):
        assert rows_of(same["routing_by_origin"], key) == rows_of(doc["routing_by_origin"], key)
    for key in ("share", "rps"):
        got, want = rows_of(same["routing_by_origin"], key), rows_of(doc["routing_by_origin"], key)
        assert [x for r in got for x in r] == pytest.approx([x for r in want for x in r], abs=1e-6)
    rows = doc["routing_by_origin"]["chat-8b"]
    units = sorted({r["unit"] for per in rows.values() for cls in per.values() for r in cls})
    down = units[0]
    view = fleet_view(doc, {u: c for u, c in peak.items() if u != down}, {"chat-8b": 0.5})
    rtt = {(o, r["unit"]): r["network_ms"] for o, per in rows.items() for cls in per.values() for r in cls}
    for origin, per in view["routing_by_origin"]["chat-8b"].items():
        for cls, got in per.items():
            assert got and down not in {r["unit"] for r in got}
            assert sum(r["share"] for r in got) == pytest.approx(1.0, abs=1e-5)
            assert sum(r["rps"] for r in got) == pytest.approx(0.5 * sum(r["rps"] for r in rows[origin][cls]))
            assert all(r["network_ms"] == rtt.get((origin, r["unit"]), r["network_ms"]) for r in got)


@pytest.mark.parametrize("edit, says", [
    (lambda a: a.update(counts_by_period=[1, 1]), r"allocations\[\d+\]\.counts_by_period has 2 entries: one per profile period \(24\)"),
    (lambda a: a.update(counts_by_period=[a["count"] + 1] * 24), r"counts_by_period runs \d+ instances in a period, more than its count"),
])
def test_per_period_lists_unlike_the_profile_are_invalid_input_for_every_reader(committed, tmp_path, edit, says):
    """The Plan's own checks (hetinfra.document.consistency), so every command that reads plan.json
    refuses it: exit 2 naming the field (simulate --period raised IndexError)."""
    from hetinfra.document import load_plan

    _, doc = committed
    edited = json.loads(json.dumps(doc))
    edit(next(a for a in edited["allocations"] if a.get("counts_by_period")))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(edited))
    with pytest.raises(InvalidInputError, match=says):
        load_plan(path)
