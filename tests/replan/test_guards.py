"""Replan guards: a capped capacity cut per run, the minimum history observed demand needs, and the
triggers listing only what changed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hetinfra.document import Allocation, Plan
from hetinfra.replan.diff import decide
from hetinfra.replan.run import ReplanOptions, _this_run, min_history_s
from hetinfra.replan.safe import cap_cut, fleet_gpus, render_stages, stage_counts
from tests.plan.golden_plans import golden_allocation, golden_plan_with


def _alloc(unit: str, count: int, gpus: int = 1, price: float = 1.0) -> Allocation:
    return Allocation.model_validate(golden_allocation(unit=unit, deployment_unit=unit, count=count, instances=count, nodes_per_replica=1,
                             gpus_per_instance=gpus, cloud="aws", region="us-east-1", instance_type=f"{unit}.xl",
                             gpu="L4", spot=False, price_per_instance_usd_per_hour=price,
                             cost_usd_per_hour=price * count))


def _plan(*allocs: Allocation) -> Plan:
    """The golden plan with ``allocs``: what replan's stages are computed against (the typed plan)."""
    return Plan.parse(golden_plan_with([a.to_dict() for a in allocs],
                                       cost_usd_per_hour=sum(a.cost_usd_per_hour for a in allocs)))


def test_a_cut_of_90_percent_is_capped_at_half_then_continues():
    running = [_alloc("a", 10)]
    new = _plan(_alloc("a", 1))
    stages, complete = stage_counts(running, new, None)
    capped, was_capped, line = cap_cut(stages, running, new, 0.5)
    assert was_capped and "keeps 5 of 10 running GPUs" in line
    assert capped[-1][1] == {"a": 5}
    # the next run starts from 5 and may cut to 3 (>= 2.5), then 2, then 1
    running = [_alloc("a", 5)]
    stages, _ = stage_counts(running, new, None)
    assert cap_cut(stages, running, new, 0.5)[0][-1][1] == {"a": 3}


def test_make_before_break_keeps_the_floor_in_the_break_stage():
    running = [_alloc("a", 4, gpus=2)]
    new = _plan(_alloc("b", 1, gpus=1))
    stages, _ = stage_counts(running, new, None)
    capped, was_capped, _ = cap_cut(stages, running, new, 0.5)
    assert was_capped and [n for n, _ in capped] == ["make", "break"]
    info = {"a": running[0], "b": new.allocations[0]}
    assert fleet_gpus(capped[-1][1], info) >= 4  # half of 8 GPUs kept
    assert capped[0] == stages[0]  # the make stage is untouched


def test_small_cuts_and_growth_are_not_capped():
    running = [_alloc("a", 4)]
    for new in (_plan(_alloc("a", 2)), _plan(_alloc("a", 9))):
        stages, _ = stage_counts(running, new, None)
        assert cap_cut(stages, running, new, 0.5)[1] is False


def test_force_and_the_dry_run_show_what_this_run_applies():
    running, new = [_alloc("a", 10)], _plan(_alloc("a", 1))
    lines: list[str] = []
    stages, complete, capped = _this_run(running, new, ReplanOptions(), lines.append)
    assert capped and not complete and any("would apply" in x for x in lines)
    assert render_stages(stages, running) == ["stage break: a 10 -> 5"]
    stages, complete, capped = _this_run(running, new, ReplanOptions(force=True, apply=True), lines.append)
    assert complete and not capped and render_stages(stages, running) == ["stage break: a 10 -> 1"]


@pytest.mark.parametrize("profile,given,hours", [(None, None, 24), ([1.0] * 168, None, 168), ([1.0] * 24, 2.5, 2.5)])
def test_minimum_history_is_the_profile_period_or_a_day(profile, given, hours):
    model = SimpleNamespace(demand=SimpleNamespace(profile=profile))
    assert min_history_s(SimpleNamespace(models=[model]), given) == hours * 3600


