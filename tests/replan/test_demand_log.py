"""Demand from a request log: parsing with located errors, rate series, size/region mix, spec update."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.replan.demand_log import (apply_to_spec, mix_edges, observe_spec, observed_demand, quantile_edges,
                                        rate_series, read_demand_log, region_mix, size_mix)
from hetinfra.spec.load import load_spec
from hetinfra.spec.models import ModelSpec

REPO = Path(__file__).resolve().parents[2]
HEADER = "timestamp,model,input_tokens,output_tokens,region"
DAY0 = 1714521600  # 2024-05-01T00:00:00Z
IN_EDGES, OUT_EDGES = [0, 250, 1000, 2000], [0, 100, 500, 1000]  # services/chat.yaml's histogram


def write(tmp_path: Path, lines: list[str], name: str = "demand.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def per_interval(k: int) -> int:
    """Requests in 5-minute interval k: 20 + 10 sin(2 pi k / 288), rounded (a diurnal pattern)."""
    return 20 + round(10 * math.sin(2 * math.pi * k / 288))


SIZES = [(100, 50), (200, 300), (600, 80), (1500, 800), (3000, 40)]  # last input clipped to 2000
REGIONS = ["us-east-1", "us-east-1", "eu-west-1", ""]


def diurnal_log(tmp_path: Path, days: int = 3) -> Path:
    """Deterministic rows: per_interval(k) requests spread evenly over each interval, cycling sizes/regions."""
    lines, r = [HEADER], 0
    for k in range(days * 288):
        c = per_interval(k)
        for i in range(c):
            t = DAY0 + k * 300 + (i + 0.5) * 300 / c
            ts = f"{t:.3f}" if r % 2 else datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")
            i_tok, o_tok = SIZES[r % len(SIZES)]
            lines.append(f"{ts},chat-8b,{i_tok},{o_tok},{REGIONS[r % len(REGIONS)]}")
            r += 1
    return write(tmp_path, lines)


def test_rate_series_of_diurnal_log(tmp_path):
    log = read_demand_log(diurnal_log(tmp_path))
    series = rate_series(log, "chat-8b", 300)
    assert len(series) == 3 * 288
    assert [s for s, _ in series[:3]] == [DAY0, DAY0 + 300, DAY0 + 600]
    assert [r for _, r in series] == pytest.approx([per_interval(k) / 300 for k in range(3 * 288)])
    hourly = rate_series(log, "chat-8b", 3600)
    assert len(hourly) == 72
    assert hourly[0][1] == pytest.approx(sum(per_interval(k) for k in range(12)) / 3600)


def test_rate_series_fills_gaps_with_zero(tmp_path):
    # another model's row at 1500 s: the log was still written to the end of m's last interval
    p = write(tmp_path, [HEADER, f"{DAY0 + 10},m,1,1,", f"{DAY0 + 20},m,1,1,", f"{DAY0 + 1210},m,1,1,",
                         f"{DAY0 + 1500},other,1,1,"])
    assert rate_series(read_demand_log(p), "m", 300) == [(DAY0, 2 / 300), (DAY0 + 300, 0.0), (DAY0 + 600, 0.0),
                                                          (DAY0 + 900, 0.0), (DAY0 + 1200, 1 / 300)]


def test_rate_series_leaves_out_intervals_the_log_covers_in_part(tmp_path):
    # the log starts 100 s into its first interval and ends 10 s into its last (cron read it then)
    p = write(tmp_path, [HEADER, f"{DAY0 + 100},m,1,1,", f"{DAY0 + 350},m,1,1,", f"{DAY0 + 610},m,1,1,"])
    assert rate_series(read_demand_log(p), "m", 300) == [(DAY0 + 300, 1 / 300)]


SMALL = [HEADER,
         "2024-05-01T00:00:03Z,a,100,50,us",
         "2024-05-01T00:00:01Z,a,250,100,us",  # out of order: sorted on read
         "2024-05-01T00:00:02Z,b,999,999,eu",
         "2024-05-01T00:00:04Z,a,251,101,eu",
         "2024-05-01T00:00:05Z,a,5000,2000,"]   # beyond the last edges


def test_size_mix_shares_exact(tmp_path):
    log = read_demand_log(write(tmp_path, SMALL))
    assert list(log.timestamps) == sorted(log.timestamps)
    got = [(c.name, c.input_tokens, c.output_tokens, c.share, c.rate_rps)
           for c in size_mix(log, "a", IN_EDGES, OUT_EDGES, rate_rps=8.0)]
    assert got == [("in<=250,out<=100", 250, 100, 0.5, 4.0), ("in<=1000,out<=500", 1000, 500, 0.25, 2.0),
                   ("in<=2000,out<=1000", 2000, 1000, 0.25, 2.0)]
    dropped = size_mix(log, "a", IN_EDGES, OUT_EDGES, outside="drop", rate_rps=3.0)
    assert [(c.name, c.share, c.rate_rps) for c in dropped] == [("in<=250,out<=100", 2 / 3, 2.0),
                                                                ("in<=1000,out<=500", 1 / 3, 1.0)]
    with pytest.raises(InvalidInputError, match="no request for model 'c'"):
        size_mix(log, "c", IN_EDGES, OUT_EDGES)


def test_region_mix_ignores_empty_regions(tmp_path):
    log = read_demand_log(write(tmp_path, SMALL))
    assert region_mix(log, "a") == {"eu": pytest.approx(1 / 3), "us": pytest.approx(2 / 3)}
    assert region_mix(log, "b") == {"eu": 1.0}
    no_region = read_demand_log(write(tmp_path, ["timestamp,model,input_tokens,output_tokens", f"{DAY0},a,1,1"], "n.csv"))
    assert region_mix(no_region, "a") == {}


def test_timestamp_forms_agree(tmp_path):
    rows = ["2024-05-01T00:00:00Z", "2024-05-01T02:00:00+02:00", "2024-05-01 00:00:00", str(DAY0), f"{DAY0}.0"]
    log = read_demand_log(write(tmp_path, [HEADER] + [f"{t},m,1,1," for t in rows]))
    assert list(log.timestamps) == [DAY0] * 5


def test_extra_columns_ignored_and_any_order(tmp_path):
    p = write(tmp_path, ["region,latency_ms,output_tokens,model,input_tokens,timestamp", f"us,12,7,m,5,{DAY0}"])
    log = read_demand_log(p)
    assert (log.models[0], log.input_tokens[0], log.output_tokens[0], log.regions[0]) == ("m", 5, 7, "us")


@pytest.mark.parametrize("row,message", [
    (f"{DAY0},m,abc,5,", "demand.csv:3: input_tokens 'abc' is not a whole number"),
    (f"{DAY0},m,12.5,5,", "demand.csv:3: input_tokens '12.5' is not a whole number"),
    (f"{DAY0},m,5,-1,", "demand.csv:3: output_tokens '-1' is negative"),
    ("yesterday,m,5,5,", "demand.csv:3: timestamp 'yesterday' is neither ISO 8601 nor Unix epoch seconds"),
    ("2024-13-01T00:00:00Z,m,5,5,", "demand.csv:3: timestamp"),
    (f"{DAY0},,5,5,", "demand.csv:3: model is empty"),
    (f"{DAY0},m,5", "demand.csv:3: 3 fields, the header has 5"),
])
def test_bad_rows_name_file_and_line(tmp_path, row, message):
    p = write(tmp_path, [HEADER, f"{DAY0},m,1,1,us", row])
    with pytest.raises(InvalidInputError) as err:
        read_demand_log(p)
    assert message in str(err.value)
    assert err.value.exit_code == 2


def test_missing_column_lists_expected_header(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        read_demand_log(write(tmp_path, ["time,model,input_tokens,output_tokens", f"{DAY0},m,1,1"]))
    assert "demand.csv:1: header lacks column timestamp" in err.value.message
    assert HEADER in err.value.hint


@pytest.mark.parametrize("lines,match", [([], "the demand log is empty"), ([HEADER], "no requests"),
                                         ([HEADER, "", " , , "], "no requests")])
def test_empty_log(tmp_path, lines, match):
    p = tmp_path / "demand.csv"
    p.write_text("\n".join(lines))
    with pytest.raises(InvalidInputError, match=match):
        read_demand_log(p)


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInputError, match="demand log not found"):
        read_demand_log(tmp_path / "nope.csv")


def test_quantile_edges_rule():
    import numpy as np
    sizes = np.arange(1, 1001)
    assert quantile_edges(sizes) == [0, 501, 901, 991, 1000]
    assert quantile_edges(np.array([7, 7, 7])) == [0, 7]
    assert quantile_edges(np.array([0, 0])) == [0, 1]


def test_mix_edges_from_spec_or_quantiles(tmp_path):
    log = read_demand_log(write(tmp_path, SMALL))
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    hist_model = spec.models[0].model_copy(update={"name": "a"})
    assert mix_edges(log, hist_model)[:3] == (IN_EDGES, OUT_EDGES, "clip")
    classes_model = ModelSpec.model_validate({
        "name": "a", "model": "llama-3.1-8b", "source": "x", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        "demand": {"rate_rps": 1, "sizes": {"classes": [{"name": "c", "input_tokens": 9, "output_tokens": 9, "share": 1}]}}})
    in_e, out_e, _, where = mix_edges(log, classes_model)
    assert (in_e, out_e) == ([0, 251, 5000], [0, 101, 2000]) and "quantiles" in where


def test_observed_demand_and_apply_to_spec(tmp_path):
    log = read_demand_log(diurnal_log(tmp_path))
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    obs = observed_demand(log, spec.models[0], interval_s=300, season_s=86400, horizon_s=6 * 3600, buffer=0.1)
    true_peak = max(per_interval(k) for k in range(3 * 288, 3 * 288 + 72)) / 300
    assert obs.forecast.method == "seasonal-trend"
    assert abs(obs.forecast.peak_rps / true_peak - 1) < 0.05
    assert obs.forecast.mape is not None and obs.forecast.mape < 0.05
    assert obs.planned_rps == pytest.approx(obs.forecast.peak_rps * 1.1)
    assert obs.origins == {"us-east-1": pytest.approx(2 / 3), "eu-west-1": pytest.approx(1 / 3)}

    new, notes = apply_to_spec(spec, {"chat-8b": obs})
    demand = new.models[0].demand
    assert demand.rate_rps == pytest.approx(obs.forecast.peak_rps * 1.1)
    # a histogram spec keeps its edges with the observed weights, so requests are drawn inside their
    # buckets as the spec's are (as classes, every request was simulated at its bucket's largest size)
    h = demand.sizes.histogram
    assert demand.sizes.classes is None and h.input_edges == [0, 250, 1000, 2000] and h.output_edges == [0, 100, 500, 1000]
    # SIZES cycles evenly: each of the 5 (in, out) pairs is 1/5 of the requests (3000 clipped into <=2000).
    assert h.weights == [pytest.approx(row, abs=1e-3) for row in ([0.2, 0.2, 0.0], [0.2, 0.0, 0.0], [0.2, 0.0, 0.2])]
    assert demand.origins == obs.origins
    assert spec.models[0].demand.rate_rps == 12  # the input spec is untouched
    assert notes[0].startswith("chat-8b: plan ")


def test_models_absent_from_log_keep_spec_demand(tmp_path):
    log = read_demand_log(write(tmp_path, SMALL))
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    observed, notes = observe_spec(log, spec)
    assert observed == {} and [n.split(" (")[0] for n in notes] == [
        "log model 'a' is not in the spec; ignored", "log model 'b' is not in the spec; ignored"]
    new, notes = apply_to_spec(spec, observed)
    assert new == spec
    assert notes == ["chat-8b: not in the demand log; keeps the spec's demand (12 req/s)"]


@pytest.mark.parametrize("invisible", ["\u200b", "\u00a0", "\u202e"])
def test_a_log_model_differing_by_an_invisible_character_is_named_visibly(tmp_path, invisible):
    """The note escapes what cannot be seen (repr) and points at the spec's model."""
    rows = [HEADER] + [f"{DAY0 + k},chat-8b{invisible}x,100,50," for k in range(3)]
    log = read_demand_log(write(tmp_path, rows), clock=lambda: DAY0 + 3600)
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    _, notes = observe_spec(log, spec)
    assert notes[0].isprintable() and "did you mean 'chat-8b'?" in notes[0], notes


