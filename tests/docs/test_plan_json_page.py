"""docs/reference/plan-json.md names every key of plan.json (the typed document, hetinfra.document.plan.Plan):
one table row per top-level key, no row for a key the document lacks, and every field of an allocation,
of a model entry and of fidelity (and its replications) in its row."""

from __future__ import annotations

import re

from hetinfra.document.plan import Plan
from tests.docs.pages import REPO

PAGE = REPO / "docs" / "reference" / "plan-json.md"


def rows() -> dict[str, str]:
    """{key: its row's text} for each key a table row's first cell names (`a`, `b[]`)."""
    found = {}
    for line in PAGE.read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) > 1:
            for key in re.findall(r"`([a-z_]+)(?:\[\])?`", cells[0]):
                found[key] = line
    return found


def field_names(model) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_every_top_level_key_has_a_row_and_every_row_a_key():
    """adapter_candidates had no row; a row for a key the document dropped would be a stale contract."""
    keys, named = field_names(Plan), set(rows())
    assert not keys - named, f"plan-json.md has no row for {sorted(keys - named)}"
    assert not named - keys, f"plan-json.md has rows for keys plan.json lacks: {sorted(named - keys)}"


def test_the_allocation_and_model_rows_name_every_field():
    """allocations[].kv_cache_tokens, gpu_memory_gb, disaggregation and adapters, models[].disaggregation,
    fidelity's load_basis, cost_before_usd_per_hour, round_by_model ... were in plan.json and on no
    reference row, and the row named fidelity.replications' max_replications `max`."""
    from hetinfra.document.allocation import Allocation
    from hetinfra.document.fidelity import Fidelity, Replications
    from hetinfra.document.sections import ModelEntry

    found = rows()
    for key, model in (("allocations", Allocation), ("models", ModelEntry), ("fidelity", Fidelity),
                       ("fidelity", Replications)):
        missing = sorted(f for f in field_names(model) if not re.search(rf"\b{re.escape(f)}\b", found[key]))
        assert not missing, f"plan-json.md's {key}[] row does not name {missing}"
