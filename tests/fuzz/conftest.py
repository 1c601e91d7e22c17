"""The fuzz harness: hypothesis over every input surface, with the properties every case must hold.

Seeds are fixed (``derandomize=True``: the same examples on every run and machine), so a failure
reproduces. The default budget keeps the harness within ~40 s of the suite; a longer fuzz:

    HETINFRA_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest tests/fuzz -q

"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings

#: exit codes the CLI documents (README "Exit codes"): ok, invalid input, infeasible, provider or feed
#: failure, replan's proposed/applied, another replan running
DOCUMENTED_EXITS = {0, 2, 3, 4, 10, 11, 75}
MAX_ERROR_LINES = 12

_examples = int(os.environ.get("HETINFRA_FUZZ_EXAMPLES", "0"))
settings.register_profile(
    "fuzz", derandomize=True, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])


def budget(default: int):
    """hypothesis settings of one fuzz test: ``default`` examples, or HETINFRA_FUZZ_EXAMPLES."""
    return settings(settings.get_profile("fuzz"), max_examples=_examples or default)


def strict_json(text: str):
    """Parse ``text`` as JSON that every parser reads: NaN/Infinity are refused."""
    def refuse(token):
        raise AssertionError(f"non-JSON token {token} in --json output")
    return json.loads(text, parse_constant=refuse)


def assert_clean_exit(code: int, stdout: str, stderr: str, *, as_json: bool = False) -> None:
    """The CLI properties: a documented exit code, a short error, no traceback, strict --json."""
    assert code in DOCUMENTED_EXITS, f"exit {code}: {stderr[-600:]}"
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr[-2000:]
    if code != 0:
        assert len(stderr.strip().splitlines()) <= MAX_ERROR_LINES, stderr
        assert "error:" in stderr.lower(), stderr
    if as_json:  # a failure too, a flag click refused included
        strict_json(stdout)
