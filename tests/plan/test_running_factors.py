"""A re-plan's verification starts at the factors the running plan was verified at
(hetinfra.plan.planner.running_factors): a replan of an unchanged spec right after `plan` must find
nothing to change (docs/guides/cron-replan.md runs exactly that)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from hetinfra.errors import InvalidInputError
from hetinfra.plan.planner import running_factors
from tests.plan.golden_plans import filled_golden


def _units(*ids: str) -> list:
    return [SimpleNamespace(template=SimpleNamespace(id=i)) for i in ids]


def test_the_running_plans_factors_for_this_plans_templates(tmp_path):
    doc = filled_golden("chat")
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    verified = {t["id"]: t["derate"] for t in doc["templates"]}
    used = next(iter(verified))
    got = running_factors(tmp_path, _units(used, "another|template"))
    assert got == {used: verified[used]}
    assert running_factors(tmp_path / "plan.json", _units(used)) == {used: verified[used]}  # the file itself


def test_no_plan_gives_no_start_and_a_broken_one_is_refused(tmp_path):
    """No plan.json: no start. One that is there is read as every command reads plan.json
    (hetinfra.document.load_plan): a broken one is exit 2, not silently skipped."""
    assert running_factors(tmp_path, _units("x")) == {}
    (tmp_path / "plan.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match="plan.json:1:2 is not valid JSON"):
        running_factors(tmp_path, _units("x"))
