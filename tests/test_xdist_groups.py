"""--dist loadgroup (README, .ci/run) keeps an xdist group's tests on one worker only where the group
reaches the test's id as ``@group`` (tests/xdist_groups.py sets it: xdist 3.8's own suffix is lost on
pytest 9.1+), and tests sharing a per-worker cost join one group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.xdist_groups import FILE_GROUPS, FIXTURE_GROUPS, groups


@pytest.fixture(scope="module")
def module_made():
    return object()


@pytest.mark.xdist_group("group-check")
def test_a_marked_test_carries_its_group_in_its_id(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@group-check"), request.node.nodeid


def test_a_test_of_a_module_fixture_runs_in_its_modules_group(request, module_made):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@module:test_xdist_groups.py"), request.node.nodeid


def _item(name: str, *fixtures: str, scope: str = "function"):
    """A collected test of this module as groups() reads one: its fixtures (each of ``scope``, defined here)."""
    from pathlib import Path
    from types import SimpleNamespace as Ns

    defs = {f: [Ns(scope=scope, func=module_made)] for f in fixtures}
    return Ns(path=Path(__file__), originalname=name, fixturenames=fixtures, iter_markers=lambda mark: [],
              _fixtureinfo=Ns(name2fixturedefs=defs))


def test_each_shared_cost_joins_its_group_and_a_module_follows_its_fixture_group():
    module = f"module:{__name__.rpartition('.')[2]}.py"
    plain, made = _item("plain", "tmp_path"), _item("made", "module_made", scope="module")
    assert groups([plain, made]) == {1: module}
    sky = _item("sky", "sky_offline", scope="session")  # a SkyPilot test beside it: the module joins its group
    assert groups([plain, made, sky]) == {1: FIXTURE_GROUPS["sky_offline"], 2: FIXTURE_GROUPS["sky_offline"]}
    assert groups([_item("stacks", "mocks")]) == {0: FIXTURE_GROUPS["mocks"]}
    facts = _item("facts", "tree_copy")
    facts.path = facts.path.with_name("test_facts.py")
    assert groups([facts]) == {0: FILE_GROUPS["test_facts.py"]}


def test_each_worker_imports_its_share_of_the_test_modules_first(request):
    """tests/xdist_rewrite.py: worker gwK of n starts at the K/n-th module and goes on to the last, so
    the n workers' first modules split the list evenly (each rewrites its share, the cache serves the
    rest); and the modules are the run's test files."""
    from tests.xdist_rewrite import modules_of, share_onwards

    mods = [f"m{i}" for i in range(10)]
    assert share_onwards(mods, "gw0", 2) == mods and share_onwards(mods, "gw1", 2) == mods[5:]
    assert [mods.index(share_onwards(mods, f"gw{k}", 3)[0]) for k in range(3)] == [0, 3, 6]
    assert all(share_onwards(mods, f"gw{k}", 4)[-1] == "m9" for k in range(4))
    found = modules_of(request.session)
    assert Path(__file__).resolve() in found and all(p.name.startswith("test_") for p in found)
    request.config.option.ignore = [*(request.config.option.ignore or ()), str(Path(__file__).parent / "docs")]
    try:  # a folder the run ignores is not imported early either
        assert not [p for p in modules_of(request.session) if "docs" in p.parts[-2:]]
    finally:
        request.config.option.ignore.pop()
