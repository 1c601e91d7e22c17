"""Deployment-unit names: DNS-safe, deterministic, distinct; they name the SkyPilot services, the
Pulumi resources and the router's endpoints, so they are part of the plan (plan.json
``allocations[].deployment_unit``). Served model names are free-form (``llama-3.1-8b``); resources use
their slug (:func:`model_slugs`, plan.json ``models[].slug``)."""

from __future__ import annotations

import hashlib
import re
from typing import Optional

from hetinfra.spec.base import is_dns_label

MAX_NAME_LEN = 63
#: a model slug longer than this is cut and ends in a hash, leaving room for cloud, region and type
MAX_SLUG_LEN = 40


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


def _digest(text: str, n: int = 6) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def model_slugs(names: list[str]) -> dict[str, str]:
    """DNS-safe slug of each served model name, for the resources named after it.

    A name that already is a DNS label (``chat-8b``: lowercase letters, digits, '-') is its own slug,
    so plans made before served names were free-form keep their resource names. Any other name is
    lowercased with every run of other characters turned into '-' (``llama-3.1-8b`` ->
    ``llama-3-1-8b``); it ends in 6 hex digits of a SHA-1 of the name when that slug would be longer
    than 40 characters or when another name of the service slugs alike (``Llama-3.1-8B`` next to
    ``llama-3.1-8b``), so two names never share resources. A slug depends only on its name and on
    which other names collide with it: re-plans of a service keep it."""
    base: dict[str, str] = {}
    for n in names:
        base[n] = n if is_dns_label(n) else (_slug(n) or "m")
    out: dict[str, str] = {}
    for n in names:
        b = base[n]
        if b == n:  # already a slug; never renamed
            out[n] = n
            continue
        clash = any(base[o] == b for o in names if o != n)
        if clash or len(b) > MAX_SLUG_LEN:
            b = b[: MAX_SLUG_LEN - 7].rstrip("-") + "-" + _digest(n)
        out[n] = b
    if len(set(out.values())) != len(out):  # only if a hash suffix equals another literal name
        out = {n: (s if list(out.values()).count(s) == 1 or s == n else s + "-" + _digest(n + "#")) for n, s in out.items()}
    return out
