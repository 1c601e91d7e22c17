"""The examples' verified plans for tests/plan, keyed as ``chat.yaml`` (the session's shared plans:
tests/conftest.py ``example_plans``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_SPECS, REPO, example_name

EXAMPLES = EXAMPLE_SPECS


@pytest.fixture(scope="session")
def verified_examples(example_plans) -> dict[str, tuple[dict, Path]]:
    """name (``chat.yaml``, ``custom-gpu/service.yaml``) -> (plan.json dict, spec path) of `hetinfra plan`
    on every example."""
    return {str(p.relative_to(REPO / "services")): example_plans[example_name(p)][1:4:2] for p in EXAMPLE_SPECS}
