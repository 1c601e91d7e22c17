"""Availability caps: how many GPUs of a kind one may run in a region.

Sources:
- a user caps CSV ``cloud,region,gpu,max_gpus`` (optional ``purchase`` column: on-demand|spot),
  strict like every user file (a bad row is exit 2);
- AWS, credentialed (optional extra ``hetinfra[aws]``): Service Quotas + instance type offerings
  (:func:`hetinfra.price_feeds.aws_api.gpu_caps`);
- GCP regional GPU quotas (Compute Engine REST) and Azure Compute usages (ARM REST), credentialed
  by a bearer token from the environment or the gcloud/az CLI
  (:mod:`hetinfra.price_feeds.cloud_quotas`; both purchase options are returned).

Missing SDKs or credentials are warnings, never failures. :func:`hetinfra.price_feeds.caps.caps_dict` gives the planner's
``{(cloud, region, gpu): max_gpus}`` (the minimum where several sources cap the same key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from hetinfra.price_feeds.caps import AvailabilityCap, load_caps_csv

def gcp_caps(regions: Iterable[str] = (), **kw) -> tuple[list[AvailabilityCap], list[str]]:
    """GCP regional GPU quotas and accelerator types per zone: :func:`hetinfra.price_feeds.cloud_quotas.gcp_caps` (never raises)."""
    from hetinfra.price_feeds import cloud_quotas

    return cloud_quotas.gcp_caps(regions, **kw)


def azure_caps(regions: Iterable[str] = (), offers=(), **kw) -> tuple[list[AvailabilityCap], list[str]]:
    """Azure Compute usages: :func:`hetinfra.price_feeds.cloud_quotas.azure_caps` (never raises)."""
    from hetinfra.price_feeds import cloud_quotas

    return cloud_quotas.azure_caps(regions, offers, **kw)


def load_availability(caps_file: Path | str | None = None, *, clouds: Iterable[str] = (), offers=(),
                      spot: bool = False, timeout_s: float = 20.0, aws_factory=None,
                      gcp_base_url: str | None = None, azure_base_url: str | None = None,
                      env: Mapping[str, str] | None = None, gcp_credentials=None, azure_credentials=None,
                      http: Mapping | None = None) -> tuple[list[AvailabilityCap], list[str]]:
    """Caps from a user file and from the credentialed APIs of ``clouds``; (caps, warnings).

    ``offers`` tell which regions/instance types to ask each cloud about (a cloud without offers
    is not asked). Only the caps file can fail (exit 2); every API problem is a warning. The
    keyword arguments after ``aws_factory`` are for tests and mirrors: API base URLs, the
    environment to read credentials (and the CLIs' PATH) from, credential getters
    ``() -> (token, project or subscription)`` and extra HttpClient arguments.
    """
    caps: list[AvailabilityCap] = []
    warnings: list[str] = []
    if caps_file is not None:
        caps.extend(load_caps_csv(caps_file))
    offers = list(offers)
    for cloud in clouds:
        if cloud == "aws":
            from hetinfra.price_feeds.aws_api import gpu_caps

            regions = sorted({o.region for o in offers if o.cloud == "aws"})
            got, warns = gpu_caps(regions, offers, spot=spot, timeout_s=timeout_s, factory=aws_factory)
        elif cloud in ("gcp", "azure"):
            regions = sorted({o.region for o in offers if o.cloud == cloud})
            kw = dict(env=env, timeout_s=timeout_s, http=http)
            if cloud == "gcp":
                got, warns = gcp_caps(regions, offers=offers, base_url=gcp_base_url, credentials=gcp_credentials, **kw)
            else:
                got, warns = azure_caps(regions, offers, base_url=azure_base_url, credentials=azure_credentials, **kw)
        else:
            got, warns = [], [f"{cloud} availability: no API for this cloud"]
        caps.extend(got)
        warnings.extend(warns)
    return caps, warnings
