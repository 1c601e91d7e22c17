"""Availability caps: how many GPUs of a kind one may run in a region.

Sources:
- a user caps CSV ``cloud,region,gpu,max_gpus`` (optional ``purchase`` column: on-demand|spot),
  strict like every user file (a bad row is exit 2);
- AWS, credentialed (optional extra ``hetinfra[aws]``): Service Quotas + instance type offerings
  (:func:`hetinfra.price_feeds.aws_api.gpu_caps`);
- GCP regional GPU quotas (Compute Engine REST) and Azure Compute usages (ARM REST), credentialed
  by a bearer token from the environment or the gcloud/az CLI
  (:mod:`hetinfra.price_feeds.cloud_quotas`; both purchase options are returned).

Missing SDKs or credentials are warnings, never failures. :func:`caps_dict` gives the planner's
``{(cloud, region, gpu): max_gpus}`` (the minimum where several sources cap the same key).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from hetinfra.errors import InvalidInputError

CAPS_COLUMNS = ("cloud", "region", "gpu", "max_gpus")
PURCHASES = ("on-demand", "spot")


@dataclass(frozen=True)
class AvailabilityCap:
    cloud: str
    region: str
    gpu: str
    max_gpus: int
    purchase: str = "on-demand"
    source: str = ""


def parse_caps_csv(text: str, *, name: str) -> list[AvailabilityCap]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in CAPS_COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(f"{name}: caps CSV lacks column(s) {', '.join(missing)}",
                                hint="header must be: " + ",".join(CAPS_COLUMNS) + " (optional: purchase)")
    out = []
    for lineno, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
        where = f"{name}:{lineno}"
        for col in ("cloud", "region", "gpu"):
            if not row.get(col):
                raise InvalidInputError(f"{where}: column '{col}' is empty")
        try:
            n = float(row["max_gpus"])
        except ValueError:
            raise InvalidInputError(f"{where}: max_gpus {row['max_gpus']!r} is not a number") from None
        if n < 0 or n != int(n):
            raise InvalidInputError(f"{where}: max_gpus must be a whole number >= 0, got {row['max_gpus']!r}")
        purchase = row.get("purchase") or "on-demand"
        if purchase not in PURCHASES:
            raise InvalidInputError(f"{where}: purchase must be one of {', '.join(PURCHASES)}, got {purchase!r}")
        out.append(AvailabilityCap(row["cloud"].lower(), row["region"], row["gpu"], int(n), purchase, name))
    return out


def load_caps_csv(path: Path | str) -> list[AvailabilityCap]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"caps file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read caps file {path}: {exc}") from None
    return parse_caps_csv(text, name=str(path))


def caps_dict(caps: Iterable[AvailabilityCap], *, purchase: str = "on-demand") -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for c in caps:
        if c.purchase != purchase:
            continue
        key = (c.cloud, c.region, c.gpu)
        out[key] = min(c.max_gpus, out.get(key, c.max_gpus))
    return out


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
