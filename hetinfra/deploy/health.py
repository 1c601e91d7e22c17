"""Is new capacity serving? The health wait of ``replan --apply`` (make-before-break), from the
host that runs it (cron), where the units' vLLM port is closed by default (``ingress_cidrs: []``).

Each unit is checked the first way that works:

1. **SkyServe units**: ``sky serve status`` (as many READY replicas as planned);
2. **the cloud's own signal** (Pulumi units, :data:`CLOUD_SIGNAL`): the unit's groups count their
   serving replicas with the health checks that also heal them, vLLM's ``/health``: AWS, the
   unit's load balancer target group (``DescribeTargetHealth``: as many healthy targets as
   replicas); GCP, the managed instance groups' autohealer health (``listManagedInstances``);
   Azure, the scale sets' Application Health extension (the VMs' instance view); the last two
   through hetinfra.deploy.groups, as ``hetinfra status`` reads them;
3. **gateway** (``deploy.gateway.enabled``, clients admitted by ``ingress_cidrs``: the cron host is
   one of them): its fleet region's gateway's ``/health``, which lists per unit the backends it
   health-checks itself; the unit is up when all of them have stayed healthy for
   ``GATEWAY_SETTLE_S`` (a gateway that just started counts a backend healthy until its checks
   fail ``fall`` times, 2 x 5 s by default);
4. **direct**: ``deploy.management_cidrs`` (the cron host's ``/32``) or, without a gateway,
   ``ingress_cidrs`` admit the host to the vLLM port: each endpoint's ``/health``.

The cloud's count comes first because a unit's endpoint (and the gateway's backend) is one load
balancer over all its replicas: its ``/health`` answers once any replica serves, so ways 3 and 4
cannot tell a unit that grew from 1 to 3 replicas from one still at 1. They are kept for a cloud
without a signal hetinfra reads. A unit no way can check: :func:`unchecked_units` names it,
``apply`` warns and ``replan --apply`` refuses (exit 2) before it changes anything.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from typing import Callable

from hetinfra.document import Allocation, Plan
from hetinfra.document.state import RunningAllocation, State
from hetinfra.errors import ProviderError
from hetinfra.fileio import json_value
from hetinfra.httpget import get

#: clouds whose Pulumi units carry a readiness signal of their own (see the module docstring)
CLOUD_SIGNAL = {"aws": "the load balancer's target group health",
                "gcp": "the managed instance groups' autohealer health",
                "azure": "the scale sets' Application Health extension"}
GATEWAY, CLOUD, SKYSERVE, DIRECT = "gateway", "cloud", "skyserve", "direct"
KUBERNETES = "kubernetes"  # deploy.target kubernetes: the workload's ready replicas (readiness probe on /health)
GATEWAY_SETTLE_S = 30.0


def method(plan: Plan, alloc: Allocation, path: str) -> str | None:
    """How a unit's health is checked from the cron host (module docstring), or None: no way."""
    d = plan.deploy
    if path == "skypilot":
        return SKYSERVE
    if path == KUBERNETES:
        return KUBERNETES
    if alloc.cloud in CLOUD_SIGNAL:
        return CLOUD
    if d.gateway.enabled and d.ingress_cidrs:
        return GATEWAY
    if d.management_cidrs or (not d.gateway.enabled and d.ingress_cidrs):
        return DIRECT
    return None


def unchecked_units(plan: Plan, allocs: list[tuple[Allocation, str | None]]) -> list[str]:
    """Units (allocation, path) whose health the cron host has no way to check."""
    return sorted(a.deployment_unit for a, path in allocs if path and method(plan, a, path) is None)


def no_check_message(units: list[str]) -> tuple[str, str]:
    """(message, hint) for units without a health check path."""
    return (f"the health of {', '.join(units)} cannot be checked from this host: their cloud has no health "
            "signal hetinfra reads, their vLLM port admits no management CIDR and there is no gateway",
            "set deploy.management_cidrs: [<this host's public IP>/32] (or deploy.gateway.enabled: true with "
            "this host in ingress_cidrs) in the spec and plan again")


