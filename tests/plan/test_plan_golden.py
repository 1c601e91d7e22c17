"""Every example's plan.json is byte-identical to its golden file apart from the run-dependent keys
(plan_json.RUN_DEPENDENT_KEYS) and the spec file's location; and the typed document reads every one of
them back exactly, key order included (``Plan.parse(doc).to_dict()`` dumps to plan.json's bytes: the
plan stage writes plan.json as that dump), a property that holds whatever verification decides. Regenerate the golden files with ``.venv/bin/python -m tests.plan.golden_plans``."""

from __future__ import annotations

import json

import pytest

from tests.plan.golden_plans import EXAMPLES, GOLDEN, filled_golden, golden_text


@pytest.fixture(scope="module")
def planned_texts(example_plans) -> dict[str, str]:
    """plan.json's text as `plan --out` wrote it (the session's shared plans: tests/conftest.py)."""
    return {name: example_plans[name][2] for name in EXAMPLES}


@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_json_matches_its_golden_file(name, planned_texts):
    doc = json.loads(planned_texts[name])
    assert planned_texts[name] == json.dumps(doc, indent=2) + "\n"  # the bytes `plan --out` writes
    assert golden_text(doc) == (GOLDEN / f"{name}.json").read_text(), \
        f"plan.json of services/{name}.yaml changed; if meant: .venv/bin/python -m tests.plan.golden_plans {name}"


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_document_model_reads_every_plan_back_exactly(name, planned_texts):
    from hetinfra.document import Plan

    doc = json.loads(planned_texts[name])
    assert json.dumps(Plan.parse(doc).to_dict(), indent=2) + "\n" == planned_texts[name]
    # and a key the model does not know is refused, naming it
    with pytest.raises(Exception, match="allocations\\[0\\].surprise"):
        Plan.parse({**doc, "allocations": [{**doc["allocations"][0], "surprise": 1}, *doc["allocations"][1:]]})


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_model_declares_plan_json_in_its_order(name):
    """A golden plan (its blanks filled) is its model's dump byte for byte: every section's fields are
    declared in the order the file has its keys (no planning needed, so this holds on every run)."""
    from hetinfra.document import Plan

    doc = filled_golden(name)
    assert json.dumps(Plan.parse(doc).to_dict(), indent=2) == json.dumps(doc, indent=2)


def test_every_example_has_a_golden_file():
    # (the *.plan.json beside them are tests/plan/test_origins_golden.py's)
    assert sorted(p.stem for p in GOLDEN.glob("*.json") if not p.name.endswith(".plan.json")) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_confirmed_model_states_its_own_run_length(name, planned_texts):
    """The confirmation runs each model as long as its own longest class needs: every confirmed model
    states that length, none is shorter than planning.verify.requests' floor, and fidelity.requests is
    the longest of them."""
    fid = json.loads(planned_texts[name])["fidelity"]
    lengths = [m["requests"] for m in fid["confirmation"]["models"]]
    assert lengths and all(isinstance(n, int) and n >= 20_000 for n in lengths), lengths
    assert max(lengths) == fid["requests"]
