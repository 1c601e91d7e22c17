"""The instances of the fleets' self-healing groups, read from each cloud's own API.

``hetinfra status`` and ``replan`` (hetinfra.deploy.drift) and the health wait of ``replan --apply``
(hetinfra.deploy.health) count a group's instances as :class:`Instances`: ``healthy`` (serving),
``other`` (existing but not serving: starting, failing their health check, stopping), ``billing``
(those that bill) and ``creating`` (the group is creating them: a lost VM being replaced). An
instance a group lacks altogether (its size minus the instances listed) is one it is replacing.

- **AWS** Auto Scaling groups: boto3 ``describe_auto_scaling_groups`` (the credentials Pulumi uses;
  ``AWS_ENDPOINT_URL_AUTO_SCALING`` points it elsewhere): InService and Healthy is healthy, any
  other instance is other (each bills: pending instances run already).
- **GCP** managed instance groups: the Compute API's ``listManagedInstances`` (``POST {base}/compute/
  v1/projects/{project}/zones/{zone}/instanceGroupManagers/{group}/listManagedInstances``): an
  instance RUNNING with no current action is healthy, where the group has an autohealer (heads)
  only when its health check says HEALTHY; one the group is creating or recreating (``currentAction`` CREATING,
  CREATING_WITHOUT_RETRIES, RECREATING, or no VM yet) is creating, with the error of its last
  attempt (e.g. ZONE_RESOURCE_POOL_EXHAUSTED: no spot capacity) kept as a note; the rest is other.
  RUNNING and STOPPING instances bill.
- **Azure** scale sets (Uniform): ARM ``GET {base}{scale set id}/virtualMachines?$expand=instanceView``:
  provisioning Succeeded, ``PowerState/running`` and, where the Application Health extension runs
  (heads), ``HealthState/healthy`` is healthy; provisioning Creating is creating; the rest is
  other. Running and starting VMs bill.

The GCP and Azure APIs are reached with the credentials ``plan --availability`` reads
(``GOOGLE_OAUTH_ACCESS_TOKEN`` or ``gcloud auth print-access-token``; ``AZURE_ACCESS_TOKEN`` or
``az account get-access-token``) at ``HETINFRA_GCP_COMPUTE_URL`` (default
https://compute.googleapis.com) and ``HETINFRA_AZURE_ARM_URL`` (default https://management.azure.com).
A cloud that cannot be read raises ProviderError (exit 4).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Mapping

from hetinfra.deploy.group_answers import ManagedInstance, ManagedInstancesPage, ScaleSetVm
from hetinfra.deploy.kube_answers import parse_answer
from hetinfra.errors import ProviderError

AWS_GROUP = "aws:autoscaling/group:Group"
GCP_MIG = "gcp:compute/instanceGroupManager:InstanceGroupManager"
AZURE_VMSS = "azure-native:compute:VirtualMachineScaleSet"
GCP_URL = "https://compute.googleapis.com"
ARM_URL = "https://management.azure.com"
VMSS_API_VERSION = "2024-07-01"
NO_REFRESH_HINT = "`hetinfra status OUT --no-refresh` shows what state.json records without asking the clouds"
GCE_CREATING = {"CREATING", "CREATING_WITHOUT_RETRIES", "RECREATING"}
GCE_BILLING = {"RUNNING", "STOPPING"}
_MALFORMED = ("the cloud's API answered something that is not its instance list: check HETINFRA_GCP_COMPUTE_URL / "
              "HETINFRA_AZURE_ARM_URL and any proxy in front of it; " + NO_REFRESH_HINT)


@dataclass
class Instances:
    """A group's instances by what they do now (module docstring)."""

    healthy: int = 0
    other: int = 0
    billing: int = 0
    creating: int = 0
    errors: list[str] = field(default_factory=list)  # why the cloud could not create some (GCP)


def _api_url(env: Mapping[str, str], var: str, default: str) -> str:
    """``var`` by the rule of every URL a user gives (hetinfra.httpget.checked_url: http(s), a host, no
    user or password, nothing that does not print), else exit 2 naming it: 'not a url' was a ValueError
    traceback, file:///etc read a local file with the bearer token in hand, and a password in the URL
    was printed in the error."""
    from hetinfra.httpget import checked_url

    value = env.get(var)
    if not value:
        return default
    return checked_url(value, f"{var}=", hint=f"unset {var} for the cloud's own endpoint ({default})").rstrip("/")


def gcp_url(env: Mapping[str, str]) -> str:
    return _api_url(env, "HETINFRA_GCP_COMPUTE_URL", GCP_URL)


def arm_url(env: Mapping[str, str]) -> str:
    return _api_url(env, "HETINFRA_AZURE_ARM_URL", ARM_URL)


