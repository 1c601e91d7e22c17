"""The Pulumi program of a generated project: plan.json -> one fleet component per region.

A project under ``OUT/pulumi/<cloud>/`` has a two-line ``__main__.py`` that calls :func:`main`.
It reads the stack config ``hetinfra:cloud``, ``hetinfra:plan`` (path of the plan, default
``plan.json`` beside ``Pulumi.yaml``), the secrets ``hetinfra:apiKey`` and optional
``hetinfra:hfToken`` (``pulumi config set --secret``), ``gcp:project`` and the optional
``hetinfra:zones`` (GCP region -> zone) and ``hetinfra:images`` (the pinned image ids, region ->
role -> id: hetinfra.compile.images), and exports ``endpoints`` (unit -> ``[http://<load
balancer>:<port>/v1]``), ``vms`` (group name -> the cloud's name of its self-healing group),
``units`` (unit -> the groups that carry its capacity, :func:`hetinfra.stacks.common.unit_output`:
what ``hetinfra status`` counts live replicas with after a refresh) and ``images`` (per region and
role the image used and the newest found); with routing by origin, ``global_endpoint`` (the
cloud's front door over its regional gateways, :mod:`hetinfra.stacks.global_entry`, which also reads
``hetinfra:dnsZoneId`` and ``hetinfra:dnsName`` on AWS).

A plan with no allocation on the cloud is a valid empty program: ``pulumi up`` then removes
what the stack had, which is how a re-plan that leaves a cloud shrinks it to nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pulumi

from hetinfra.document import Plan, load_plan
from hetinfra.stacks import names
from hetinfra.stacks.common import FleetSecrets
from hetinfra.stacks.fleet import IAC_CLOUDS, fleets_for
from hetinfra.stacks.global_entry import global_entry


def build(plan: Plan, cloud: str, secrets: FleetSecrets, *, gcp_project: str | None = None,
          zones: dict[str, str] | None = None, images: dict | None = None) -> list[pulumi.ComponentResource]:
    """Create the fleet components of ``cloud`` for ``plan``; returns them in region order.
    ``images``: the pinned image ids, region -> role -> id (hetinfra.compile.images)."""
    names.install()  # every resource's name fits its cloud (stacks.names)
    fleets = [dataclasses.replace(a, images=dict((images or {}).get(a.region) or {})) for a in fleets_for(plan, cloud)]
    out: list[pulumi.ComponentResource] = []
    for args in fleets:
        name = f"{args.service}-{cloud}-{args.region}"
        if cloud == "aws":
            from hetinfra.stacks.aws import AwsGpuFleet

            out.append(AwsGpuFleet(name, args, secrets))
        elif cloud == "gcp":
            from hetinfra.stacks.gcp import GcpGpuFleet

            if not gcp_project:
                raise ValueError("the gcp stack needs a project: set deploy.gcp_project in the spec "
                                 "or run `pulumi config set gcp:project <id>`")
            out.append(GcpGpuFleet(name, args, secrets, project=gcp_project, zone=(zones or {}).get(args.region)))
        else:
            from hetinfra.stacks.azure import AzureGpuFleet

            out.append(AzureGpuFleet(name, args, secrets))
    return out


def export(fleets: list[pulumi.ComponentResource]) -> None:
    endpoints: dict = {}
    vms: dict = {}
    units: dict = {}
    images: dict = {}
    for f in fleets:
        endpoints.update(f.endpoints)
        vms.update(f.vms)
        units.update(f.units)
        images.update(f.images)
    pulumi.export("endpoints", endpoints)
    pulumi.export("vms", vms)
    pulumi.export("units", units)
    pulumi.export("images", images)
    gateways = {f"{f._name}": f.gateway_url for f in fleets if getattr(f, "gateway_url", None) is not None}
    if gateways:
        pulumi.export("gateways", gateways)


def main() -> None:
    """Entry point of a generated project's ``__main__.py``."""
    cfg = pulumi.Config("hetinfra")
    cloud = cfg.require("cloud")
    if cloud not in IAC_CLOUDS:
        raise ValueError(f"hetinfra:cloud must be one of {', '.join(IAC_CLOUDS)}; got {cloud!r}")
    # parsed once; every reader below takes the model. The project's plan.json is this cloud's copy
    # (hetinfra.compile.pulumi_project.cloud_plan): its allocations this cloud's, its routes every cloud's
    plan = load_plan(Path(cfg.get("plan") or "plan.json"), cloud_copy=True)
    secrets = FleetSecrets(api_key=cfg.require_secret("apiKey"), hf_token=cfg.get_secret("hfToken"),
                           gateway_keys=cfg.get_secret("gatewayApiKey"), tls_cert=cfg.get_secret("gatewayTlsCert"),
                           tls_key=cfg.get_secret("gatewayTlsKey"))
    zones = cfg.get_object("zones") or {}
    fleets = build(plan, cloud, secrets, gcp_project=pulumi.Config("gcp").get("project"), zones=zones,
                   images=cfg.get_object("images") or {})
    export(fleets)
    # routing by origin: the cloud's latency-based front door over its regional gateways (docs/regions.md)
    regions = [a.region for a in fleets_for(plan, cloud)]
    entry = global_entry(plan, cloud, list(zip(regions, fleets)),
                         {"dnsZoneId": cfg.get("dnsZoneId"), "dnsName": cfg.get("dnsName")})
    if entry is not None:
        pulumi.export("global_endpoint", entry)
