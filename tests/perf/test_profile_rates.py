"""A profile row's max_rps is 0 (no rate meets the SLO) or a rate from the spec's least (MIN_RATE_RPS) up
(hetinfra.perf.profiles, through the one CSV number parser): a positive rate below it reached the solver,
whose bound on a unit's instances is the demand over it (1e-320: an OverflowError traceback in `plan`)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.perf.profiles import parse_profiles_csv
from hetinfra.spec.models import MIN_RATE_RPS

HEADER = "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\n"


def _rows(rate: str):
    return parse_profiles_csv(HEADER + f"llama-3.1-8b,L4,1,1,250,100,2000,120,{rate}\n", "p.csv")


@given(rate=st.floats(min_value=0, max_value=MIN_RATE_RPS, exclude_min=True, exclude_max=True, allow_subnormal=True)
       | st.sampled_from([5e-324, 1e-320, 1e-308, 9.99e-4]))
def test_a_positive_rate_below_the_least_is_refused_at_its_line(rate):
    with pytest.raises(InvalidInputError) as err:
        _rows(repr(rate))
    assert err.value.message.startswith("p.csv:2: column 'max_rps'") and err.value.exit_code == 2


@given(rate=st.just(0.0) | st.floats(min_value=MIN_RATE_RPS, max_value=1e9))
def test_zero_or_a_rate_from_the_least_is_read(rate):
    assert _rows(repr(rate))[0].max_rps == rate


def test_plan_of_a_subnormal_rate_is_exit_2(run_cli, tmp_path):
    """The rate that was a traceback in `plan` (the solver's bound on instances overflowed)."""
    from pathlib import Path

    spec = (Path(__file__).resolve().parents[2] / "services/chat.yaml").read_text() + "profiles: [p.csv]\n"
    (tmp_path / "s.yaml").write_text(spec)
    (tmp_path / "p.csv").write_text(HEADER + "llama-3.1-8b,L4,1,1,250,100,2000,120,1e-320\n")
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines", "--json")
    assert code == 2 and "p.csv:2: column 'max_rps'" in err and "Traceback" not in err