def test_short_log_plans_recent_peak(tmp_path):
    log = read_demand_log(write(tmp_path, SMALL))
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    model = spec.models[0].model_copy(update={"name": "a"})
    obs = observed_demand(log, model, interval_s=1, season_s=60, horizon_s=10)
    assert obs.forecast.method == "recent-peak"
    assert obs.planned_rps == pytest.approx(1.0 * 1.1)  # one request per 1-second interval
    with pytest.raises(InvalidInputError, match="whole number of intervals"):
        observed_demand(log, model, interval_s=7, season_s=60)
    with pytest.raises(InvalidInputError, match="buffer"):
        observed_demand(log, model, buffer=-0.1)


def gateway_log(tmp_path: Path, start_s: float, end_s: float, stray: float | None = None) -> Path:
    """4 req/s of chat-8b written by the gateway's own writer from ``start_s`` to ``end_s`` after
    13:00 (and one stray request ``stray`` s after that, if given)."""
    from hetinfra.gateway.demand import DemandLog as GatewayLog

    path, base = tmp_path / "gateway.csv", DAY0 + 13 * 3600
    writer = GatewayLog(path, region="us-east-1")
    times = [base + start_s + (i + 0.5) / 4 for i in range(int((end_s - start_s) * 4))]
    for t in times + ([times[-1] + stray] if stray is not None else []):
        writer.record("chat-8b", 300, 200, "c", 150, 200, when=t)
    writer.close()
    return path


