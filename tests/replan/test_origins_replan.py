"""Re-planning per origin (issue 25): the demand log's region column is the client's origin; each
origin gets its own forecast, and a model whose spec keeps an origin's requests local is planned at
the sum of its origins' peaks (they peak at different hours), with the spec's residency kept."""

from __future__ import annotations

import math

import pytest

from hetinfra.replan.demand_log import apply_to_spec, observed_demand, read_demand_log
from hetinfra.replan.origins import per_origin_series
from hetinfra.spec.load import load_spec
from hetinfra.spec.origins import OriginSpec
from tests.replan.test_demand_log import DAY0, HEADER, REPO, write

EU, US = "eu-west-1", "us-east-1"


def rate(origin: str, k: int) -> int:
    """Requests in 5-minute interval k: Europe peaks at 09:00 UTC, the US at 15:00 (same height)."""
    peak_h = 9 if origin == EU else 15
    return 10 + round(8 * math.cos(2 * math.pi * (k / 12 - peak_h) / 24))


def two_origin_log(tmp_path, days: int = 3):
    lines = [HEADER]
    for k in range(days * 288):
        for origin in (EU, US):
            c = rate(origin, k)
            lines += [f"{DAY0 + k * 300 + (i + 0.5) * 300 / c:.3f},chat-8b,100,50,{origin}" for i in range(c)]
    lines[1:] = sorted(lines[1:], key=lambda x: float(x.split(",")[0]))
    return read_demand_log(write(tmp_path, lines))


def spec_with(origins):
    spec, _, _ = load_spec(REPO / "services" / "chat.yaml")
    m = spec.models[0]
    demand = m.demand.model_copy(update={"origins": origins})
    return spec.model_copy(update={"models": [m.model_copy(update={"demand": demand})]})


def observe(log, spec):
    return observed_demand(log, spec.models[0], interval_s=300, season_s=86400, horizon_s=24 * 3600, buffer=0.1)


def test_each_origin_has_its_own_series_and_forecast(tmp_path):
    log = two_origin_log(tmp_path)
    series = per_origin_series(log, "chat-8b", 300)
    assert sorted(series) == [EU, US] and series[EU][9 * 12] == pytest.approx(rate(EU, 9 * 12) / 300)
    obs = observe(log, spec_with(None))
    peak = max(rate(EU, k) for k in range(288)) / 300
    assert obs.origin_forecasts[EU].peak_rps == pytest.approx(peak, rel=0.05)
    assert obs.origin_forecasts[US].peak_rps == pytest.approx(peak, rel=0.05)
    assert any(n.startswith(f"origin {EU}: forecast peak") for n in obs.notes)


def test_residency_plans_every_origin_at_its_own_peak_and_keeps_the_rule(tmp_path):
    log = two_origin_log(tmp_path)
    spec = spec_with({EU: OriginSpec(share=0.5, residency="continent"), US: 0.5})
    obs = observe(log, spec)
    new, _ = apply_to_spec(spec, {"chat-8b": obs})
    demand = new.models[0].demand
    peaks = {o: f.peak_rps for o, f in obs.origin_forecasts.items()}
    assert demand.rate_rps == pytest.approx(sum(peaks.values()) * 1.1)
    assert demand.rate_rps > obs.planned_rps  # the joint peak is lower: the origins peak six hours apart
    eu = demand.origins[EU]
    assert eu.residency == "continent" and eu.share == pytest.approx(peaks[EU] / sum(peaks.values()))
    assert demand.origins[US] == pytest.approx(peaks[US] / sum(peaks.values()))


def test_without_residency_the_joint_peak_and_mix_stay(tmp_path):
    log = two_origin_log(tmp_path)
    spec = spec_with({EU: 0.5, US: 0.5})
    obs = observe(log, spec)
    new, _ = apply_to_spec(spec, {"chat-8b": obs})
    assert new.models[0].demand.rate_rps == pytest.approx(obs.planned_rps)
    assert new.models[0].demand.origins == obs.origins


def test_a_resident_origin_absent_from_the_log_keeps_its_rule(tmp_path):
    log = two_origin_log(tmp_path)
    spec = spec_with({EU: 0.4, US: 0.4, "europe-west4": OriginSpec(share=0.2, residency="region")})
    new, _ = apply_to_spec(spec, {"chat-8b": observe(log, spec)})
    assert new.models[0].demand.origins["europe-west4"] == OriginSpec(share=0.0, residency="region")


def _with_stray_origins(tmp_path, strays: dict[str, int]):
    """two_origin_log plus ``strays``: origin -> requests per 5-minute interval (undeclared regions)."""
    lines = [HEADER]
    for k in range(3 * 288):
        for origin, c in [(EU, rate(EU, k)), (US, rate(US, k))] + sorted(strays.items()):
            lines += [f"{DAY0 + k * 300 + (i + 0.5) * 300 / c:.3f},chat-8b,100,50,{origin}" for i in range(c)]
    lines[1:] = sorted(lines[1:], key=lambda x: float(x.split(",")[0]))
    return read_demand_log(write(tmp_path, lines))


@pytest.mark.parametrize("residency", ["none", "continent"])
@pytest.mark.parametrize("strays", [{"other": 3}, {"mars-1": 2, "ap-south-1": 1}, {"other": 1, "US-EAST-1": 2}])
def test_undeclared_origins_are_pooled_never_planned_and_their_requests_still_count(tmp_path, strays, residency):
    """Property: whatever undeclared origins the log holds, the re-planned spec names only declared
    origins, validates (no exit 2), and plans at least the rate it plans without them."""
    spec = spec_with({EU: OriginSpec(share=0.5, residency=residency), US: 0.5})
    (tmp_path / "a").mkdir()
    clean = apply_to_spec(spec, {"chat-8b": observe(two_origin_log(tmp_path / "a"), spec)}, frozenset({EU, US}))[0]
    (tmp_path / "b").mkdir()
    obs = observe(_with_stray_origins(tmp_path / "b", strays), spec)
    assert set(obs.origins) - {EU, US}  # the log does hold them
    new, notes = apply_to_spec(spec, {"chat-8b": obs}, frozenset({EU, US}))
    demand = new.models[0].demand
    assert set(demand.origins) == {EU, US}
    assert demand.rate_rps >= clean.models[0].demand.rate_rps
    pooled = [n for n in notes if "pooled into the model's rate" in n]
    assert len(pooled) == 1 and all(o.lower() in pooled[0].lower() for o in strays)
