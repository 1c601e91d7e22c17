"""replan.json (hetinfra.replan.safe.Journal) behind its model: a journal as earlier runs wrote it
loads and resumes; a wrong one is exit 2 naming the field; what a run writes keeps the keys it had."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.replan.safe import Journal

#: as main a57321e's Journal.start wrote it (a dict), half-way: make done, break running
WRITTEN = {"status": "running", "started_at": "2026-12-01T00:00:00Z", "pid": 4242, "complete": True,
           "new_plan": {"plan_version": 1}, "running_before": [{"unit": "a", "count": 2}], "error": None,
           "stages": [{"name": "make", "counts": {"a": 2, "b": 1}, "status": "done"},
                      {"name": "break", "counts": {"b": 1}, "status": "running"}]}


def test_a_journal_written_before_loads_resumes_and_keeps_its_keys(tmp_path):
    (tmp_path / "replan.json").write_text(json.dumps(WRITTEN))
    journal = Journal(tmp_path)
    assert journal.unfinished and [s.name for s in journal.doc.stages if s.status != "done"] == ["break"]
    journal.set(journal.doc.stages[1], "done")
    assert json.loads((tmp_path / "replan.json").read_text()) == {
        **WRITTEN, "stages": [WRITTEN["stages"][0], {**WRITTEN["stages"][1], "status": "done"}]}
    journal.finish()
    again = Journal(tmp_path)
    assert not again.unfinished and again.doc.finished_at


def test_a_failed_stage_fails_the_run_with_its_name(tmp_path):
    journal = Journal(tmp_path)
    journal.start({"plan_version": 1}, [("make", {"a": 1})], True, [])
    journal.set(journal.doc.stages[0], "failed", "not healthy")
    doc = json.loads((tmp_path / "replan.json").read_text())
    assert (doc["status"], doc["error"], list(doc)) == ("failed", "make: not healthy", list(WRITTEN))


@pytest.mark.parametrize("doc,where", [([], "(top level) is not a JSON object"), ({"status": "half", "stages": [], "new_plan": {}}, "status"),
                                       ({"status": "running", "new_plan": {}}, "stages"),
                                       ({**WRITTEN, "stages": [{"name": "make", "counts": {"a": "2"}, "status": "done"}]},
                                        "stages[0].counts.a")])
def test_a_wrong_journal_is_exit_2_naming_the_field(tmp_path, doc, where):
    (tmp_path / "replan.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError) as exc:
        Journal(tmp_path)
    assert f"replan.json: {where}" in str(exc.value) and exc.value.exit_code == 2 and "move replan.json aside" in exc.value.hint


@settings(max_examples=8, derandomize=True, deadline=None)
@given(st.sampled_from(["absolute", "relative"]), st.lists(st.sampled_from(["done", "failed", "running"]), min_size=1,
                                                          max_size=3))
def test_property_a_journal_that_is_a_link_is_written_through(tmp_path_factory, shape, statuses):
    """OUT/replan.json a symbolic link (to a share, as state.json may be): each save writes the file it names
    and keeps the link; it was replaced by a file, and the share kept the journal as it was."""
    import os

    base = tmp_path_factory.mktemp("linked")
    (base / "share").mkdir()
    (base / "out").mkdir()
    (base / "share" / "replan.json").write_text(json.dumps(WRITTEN))
    link = base / "out" / "replan.json"
    link.symlink_to(base / "share" / "replan.json" if shape == "absolute" else os.path.join("..", "share", "replan.json"))
    journal = Journal(base / "out")
    for status in statuses:
        journal.set(journal.doc.stages[1], status, "x" if status == "failed" else None)
    assert link.is_symlink()
    assert json.loads((base / "share" / "replan.json").read_text())["stages"][1]["status"] == statuses[-1]
