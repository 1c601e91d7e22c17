"""The group readers (hetinfra.deploy.groups) against the clouds' APIs as the stand-in cloud serves
them on loopback: how each instance of a managed instance group or a scale set counts."""

from __future__ import annotations

import pytest

from hetinfra.deploy import groups
from hetinfra.errors import ProviderError

SCALE_SET = "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/u"


@pytest.fixture
def api(fake_cloud):
    """(the fake cloud, the env that points the readers at it with valid tokens)."""
    import os

    return fake_cloud, {"HETINFRA_GCP_COMPUTE_URL": os.environ["HETINFRA_GCP_COMPUTE_URL"],
                        "HETINFRA_AZURE_ARM_URL": os.environ["HETINFRA_AZURE_ARM_URL"], "PATH": "/nonexistent",
                        "GOOGLE_OAUTH_ACCESS_TOKEN": "gcp-token", "AZURE_ACCESS_TOKEN": "arm-token"}


def test_a_managed_instance_groups_instances(api):
    cloud, env = api
    cloud.add_group("mig", "u", "u-head", 4, project="p", zone="us-central1-a")
    cloud.add_group("mig", "u", "u-r0-n1", 1, head=False, project="p", zone="us-central1-a")
    migs = [("p", "us-central1-a", "u-head", True), ("p", "us-central1-a", "u-r0-n1", False)]
    cloud.preempt("u", 2, capacity=False)  # two head VMs being recreated, GCE has no spot capacity
    cloud.set_health("u", health="Unhealthy")  # the other two fail the autohealer's check
    found = groups.gcp_groups(migs, env)
    head, worker = found["u-head"], found["u-r0-n1"]
    assert (head.healthy, head.other, head.billing, head.creating) == (0, 2, 2, 2)
    assert head.errors == ["ZONE_RESOURCE_POOL_EXHAUSTED"] * 2
    # a worker's group has no autohealer: RUNNING with no current action serves
    assert (worker.healthy, worker.other, worker.creating) == (1, 0, 0)
    cloud.set_health("u")
    assert (groups.gcp_groups(migs, env)["u-head"].healthy, groups.gcp_groups(migs, env)["u-head"].other) == (2, 0)
    with pytest.raises(ProviderError, match="HTTP 401"):
        groups.gcp_groups(migs, dict(env, GOOGLE_OAUTH_ACCESS_TOKEN="old"))
    with pytest.raises(ProviderError, match="no access token"):
        groups.gcp_groups(migs, {k: v for k, v in env.items() if k != "GOOGLE_OAUTH_ACCESS_TOKEN"})


def test_a_scale_sets_vms(api):
    cloud, env = api
    cloud.add_group("vmss", "u", "u", 3, id=SCALE_SET)
    cloud.preempt("u")  # an evicted spot VM is deleted
    found = groups.azure_groups([(SCALE_SET, True)], env)[SCALE_SET]
    assert (found.healthy, found.other, found.billing, found.creating) == (2, 0, 2, 0)  # the third: missing
    cloud.set_health("u", health="Unhealthy")
    found = groups.azure_groups([(SCALE_SET, True)], env)[SCALE_SET]
    assert (found.healthy, found.other, found.billing) == (0, 2, 2)  # running and billing, not serving
    # without the health extension (a pipeline worker's scale set) a running VM serves
    assert groups.azure_groups([(SCALE_SET, False)], env)[SCALE_SET].healthy == 2
    call = [c for c in cloud.calls if c["action"] == "virtualMachines"][-1]
    assert call["path"] == SCALE_SET + "/virtualMachines" and "api-version=2024-07-01" in call["query"]
