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


def test_a_plans_view_is_built_once_and_again_for_a_new_or_edited_plan(chat, monkeypatch):
    """simulation_view builds a plan's view once (verification asks for the same plan's view in the
    rounds, the trim, the confirmation and the veto); a new plan (dataclasses.replace, as the trim and
    the confirmation make them) gets its own, and counts edited in place are not served stale."""
    from dataclasses import replace

    import hetinfra.plan.plan_json as plan_json

    built = []
    real = plan_json.sections
    monkeypatch.setattr(plan_json, "sections", lambda pr: built.append(pr) or real(pr))
    pr = replace(chat)  # a plan no view was built for
    first = simulation_view(pr)
    assert simulation_view(pr) is first and len(built) == 1
    other = replace(pr, result=replace(pr.result, n=dict(pr.result.n)))
    assert simulation_view(other) == first and len(built) == 2
    uid = next(iter(other.result.n))
    other.result.n[uid] += 1  # nothing edits a plan in place; if something did, its view follows
    edited = simulation_view(other)
    assert len(built) == 3 and [a["count"] for a in edited["allocations"] if a["unit"] == uid] == \
        [c + 1 for c in [a["count"] for a in first["allocations"] if a["unit"] == uid]]