def aws_groups(region: str, names: list[str]) -> dict[str, Instances]:
    """Auto Scaling groups' instances by group name (exit 4 when the API cannot be read)."""
    from hetinfra.price_feeds.aws_api import client_factory, session_or_warning

    session, why = session_or_warning()
    if session is None:
        raise ProviderError(f"cannot read the Auto Scaling groups in {region}: {why}", hint=NO_REFRESH_HINT)
    client = client_factory(session)("autoscaling", region)
    out: dict[str, Instances] = {}
    try:
        for i in range(0, len(names), 50):  # the API takes at most 50 names per call
            pages = client.get_paginator("describe_auto_scaling_groups").paginate(AutoScalingGroupNames=names[i:i + 50])
            for page in pages:
                for g in page.get("AutoScalingGroups", []):
                    listed = g.get("Instances", [])
                    ok = sum(1 for x in listed if x.get("LifecycleState") == "InService" and x.get("HealthStatus") == "Healthy")
                    out[g["AutoScalingGroupName"]] = Instances(healthy=ok, other=len(listed) - ok, billing=len(listed))
    except Exception as exc:  # botocore raises ClientError, EndpointConnectionError, NoCredentialsError...
        raise ProviderError(f"cannot read the Auto Scaling groups in {region}: {type(exc).__name__}: {exc}",
                            hint="check the AWS credentials (`aws sts get-caller-identity`); " + NO_REFRESH_HINT) from None
    return out


def _client(cloud: str, env: Mapping[str, str], base: str):
    from hetinfra.price_feeds.cloud_quotas import BearerClient, azure_credentials, gcp_credentials

    token, _ = gcp_credentials(env) if cloud == "gcp" else azure_credentials(env)
    if not token:
        login = ("GOOGLE_OAUTH_ACCESS_TOKEN, or `gcloud auth login`" if cloud == "gcp"
                 else "AZURE_ACCESS_TOKEN, or `az login`")
        raise ProviderError(f"cannot read the {cloud} {'instance groups' if cloud == 'gcp' else 'scale sets'}: "
                            f"no access token ({login})", hint=NO_REFRESH_HINT)
    return BearerClient(token, base, timeout_s=20.0, retries=2, deadline_s=120.0)


def _unreadable(what: str, exc) -> ProviderError:
    return ProviderError(f"cannot read {what}: {getattr(exc, 'message', exc)}",
                         hint="check the credentials (a token expires within the hour); " + NO_REFRESH_HINT)


def _gce_instance(m: ManagedInstance, into: Instances, checked: bool) -> None:
    status, action = m.instanceStatus, m.currentAction
    if action in GCE_CREATING or not status:
        into.creating += 1
        into.errors.extend(m.errors)
        return
    into.billing += status in GCE_BILLING
    health = [h.detailedHealthState for h in m.instanceHealth]
    serving = bool(health) and all(h == "HEALTHY" for h in health) if checked else True
    if status == "RUNNING" and action == "NONE" and serving:
        into.healthy += 1
    else:
        into.other += 1


def gcp_groups(groups: list[tuple[str, str, str, bool]], env: Mapping[str, str]) -> dict[str, Instances]:
    """Managed instance groups' instances by name, of (project, zone, name, has an autohealer) (exit 4
    when unreadable)."""
    from hetinfra.price_feeds.http import FetchError

    base = gcp_url(env)
    client = _client("gcp", env, base)
    q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    out: dict[str, Instances] = {}
    for project, zone, name, checked in groups:
        url = (f"{base}/compute/v1/projects/{q(project)}/zones/{q(zone)}/instanceGroupManagers/{q(name)}"
               "/listManagedInstances")
        found, token = Instances(), None
        try:
            for _ in range(100):  # pages of 500 instances
                body = client.get_json(url + (f"?pageToken={q(token)}" if token else ""), post={})
                page = parse_answer(ManagedInstancesPage, body, f"cannot read the managed instance group {name} "
                                    f"({project}/{zone})", _MALFORMED)
                for m in page.managedInstances:
                    _gce_instance(m, found, checked)
                token = page.nextPageToken
                if not token:
                    break
        except FetchError as exc:
            raise _unreadable(f"the managed instance group {name} ({project}/{zone})", exc) from None
        out[name] = found
    return out


def _vmss_vm(vm: ScaleSetVm, into: Instances, checked: bool) -> None:
    state, codes = vm.state, vm.codes
    if state == "Creating":
        into.creating += 1
        return
    into.billing += bool(codes & {"PowerState/running", "PowerState/starting"})
    serving = vm.health == "HealthState/healthy" if checked else True
    if state == "Succeeded" and "PowerState/running" in codes and serving:
        into.healthy += 1
    else:
        into.other += 1


def azure_groups(ids: list[tuple[str, bool]], env: Mapping[str, str]) -> dict[str, Instances]:
    """Scale sets' VMs by ARM id, of (scale set id, has the health extension) (exit 4 when unreadable)."""
    from hetinfra.price_feeds.cloud_skus import azure_pages
    from hetinfra.price_feeds.http import FetchError

    base = arm_url(env)
    client = _client("azure", env, base)
    out: dict[str, Instances] = {}
    for vmss, checked in ids:
        found = Instances()
        try:
            for vm in azure_pages(client, f"{base}{vmss}/virtualMachines?$expand=instanceView"
                                          f"&api-version={VMSS_API_VERSION}", "scale set VMs"):
                where = f"cannot read the scale set {vmss.rsplit('/', 1)[-1]}"
                _vmss_vm(parse_answer(ScaleSetVm, vm, where, _MALFORMED), found, checked)
        except FetchError as exc:
            raise _unreadable(f"the scale set {vmss.rsplit('/', 1)[-1]}", exc) from None
        out[vmss] = found
    return out
