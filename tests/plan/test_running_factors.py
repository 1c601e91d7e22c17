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


def _units(*ids: str, gpu: str = "L40S") -> list:
    return [SimpleNamespace(template=SimpleNamespace(id=i, model="m", variant=None, gpu=gpu if i != "x" else "x",
                                                     tp=1, pp=1, nodes=1)) for i in ids]


def test_the_running_plans_factors_for_this_plans_templates(tmp_path):
    doc = filled_golden("chat")
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    verified = {t["id"]: t["derate"] for t in doc["templates"]}
    used = next(iter(verified))
    got = running_factors(tmp_path, _units(used) + _units("another|template", gpu="H100"))
    assert got == {used: verified[used]}
    assert running_factors(tmp_path / "plan.json", _units(used)) == {used: verified[used]}  # the file itself


def test_no_plan_gives_no_start_and_a_broken_one_is_refused(tmp_path):
    """No plan.json: no start. One that is there is read as every command reads plan.json
    (hetinfra.document.load_plan): a broken one is exit 2, not silently skipped."""
    assert running_factors(tmp_path, _units("x")) == {}
    (tmp_path / "plan.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match="plan.json:1:2 is not valid JSON"):
        running_factors(tmp_path, _units("x"))


def test_the_factor_holds_for_every_type_of_its_regime(tmp_path):
    """The rounds keep one factor per regime (model, GPU, layout: hetinfra.plan.library.regime_of). The
    running plan's L40S credit on g6e.xlarge starts g6e.2xlarge there too: started at the confidence
    level, it made the search take the lower factor as the regime's, and a re-plan of chat at 10x its
    rate ran out of rounds climbing back (H100s at $58.76/h where a fresh plan is $37.22/h)."""
    doc = filled_golden("chat")
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    verified = {t["id"]: t["derate"] for t in doc["templates"]}
    used = next(iter(verified))
    sibling = _units(used + "-sibling")  # another instance type of the same GPU and layout
    h100 = _units("other", gpu="H100")
    assert running_factors(tmp_path, _units(used) + sibling + h100) == {used: verified[used],
                                                                       used + "-sibling": verified[used]}
