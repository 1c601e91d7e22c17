"""The GCP and Azure group readers (hetinfra.deploy.groups) read what the API answers through typed
models (hetinfra.deploy.group_answers): any node of a valid answer replaced by any JSON value is
counted or is a ProviderError (exit 4) naming the group and the field, never an AttributeError or
TypeError in `status` or `replan` (``"managedInstances": "abc"`` was ``'str' object has no
attribute 'get'``, a page token of 5 a TypeError in quote())."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.deploy import groups
from hetinfra.errors import ProviderError
from tests.fuzz.test_fuzz_spec import leaf_paths, mutate

GCE_PAGE = {"managedInstances": [
    {"instance": "i-1", "instanceStatus": "RUNNING", "currentAction": "NONE",
     "instanceHealth": [{"detailedHealthState": "HEALTHY"}]},
    {"instance": "i-2", "currentAction": "CREATING",
     "lastAttempt": {"errors": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no capacity"}]}}}]}
VMSS_PAGE = {"value": [
    {"properties": {"provisioningState": "Succeeded", "instanceView": {
        "statuses": [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}],
        "vmHealth": {"status": {"code": "HealthState/healthy"}}}}},
    {"properties": {"provisioningState": "Creating"}}]}
SCALE_SET = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/u"

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
                    | st.text(max_size=12),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=12), kids, max_size=3),
                    max_leaves=8)


class _Client:
    def __init__(self, body):
        self.body = body

    def get_json(self, url, post=None):
        return self.body


def _read(cloud: str, body, monkeypatch):
    monkeypatch.setattr(groups, "_client", lambda *a: _Client(body))
    if cloud == "gcp":
        return groups.gcp_groups([("p", "us-central1-a", "u-head", True)], {})
    return groups.azure_groups([(SCALE_SET, True)], {})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cloud=st.sampled_from(["gcp", "azure"]), data=st.data(), value=JSON)
def test_any_node_of_an_answer_replaced_is_counted_or_a_provider_error(cloud, data, value):
    page = GCE_PAGE if cloud == "gcp" else VMSS_PAGE
    path = data.draw(st.sampled_from([(), *leaf_paths(page)]))
    body = value if not path else mutate(page, path, value)
    with pytest.MonkeyPatch.context() as mp:
        try:
            found = _read(cloud, body, mp)
        except ProviderError as exc:
            assert exc.exit_code == 4 and ("malformed answer" in exc.message or "value list" in exc.message)
            return
    for inst in found.values():
        assert all(isinstance(n, int) and n >= 0 for n in (inst.healthy, inst.other, inst.billing, inst.creating))
        assert all(isinstance(e, str) for e in inst.errors)


def test_a_valid_answer_counts_as_before(monkeypatch):
    gce = _read("gcp", GCE_PAGE, monkeypatch)["u-head"]
    assert (gce.healthy, gce.other, gce.billing, gce.creating, gce.errors) == (1, 0, 1, 1, ["ZONE_RESOURCE_POOL_EXHAUSTED"])
    vm = _read("azure", VMSS_PAGE, monkeypatch)[SCALE_SET]
    assert (vm.healthy, vm.other, vm.billing, vm.creating) == (1, 0, 1, 1)


def test_the_error_names_the_group_and_the_field(monkeypatch):
    with pytest.raises(ProviderError, match=r"managed instance group u-head \(p/us-central1-a\): malformed answer: "
                                            r"managedInstances: Input should be a valid list"):
        _read("gcp", {"managedInstances": "abc"}, monkeypatch)
    with pytest.raises(ProviderError, match=r"scale set u: malformed answer: properties.instanceView.statuses"):
        _read("azure", {"value": [{"properties": {"instanceView": {"statuses": "x"}}}]}, monkeypatch)