def test_triggers_list_only_prices_that_changed():
    offers = [SimpleNamespace(cloud="aws", region="us-east-1", instance_type="a.xl", price=lambda spot: 1.00004),
              SimpleNamespace(cloud="aws", region="us-east-1", instance_type="b.xl", price=lambda spot: 2.5)]
    running = [_alloc("a", 1, price=1.0), _alloc("b", 1, price=2.0)]
    d = decide(running, _plan(*running), offers, {}, min_savings_pct=5, min_savings_usd_h=1)
    assert d.triggers == ["b.xl in aws/us-east-1: $2/h -> $2.5/h (+25.0%)"]


def _kept(counts: dict, running: list[Allocation]) -> int:
    """GPUs of the running replicas ``counts`` keeps, counted independently of hetinfra.replan.safe."""
    return sum(min(counts.get(a.unit, 0), a.count) * a.gpus_per_instance for a in running)


def test_the_cap_counts_only_running_gpus_not_what_the_run_adds():
    # issue 36: 10 running GPUs, the new plan keeps 3 of them and adds 2 new ones: 7 of 10 would go
    running = [_alloc("a", 10)]
    new = _plan(_alloc("a", 3), _alloc("b", 2))
    stages, _ = stage_counts(running, new, None)
    capped, was_capped, line = cap_cut(stages, running, new, 0.5)
    assert was_capped and _kept(capped[-1][1], running) == 5
    assert "keeps 5 of 10 running GPUs (the new plan keeps 3 of them" in line


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from([1, 2, 4, 8])), min_size=1,
                max_size=5), st.sampled_from([0.0, 0.25, 0.5, 0.9]))
def test_property_a_capped_run_keeps_its_share_of_the_running_gpus(fleet, max_cut):
    """Whatever runs and whatever the new plan is, the last stage of a capped run keeps at least
    (1 - max_cut) of the GPUs that run now, counted without what the run adds; the only exception
    moves one replica whose loss the run's additions make up for."""
    running = [_alloc(f"u{k}", now, gpus) for k, (now, _, gpus) in enumerate(fleet) if now]
    planned = [_alloc(f"u{k}", new, gpus) for k, (_, new, gpus) in enumerate(fleet) if new]
    if not running or not planned:
        return
    new = _plan(*planned)
    stages, _ = stage_counts(running, new, None)
    capped, was_capped, line = cap_cut(stages, running, new, max_cut)
    before = sum(a.count * a.gpus_per_instance for a in running)
    kept = _kept(capped[-1][1], running) if capped else before
    floor = before * (1 - max_cut)
    if kept < floor - 1e-9:  # the small-fleet exception: one replica, made up for by additions
        info = {a.unit: a for a in running} | {a.unit: a for a in planned}
        assert fleet_gpus(capped[-1][1], info) >= floor - 1e-9
        assert kept >= floor - max(a.gpus_per_instance for a in running)
    if was_capped:
        assert f"keeps {kept} of {before} running GPUs" in line


def test_a_forecast_over_the_error_threshold_is_reported_and_removes_nothing():
    from hetinfra.replan.forecast import Forecast
    from hetinfra.replan.run import unreliable_forecasts

    def obs(mape):
        return SimpleNamespace(forecast=Forecast(1.0, [1.0], "recent-peak", mape, 0.1, 12, ""))

    lines = unreliable_forecasts({"chat": obs(3.47), "code": obs(0.2), "new": obs(None)}, 0.5)
    assert lines == ["chat: the forecast's backtest error (MAPE 347%) exceeds 50% (--max-forecast-error-pct); it "
                     "does not drive cuts: this run makes no removal"]
    running, new = [_alloc("a", 10)], _plan(_alloc("a", 1), _alloc("b", 4))
    for force in (False, True):
        told: list[str] = []
        stages, complete, capped = _this_run(running, new, ReplanOptions(force=force), told.append, hold_cuts=True)
        assert capped and not complete and stages[-1][1]["a"] == 10 and stages[-1][1]["b"] == 4  # adds, cuts nothing
        assert any("a forecast's backtest error is over --max-forecast-error-pct" in x for x in told)


