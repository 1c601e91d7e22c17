"""state.json behind its model (hetinfra.deploy.state.DeployState over hetinfra.document.state.State):
a file an earlier hetinfra wrote loads and round-trips; every method leaves a state that loads
again; a change that would not load is refused before anything is written (whole or not at all)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.deploy.state import DeployState
from hetinfra.document.state import RunningAllocation, State
from hetinfra.errors import InvalidInputError, ProviderError
from tests.plan.golden_plans import golden_allocation

#: written by main a57321e's DeployState (its methods, in apply's order: a Pulumi stack with a gateway and
#: images, a SkyServe unit, a finished operation, a live read), before state.json was backed by the model
WRITTEN_BY_MAIN = Path(__file__).parent / "data" / "state_main_a57321e.json"


@pytest.fixture
def old_state(tmp_path) -> Path:
    shutil.copy(WRITTEN_BY_MAIN, tmp_path / "state.json")
    return tmp_path


def test_a_state_written_by_main_loads_and_round_trips(old_state):
    written = json.loads(WRITTEN_BY_MAIN.read_text())
    state = DeployState.load(old_state)
    assert state.doc == written  # every key and value as main wrote it (the model's key order aside)
    assert [a.path for a in state.running] == ["pulumi", "skypilot"]
    assert state.operation.status == "done" and state.model.images["aws"]["us-east-1"]["gpu"] == "ami-0123"
    state.save()
    again = json.loads((old_state / "state.json").read_text())
    assert {k: v for k, v in again.items() if k != "updated_at"} == {k: v for k, v in written.items()
                                                                     if k != "updated_at"}


def test_main_states_resume_and_change_through_the_methods(old_state):
    state = DeployState.load(old_state)
    sky = next(a for a in state.running if a.path == "skypilot")
    state.begin("destroy", "ef" * 32, [f"skypilot:down:{sky.deployment_unit}"])
    state.replace_running(lambda a: a.path != "skypilot", [])
    state.forget_service(sky.deployment_unit)
    state.mark(f"skypilot:down:{sky.deployment_unit}", "done")
    state.finish()
    loaded = DeployState.load(old_state)
    assert loaded.doc == state.doc
    assert sky.deployment_unit not in loaded.model.endpoints and sky.deployment_unit not in loaded.model.skypilot
    assert loaded.operation.kind == "destroy" and loaded.operation.status == "done"


def test_a_change_that_would_not_load_is_refused_and_nothing_is_written(old_state):
    state = DeployState.load(old_state)
    before, text = state.model, (old_state / "state.json").read_text()
    with pytest.raises(InvalidInputError, match="endpoints"):
        state.record_stack("multi-region", "gcp", "prod", {"endpoints": {"u": [3]}})  # a URL that is no string
    with pytest.raises(ProviderError, match="out of bounds"):
        state.record_live({"units": {"u": {"live": -5}}})
    assert state.model is before and (old_state / "state.json").read_text() == text


def test_a_failed_step_marks_the_operation_and_a_rerun_resumes_it(tmp_path):
    state = DeployState.load(tmp_path, "chat")
    state.begin("apply", "ab" * 32, ["pulumi:aws", "pulumi:gcp"])
    state.mark("pulumi:aws", "done")
    state.mark("pulumi:gcp", "failed", "quota")
    op = DeployState.load(tmp_path).operation
    assert (op.status, op.error, [s.status for s in op.steps]) == ("failed", "pulumi:gcp: quota", ["done", "failed"])
    again = DeployState.load(tmp_path)
    again.begin("apply", "ab" * 32, ["pulumi:aws", "pulumi:gcp"])
    assert again.operation.resumed and again.is_done("pulumi:aws") and not again.is_done("pulumi:gcp")
    assert again.progress() == ("apply", 1, [{"id": "pulumi:aws", "status": "done", "error": None},
                                             {"id": "pulumi:gcp", "status": "pending", "error": None}])


UNITS = [f"u{i}" for i in range(4)]
ALLOCS = {u: RunningAllocation.model_validate({**golden_allocation(deployment_unit=u, unit=u), "path": "skypilot"})
          for u in UNITS}


@settings(max_examples=12, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["launch", "stop", "stack", "forget", "service", "down", "live"]),
                          st.sampled_from(UNITS)), max_size=12))
def test_property_every_sequence_of_changes_leaves_a_state_that_loads(tmp_path_factory, ops):
    """Whatever apply, destroy and status do in whatever order, state.json on disk is the model's
    dump and loads again; a unit taken out of what runs keeps no endpoint."""
    out = tmp_path_factory.mktemp("state")
    state = DeployState.load(out, "chat")
    for op, unit in ops:
        alloc = ALLOCS[unit]
        if op == "launch":
            state.replace_running(lambda a: a.deployment_unit != unit, [alloc])
            state.record_service(unit, f"http://{unit}.example:30001")
        elif op == "stop":
            state.replace_running(lambda a: a.deployment_unit != unit, [])
            assert unit not in state.model.endpoints
        elif op == "stack":
            state.record_stack("chat", "aws", "prod", {"endpoints": {unit: [f"http://{unit}:8000/v1"]},
                                                       "gateways": {f"chat-aws-{unit}": "http://gw"}})
        elif op == "forget":
            state.forget_stack("aws")
        elif op == "service":
            state.record_service(unit, None)
        elif op == "down":
            state.forget_service(unit)
        else:
            state.record_live({"live_replicas": 1, "units": {unit: {"live": 1, "desired": 1}}})
        state.save()
        assert DeployState.load(out).doc == state.doc
    if ops:
        assert State.of(json.loads((out / "state.json").read_text())) == state.model


@settings(max_examples=15, derandomize=True, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.tuples(st.just(n), st.lists(
    st.tuples(st.integers(0, n + 1), st.integers(0, n + 1)).map(sorted), min_size=1, max_size=3))))
def test_property_a_state_saved_by_apply_and_status_at_once_keeps_both(tmp_path_factory, run):
    """`apply` saves state.json after each of its steps from the state it loaded at its start; `status`
    loads it, records its live read and saves it. Run at once (each status read loaded after apply's
    save ``load`` and saved after its save ``save``, 0: before apply's first, n + 1: after its last), the file
    ends with apply's whole operation and the last live read: apply's next save dropped the live read, and
    a status read that loaded before an apply's save and saved after it turned apply's steps back (after
    its last save: an apply that finished, left "running" for good)."""
    n, reads = run
    out = tmp_path_factory.mktemp("state")
    DeployState.load(out, "chat").save()
    steps = [f"skypilot:up:u{i}" for i in range(n)]
    apply = DeployState.load(out)
    loaded: dict[int, DeployState] = {}
    last_live = None
    for at in range(n + 2):  # apply's saves: begin (at 0), each step's mark, finish (at n + 1)
        for k, (load, save) in enumerate(reads):
            if save == at and k in loaded:
                loaded.pop(k).save()
                last_live = k
        if at == 0:
            apply.begin("apply", "ab" * 32, steps)
        elif at <= n:
            apply.mark(steps[at - 1], "done")
        else:
            apply.finish("ab" * 32)
        for k, (load, save) in enumerate(reads):
            if load == at:
                loaded[k] = DeployState.load(out)
                loaded[k].record_live({"live_replicas": k, "units": {}})
    for k in sorted(loaded):
        loaded.pop(k).save()
        last_live = k
    final = DeployState.load(out)
    assert final.operation.status == "done" and all(s.status == "done" for s in final.operation.steps)
    assert final.model.plan_sha256 == "ab" * 32
    assert final.model.live and final.model.live["live_replicas"] == last_live, final.model.live


@settings(max_examples=12, derandomize=True, deadline=None)
@given(st.sampled_from(["absolute", "relative", "two links"]), st.lists(st.sampled_from(["live", "begin", "images"]),
                                                                     min_size=1, max_size=3))
def test_property_a_state_json_that_is_a_link_is_written_through(tmp_path_factory, shape, changes):
    """OUT/state.json a symbolic link to a share (as `status` reads it: hetinfra.fileio.present counts a link):
    every save writes the file it names and keeps the link. The first save replaced the link by a file, and
    the shared state.json, which other machines read, kept the old state."""
    import os

    base = tmp_path_factory.mktemp("linked")
    (base / "share").mkdir()
    (base / "out").mkdir()
    DeployState.load(base / "share", "chat").save()
    link = base / "out" / "state.json"
    if shape == "absolute":
        link.symlink_to(base / "share" / "state.json")
    elif shape == "relative":
        link.symlink_to(os.path.join("..", "share", "state.json"))
    else:
        (base / "share" / "current").symlink_to("state.json")
        link.symlink_to(base / "share" / "current")
    state = DeployState.load(base / "out")
    for i, change in enumerate(changes):
        if change == "live":
            state.record_live({"live_replicas": i, "units": {}})
        elif change == "begin":
            state.begin("apply", "ab" * 32, ["pulumi:aws"])
        else:
            state.record_images("aws", {"us-east-1": {"gpu": f"ami-{i}"}})
        state.save()
    assert link.is_symlink()
    assert DeployState.load(base / "share").doc == state.doc
