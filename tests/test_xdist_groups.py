"""--dist loadgroup (README, .ci/run) keeps an xdist group's tests on one worker only where the group
reaches the test's id as ``@group`` (tests/conftest.py pytest_collection_finish mends it on pytest 9.1+,
where xdist's own suffix is lost): the SkyPilot tests share one worker's ``import sky`` and catalogs."""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("group-check")
def test_a_marked_test_carries_its_group_in_its_id(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@group-check"), request.node.nodeid


def test_a_test_of_a_grouped_fixture_joins_its_group(request):
    """FIXTURE_GROUPS marks by fixture: a test that uses sky_offline is in the skypilot group (checked
    on the marker, without importing SkyPilot here)."""
    from tests.conftest import FIXTURE_GROUPS, pytest_itemcollected

    class Item:
        fixturenames = ("tmp_path", "sky_offline")
        markers: list = []

        def iter_markers(self, name):
            return [m for m in self.markers if m.name == name]

        def add_marker(self, mark):
            self.markers.append(mark.mark)

    item = Item()
    pytest_itemcollected(item)
    assert [m.args for m in item.iter_markers("xdist_group")] == [(FIXTURE_GROUPS["sky_offline"],)]