def http_health(urls: list[str], *, timeout_s: float, api_key: str | None = None, interval_s: float = 10.0,
                sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Poll ``<url without /v1>/health`` until all answer 200 or ``timeout_s`` passes; returns the
    URLs still unhealthy."""
    def check(pending: list[str]) -> list[str]:
        still = []
        for url in pending:
            base = url[:-3] if url.rstrip("/").endswith("/v1") else url.rstrip("/")
            req = urllib.request.Request(base.rstrip("/") + "/health",
                                         headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
            try:  # an answer that is not HTTP is an OSError (hetinfra.httpget), as no answer is
                if get(req, timeout=min(10.0, max(0.5, timeout_s)))[0] != 200:
                    still.append(url)
            except OSError:
                still.append(url)
        return still

    return poll(list(urls), check, timeout_s=timeout_s, interval_s=interval_s, sleep=sleep, clock=clock)


def poll(pending: list, check: Callable[[list], list], *, timeout_s: float, interval_s: float = 10.0,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> list:
    """Call ``check(pending)`` (returns what is still pending) until nothing is or time is up."""
    deadline = clock() + timeout_s
    while pending:
        pending = check(pending)
        if not pending or clock() >= deadline:
            break
        sleep(min(interval_s, max(0.0, deadline - clock())))
    return pending


def _gateway_units(url: str, timeout_s: float) -> dict:
    """The gateway's ``/health`` per unit ({} when it does not answer yet): it answers 503 with the
    same body while no backend is healthy."""
    base = url.rstrip("/").removesuffix("/v1")
    try:
        body = get(base + "/health", timeout=min(10.0, max(0.5, timeout_s)))[1]
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read()
        except (OSError, http.client.HTTPException):
            return {}
    except OSError:
        return {}
    try:
        doc = json_value(body)
    except ValueError:
        return {}
    units = doc.get("units") if isinstance(doc, dict) else None
    if not isinstance(units, dict):
        return {}
    # unit -> {"replicas": n, "healthy": n}: another shape (any JSON a server at that URL answers, a
    # list or a count '3') was an AttributeError or TypeError; such a unit is not seen healthy
    return {u: v for u, v in units.items() if isinstance(v, dict) and all(_count(v.get(k)) for k in ("replicas", "healthy"))}


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _target_health(region: str, arn: str) -> int:
    """Healthy targets of an AWS target group (boto3 ``describe_target_health``)."""
    from hetinfra.price_feeds.aws_api import client_factory, session_or_warning

    session, why = session_or_warning()
    if session is None:
        raise ProviderError(f"cannot read the target group health in {region}: {why}")
    try:
        found = client_factory(session)("elbv2", region).describe_target_health(TargetGroupArn=arn)
    except Exception as exc:  # botocore's ClientError, EndpointConnectionError, ...
        raise ProviderError(f"cannot read the target group health in {region}: {type(exc).__name__}: {exc}",
                            hint="check the AWS credentials (`aws sts get-caller-identity`)") from None
    return sum(1 for t in found.get("TargetHealthDescriptions", []) if (t.get("TargetHealth") or {}).get("State")
               == "healthy")


def wait_healthy(plan: Plan, state_doc: State | dict, units: list[str], *, timeout_s: float, env: dict,
                 http: Callable[..., list[str]] = http_health, interval_s: float = 10.0,
                 settle_s: float = GATEWAY_SETTLE_S, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Wait until every unit in ``units`` (running per ``state_doc``, state.json) serves its
    replicas, each checked the first way that works (module docstring); returns what is still
    not healthy (unit names, or URLs of the direct way)."""
    state = State.of(state_doc)
    allocs = {a.deployment_unit: a for a in state.allocations}
    how = {u: method(plan, allocs[u], allocs[u].path) for u in sorted(units) if u in allocs}
    missing = unchecked_units(plan, [(allocs[u], allocs[u].path) for u in how])
    if missing:
        msg, hint = no_check_message(missing)
        raise ProviderError(msg, hint=hint)
    deadline = clock() + timeout_s
    urls = [url for u, m in how.items() if m == DIRECT for url in state.endpoints.get(u, [])]
    bad = http(urls, timeout_s=timeout_s, api_key=env.get("VLLM_API_KEY")) if urls else []
    healthy_since: dict[str, float] = {}

    def check(pending: list[str]) -> list[str]:
        sky = [u for u in pending if how[u] == SKYSERVE]
        ready = _sky_ready(sky) if sky else {}
        return [u for u in pending if not _serves(u, how[u], allocs[u], plan, state, ready, healthy_since,
                                                  env=env, timeout_s=timeout_s, settle_s=settle_s, clock=clock)]

    waiting = [u for u, m in how.items() if m != DIRECT]
    return bad + poll(waiting, check, timeout_s=max(0.0, deadline - clock()), interval_s=interval_s, sleep=sleep,
                      clock=clock)


def _sky_ready(units: list[str]) -> dict[str, int]:
    """READY replicas per SkyServe service (``sky serve status``)."""
    from hetinfra.deploy.sky_driver import serve_status

    return {r.get("name"): sum(1 for x in r.get("replica_info") or []
                               if str(getattr(x.get("status"), "value", x.get("status"))) == "READY")
            for r in serve_status(units)}


def _serves(u: str, how: str, a: RunningAllocation, plan: Plan, state: State, ready: dict[str, int],
            healthy_since: dict[str, float], *, env: dict, timeout_s: float, settle_s: float,
            clock: Callable[[], float]) -> bool:
    """Whether unit ``u`` serves its planned replicas now, checked the way ``how``."""
    if how == SKYSERVE:
        return ready.get(u, 0) >= a.count
    if how == KUBERNETES:
        from hetinfra.deploy.kube import ready_replicas

        return ready_replicas(state, a) >= a.count
    if how == GATEWAY:
        url = state.gateways.get(f"{state.service or plan.service}-{a.cloud}-{a.region}")
        seen = _gateway_units(url, timeout_s).get(u) if url else None
        ok = bool(seen) and seen.get("replicas", 0) > 0 and seen.get("healthy", 0) >= seen["replicas"]
        since = healthy_since.setdefault(u, clock()) if ok else healthy_since.pop(u, None)
        return ok and clock() - since >= settle_s
    stack = state.pulumi.get(a.cloud)
    entry = ((stack.outputs if stack else {}).get("units") or {}).get(u)
    if a.cloud == "aws":
        arn = (entry or {}).get("target_group")
        return bool(arn) and _target_health(a.region, arn) >= a.count
    from hetinfra.deploy.drift import live_replicas

    return bool(entry) and live_replicas(a, entry, env) >= a.count
