"""Session-scoped verified plans of every example in services/ (planned once, in-process)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "services").rglob("*.yaml"))


@pytest.fixture(scope="session")
def verified_examples() -> dict[str, tuple[dict, Path]]:
    """name -> (plan.json dict, spec path) of `hetinfra plan` on every example (no baselines)."""
    from hetinfra.plan.verify import verified_plan

    out = {}
    for path in EXAMPLES:
        _, doc = verified_plan(path, with_baselines=False, template_cache=False)
        out[str(path.relative_to(REPO / "services"))] = (doc, path)
    return out