def test_a_missing_state_dir_is_exit_2_and_creates_nothing(tmp_path, run_cli):
    from pathlib import Path

    spec = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"
    missing = tmp_path / "gone" / "out"
    code, stdout, err = run_cli("replan", str(spec), "--state", str(missing), "--json")
    assert code == 2 and "--state" in err and "no such directory" in err
    assert not (tmp_path / "gone").exists()  # neither replan.log nor .replan.lock made it
    assert '"exit_code": 2' in stdout


@pytest.mark.parametrize("text", ["[]", '{"allocations": 3}'])
def test_a_broken_state_json_is_refused_with_state_jsons_hint(tmp_path, text):
    """A state.json that is no object was read as a plan.json and told to re-plan; it is named as what it is."""
    from hetinfra.document import running
    from hetinfra.errors import InvalidInputError

    (tmp_path / "state.json").write_text(text)
    with pytest.raises(InvalidInputError) as exc:
        running(tmp_path / "state.json")
    assert exc.value.exit_code == 2 and "state.json" in str(exc.value) and "hetinfra apply" in (exc.value.hint or "")


def test_a_demand_log_url_answering_binary_is_exit_4_not_a_traceback(tmp_path):
    from hetinfra.cli.replan import fetch_demand
    from hetinfra.errors import FeedError
    from tests.conftest import QuietHandler, loopback_server

    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"timestamp,model\n\xff\xfe\x00")

    with loopback_server(Handler) as (_, base):
        with pytest.raises(FeedError, match="is not UTF-8 text"):
            fetch_demand(f"{base}/admin/demand.csv", tmp_path)
    assert not (tmp_path / "gateway").exists()


def test_a_spiky_log_whose_forecast_backtests_at_1000_percent_cuts_nothing(tmp_path, run_cli):
    """End to end: 2 h of 0.2 req/s with one 5-minute spike at 3 req/s. The recent-peak forecast
    (2.3 req/s) misses the last hour by ~1000%: the run may add, but removes no running replica."""
    import json
    import time
    from pathlib import Path

    spec = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(spec), "--out", str(out), "--no-verify", "--no-baselines")
    assert code == 0, err
    now = time.time()
    t0, rows, t = now - 7200, [], now - 7200
    while t < now:
        rows.append(f"{t:.3f},chat-8b,200,90,")
        t += 1 / (3.0 if t0 + 1200 <= t < t0 + 1500 else 0.2)
    log = tmp_path / "demand.csv"
    log.write_text("timestamp,model,input_tokens,output_tokens,region\n" + "\n".join(rows) + "\n")
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--demand-log", str(log), "--min-history-h",
                                "1", "--no-refresh", "--json")
    doc = json.loads(stdout)
    assert code == 10 and doc["outcome"] == "proposed", err
    assert doc["forecast_holds"] and "exceeds 50%" in doc["forecast_holds"][0]
    assert doc["this_run"][-1] == "stage break: no replica changes"
    assert "does not drive cuts" in (out / "replan.log").read_text()


def test_a_rotation_of_the_demand_log_that_is_a_fifo_is_exit_2_not_a_hang(tmp_path):
    import os

    from hetinfra.cli.replan import fetch_demand
    from hetinfra.errors import InvalidInputError

    log = tmp_path / "demand.csv"
    log.write_text("timestamp,model,input_tokens,output_tokens,region\n1790000000,m,1,1,\n")
    os.mkfifo(tmp_path / "demand.csv.2")
    with pytest.raises(InvalidInputError, match="demand.csv.2 is not a regular file"):
        fetch_demand(str(log), tmp_path)
    (tmp_path / "demand.csv.2").unlink()
    (tmp_path / "demand.csv.1").write_bytes(b"timestamp,model\n\xff\n")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        fetch_demand(str(log), tmp_path)
