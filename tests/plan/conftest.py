"""The examples' verified plans for tests/plan, keyed as ``chat.yaml`` (the session's shared plans:
tests/conftest.py ``example_plans``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_SPECS, REPO, ExamplePlans, example_name

EXAMPLES = EXAMPLE_SPECS


class VerifiedExamples(Mapping):
    """name (``chat.yaml``, ``custom-gpu/service.yaml``) -> (plan.json dict, spec path) of `hetinfra plan`
    on that example, planned when first read (so a test waits only for the examples it reads)."""

    def __init__(self, plans: ExamplePlans):
        self.plans = plans
        self.names = [str(p.relative_to(REPO / "services")) for p in EXAMPLE_SPECS]

    def __getitem__(self, name: str) -> tuple[dict, Path]:
        if name not in self.names:
            raise KeyError(name)
        _, doc, _, spec = self.plans[example_name(REPO / "services" / name)]
        return doc, spec

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@pytest.fixture(scope="session")
def verified_examples(example_plans) -> VerifiedExamples:
    return VerifiedExamples(example_plans)
