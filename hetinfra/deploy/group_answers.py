"""What the GCP Compute and Azure ARM APIs answer about a self-healing group's instances, as typed
models: the only shapes hetinfra.deploy.groups reads (a page of ``listManagedInstances``, a scale
set's VM with its instance view), as hetinfra.deploy.kube_answers does for a cluster's answers.

An answer comes from outside (a proxy, a half-rolled API, whatever HETINFRA_GCP_COMPUTE_URL names),
so it is parsed once (kube_answers.parse_answer, the reader of every typed answer) before anything
counts with it: a malformed one is a ProviderError
(exit 4) naming the group and the field, never an AttributeError or TypeError in `status` or
`replan` (``"managedInstances": "abc"``, an instance that is a number, a page token that is one).
Fields hetinfra does not read are ignored; a null is a field not set.
"""

from __future__ import annotations

from typing import Optional

from pydantic import StrictStr

from hetinfra.deploy.kube_answers import Answer as _Answer

__all__ = ["ManagedInstancesPage", "ScaleSetVm"]


class _Health(_Answer):
    detailedHealthState: Optional[StrictStr] = None  # noqa: N815 - the API's names


class _Error(_Answer):
    code: Optional[StrictStr] = None
    message: Optional[StrictStr] = None

    def __str__(self) -> str:
        return self.code or self.message or "unknown error"


class _Errors(_Answer):
    errors: list[_Error] = []


class _Attempt(_Answer):
    errors: Optional[_Errors] = None


class ManagedInstance(_Answer):
    """One instance of a managed instance group (``listManagedInstances``)."""

    instanceStatus: Optional[StrictStr] = None  # noqa: N815
    currentAction: StrictStr = "NONE"  # noqa: N815
    instanceHealth: list[_Health] = []  # noqa: N815
    lastAttempt: Optional[_Attempt] = None  # noqa: N815

    @property
    def errors(self) -> list[str]:
        return [str(e) for e in (self.lastAttempt.errors.errors if self.lastAttempt and self.lastAttempt.errors else [])]


class ManagedInstancesPage(_Answer):
    managedInstances: list[ManagedInstance] = []  # noqa: N815
    nextPageToken: Optional[StrictStr] = None  # noqa: N815


class _Status(_Answer):
    code: Optional[StrictStr] = None


class _VmHealth(_Answer):
    status: Optional[_Status] = None


class _InstanceView(_Answer):
    statuses: list[_Status] = []
    vmHealth: Optional[_VmHealth] = None  # noqa: N815


class _VmProperties(_Answer):
    provisioningState: Optional[StrictStr] = None  # noqa: N815
    instanceView: Optional[_InstanceView] = None  # noqa: N815


class ScaleSetVm(_Answer):
    """One VM of a scale set (``virtualMachines?$expand=instanceView``)."""

    properties: _VmProperties = _VmProperties()

    @property
    def state(self) -> str:
        return self.properties.provisioningState or ""

    @property
    def codes(self) -> set[str]:
        view = self.properties.instanceView
        return {str(s.code) for s in view.statuses} if view else set()

    @property
    def health(self) -> str | None:
        view = self.properties.instanceView
        return view.vmHealth.status.code if view and view.vmHealth and view.vmHealth.status else None
