"""The simulator's workload knobs (hetinfra.sim.workload.WorkloadConfig): every value either draws a
finite stream of arrivals at once or is refused with one line, whichever door it comes through
(`hetinfra simulate --load/--burst-cv`, planning.verify in a spec)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.sim.workload import MAX_LOAD, WorkloadConfig, arrival_gaps, arrival_times
from hetinfra.spec.planning import MAX_BURST_CV, MIN_BURST_CV, MIN_LOAD

#: every float a flag or a YAML number can carry: subnormals, 1e-170 (whose square underflows and whose
#: gamma shape overflows: it hung), 1e200 (gamma shape 0: a ValueError), 1e308 (a run length of inf)
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 5e-324, 1e-310, 1e-170, 1e-155, 1e-10, MIN_LOAD, MIN_BURST_CV, MAX_BURST_CV, 10.000001, 1e200, 1e308,
     MAX_LOAD, 1000.5])


@settings(max_examples=200, deadline=None)
@given(burst_cv=ANY_FLOAT, load=ANY_FLOAT)
@example(burst_cv=1.0, load=5e-324)  # the review's: a load that small made every arrival gap inf
@example(burst_cv=0.5, load=1e-310)
def test_any_load_and_burst_either_draws_finite_arrivals_or_is_refused(burst_cv, load):
    try:
        config = WorkloadConfig(requests=50, load=load, burst_cv=burst_cv)
    except InvalidInputError as exc:
        assert "load" in exc.message or "burst_cv" in exc.message
        assert not (MIN_LOAD <= load <= MAX_LOAD and MIN_BURST_CV <= burst_cv <= MAX_BURST_CV)
        return
    assert MIN_LOAD <= config.load <= MAX_LOAD and MIN_BURST_CV <= config.burst_cv <= MAX_BURST_CV
    gaps = arrival_gaps(random.Random(1), 50, config.burst_cv)
    times = arrival_times(gaps, 12.0 * config.load, config.burst_cv)
    assert all(math.isfinite(t) for t in times) and list(times) == sorted(times)


@pytest.mark.parametrize("flag", [["--burst-cv", "1e-170"], ["--burst-cv", "1e-155"], ["--burst-cv", "1e200"],
                                  ["--load", "1e308"], ["--load", "1001"], ["--load", "1e-310"]])
def test_simulate_refuses_a_load_or_burst_outside_the_domain_in_one_line(tmp_path, flag):
    """Before: a ZeroDivisionError, a ValueError and an OverflowError traceback, and a run that never
    ended (1e-155: gamma shape inf). No plan is read: the flag's range (the simulator's domain,
    hetinfra.facts) refuses the number, in click's one error line under its usage line."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    res = CliRunner().invoke(cli, ["simulate", str(tmp_path), *flag])  # a folder without plan.json: never read
    assert res.exit_code == 2, res.output
    error = res.output.strip().splitlines()[-1]
    assert "Traceback" not in res.output and error.startswith(f"Error: Invalid value for '{flag[0]}'")
    assert "is not in the range" in error