@pytest.mark.parametrize("start_s,end_s,stray", [(0, 7200 + 20, None), (0, 7200, 5.0), (150, 7200 + 200, None)])
def test_a_partly_covered_interval_does_not_make_the_backtest_fail(tmp_path, start_s, end_s, stray):
    """Cron reads the log mid-interval: 20 s (or one request) into the last interval, or a log that
    began mid-interval, must not read as a collapse of a steady 4 req/s (MAPE 117% and 9992% before:
    enough to hold back every removal of the run)."""
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    log = read_demand_log(gateway_log(tmp_path, start_s, end_s, stray), clock=lambda: DAY0 + 86400)
    obs = observed_demand(log, spec.models[0], interval_s=300, season_s=86400, horizon_s=3600)
    assert obs.forecast.mape == pytest.approx(0.0, abs=1e-9)
    assert all(f.mape == pytest.approx(0.0, abs=1e-9) for f in obs.origin_forecasts.values())
    assert obs.forecast.peak_rps == pytest.approx(4.0)
    said = [n for n in obs.notes if "left out of the history and the backtest" in n]
    assert len(said) == 1 + (start_s % 300 != 0)  # the last interval, and a first one begun mid-interval


def test_a_classes_spec_keeps_its_classes_where_every_request_fits_one(tmp_path):
    """Each request counts in the smallest spec class holding it (never planned below its size), and the
    classes keep their names, so the running routing and the spec still describe a re-plan's classes;
    a request no class holds falls back to the log's quantile classes (replan audit B3)."""
    from hetinfra.replan.demand_log import spec_class_mix

    model = ModelSpec.model_validate({
        "name": "a", "model": "llama-3.1-8b", "source": "x", "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        "demand": {"rate_rps": 1, "sizes": {"classes": [
            {"name": "long", "input_tokens": 5000, "output_tokens": 2000, "share": 1},
            {"name": "short", "input_tokens": 250, "output_tokens": 100, "share": 3}]}}})
    fits = [line for line in SMALL if ",b," not in line]  # model a: 100/50, 250/100, 251/101, 5000/2000
    got = spec_class_mix(read_demand_log(write(tmp_path, fits)), model, 8.0)
    assert [(c.name, c.input_tokens, c.output_tokens, c.share, c.rate_rps) for c in got] == [
        ("long", 5000, 2000, 0.5, 4.0), ("short", 250, 100, 0.5, 4.0)]
    too_big = fits + ["2024-05-01T00:00:06Z,a,5001,10,us"]
    assert spec_class_mix(read_demand_log(write(tmp_path, too_big, "big.csv")), model, 8.0) is None
    obs = observed_demand(read_demand_log(write(tmp_path, too_big, "big2.csv")), model, interval_s=1, season_s=2,
                          horizon_s=1)
    assert "quantiles" in obs.edges_from and all(c.name.startswith("in<=") for c in obs.classes)
