"""Demand no sane fleet serves is refused before the solver (hetinfra.plan.planner.check_scale),
naming the rate that needs the GPUs: a demand profile's peak, not the base rate_rps alone (a profile
[1.0e-300, 1000000] over 12 req/s read "demand 12 req/s needs at least 1,128,965 GPUs")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

CHAT = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"


@pytest.mark.parametrize("rate, profile, shown", [
    (12, [1.0e-300, 1000000], "demand 1.2e+07 req/s at its profile's peak (12 x 1e+06)"),
    (50000, [1, 400], "demand 2e+07 req/s at its profile's peak (50,000 x 400)"),
])
def test_the_refusal_names_the_rate_that_needs_the_gpus(run_cli, tmp_path, rate, profile, shown):
    spec = yaml.safe_load(CHAT.read_text())
    spec["models"][0]["demand"]["rate_rps"] = rate
    spec["models"][0]["demand"]["profile"] = profile
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    code, _, stderr = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-verify",
                              "--no-baselines")
    assert code == 2 and shown in stderr and "demand.profile" in stderr, stderr
