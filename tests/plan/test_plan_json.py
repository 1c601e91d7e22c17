"""plan.json built as its model (hetinfra.plan.plan_json): the simulation view is the document's own
sections (one builder for both), and the finished document is checked against the model's invariants
(a planted fault in a section builder is refused, not written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.plan import allocations_json
from hetinfra.plan.pipeline import plan_document
from hetinfra.plan.plan_json import build_plan_json, simulation_view

CHAT = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"


@pytest.fixture(scope="module")
def chat():
    return plan_document(CHAT, verify=False)[0]


def test_the_simulation_view_is_the_documents_sections(chat):
    view, doc = simulation_view(chat), build_plan_json(chat).to_dict()
    failover = ("alternates", "ondemand_fallback")
    assert view["allocations"] == [{k: v for k, v in a.items() if k not in failover} for a in doc["allocations"]]
    for key in ("plan_version", "service", "objective", "cost_usd_per_hour", "demand_scale", "routing", "models",
                "templates"):
        assert view[key] == doc[key], key
    assert view["deploy"] == {"vllm_version": doc["deploy"]["vllm_version"]}


def test_a_section_that_breaks_an_invariant_is_refused(chat, monkeypatch):
    """The sections are constructed without validation; the finished document is still checked."""
    monkeypatch.setattr(allocations_json, "unit_name", lambda *a, **k: "Not_A_Label")
    with pytest.raises(InvalidInputError, match="deployment_unit 'Not_A_Label' is not a unit name"):
        build_plan_json(chat)
