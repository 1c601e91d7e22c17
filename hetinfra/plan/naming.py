"""Deployment-unit names: DNS-safe, deterministic, distinct; they name the SkyPilot services, the
Pulumi resources and the router's endpoints, so they are part of the plan (plan.json
``allocations[].deployment_unit``)."""

from __future__ import annotations

import hashlib
import re
from typing import Optional

MAX_NAME_LEN = 63


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower())
    return s.strip("-")


def unit_name(
    service_model: str,
    cloud: str,
    region: str,
    instance_type: str,
    *,
    spot: bool = False,
    suffix: Optional[str] = None,
) -> str:
    """Deterministic DNS-safe unit name, e.g. ``chat-7b-aws-us-east-1-g6-xlarge``.

    Lowercase, only ``[a-z0-9-]``, starts with a letter, at most 63 characters. Spot units get a
    ``-spot`` suffix; ``suffix`` (e.g. a template id) is appended when the same model, cloud,
    region and instance type appear in more than one unit. Names that would be longer than 63
    characters are cut and end in 8 hex digits of a SHA-1 of the full name, so distinct inputs
    keep distinct names.
    """
    parts = [service_model, cloud, region, instance_type]
    if spot:
        parts.append("spot")
    if suffix:
        parts.append(suffix)
    full = "-".join(p for p in (_slug(x) for x in parts) if p)
    if not full:
        raise ValueError("unit_name: all parts are empty")
    if not full[0].isalpha():
        full = "u-" + full
    if len(full) <= MAX_NAME_LEN:
        return full
    digest = hashlib.sha1(full.encode()).hexdigest()[:8]
    return full[: MAX_NAME_LEN - len(digest) - 1].rstrip("-") + "-" + digest
