"""The GCP stack's network tags (the fleet's and its gateway's, which the firewall rules target) are at
most 63 characters, as GCE requires, for any service name the spec accepts: ``hetinfra-<service>-gateway``
of a 60-character service was a 77-character tag that `pulumi up` fails on."""

from __future__ import annotations

import pytest
pulumi = pytest.importorskip("pulumi")

from tests.stacks.test_gateway_stack import GATEWAY, gateway_urls  # noqa: E402
from tests.stacks.test_program import by_name  # noqa: E402

TAG = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z"


@pytest.mark.parametrize("length", [4, 46, 55, 63])
def test_gcp_network_tags_fit_for_any_service_name(mocks, three_cloud_plan, length):
    import re

    plan = dict(three_cloud_plan, service=("s" + "x" * 62)[:length],
                deploy=dict(three_cloud_plan["deploy"], gateway=dict(GATEWAY)))
    gateway_urls(plan, "gcp")
    tags = [t for vm in by_name(mocks, "gcp:compute/instance:Instance").values() for t in vm.get("tags") or []]
    for fw in by_name(mocks, "gcp:compute/firewall:Firewall").values():
        tags += (fw.get("targetTags") or []) + (fw.get("sourceTags") or [])
    assert tags and all(re.match(TAG, t) for t in tags), [t for t in tags if not re.match(TAG, t)]
