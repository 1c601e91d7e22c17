"""What every spec model shares: unknown keys are errors, models are frozen, and names that name
cloud resources are DNS labels."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict", "dns_name", "is_dns_label"]

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class Strict(BaseModel):
    """A spec model: extra="forbid" (a typo is an error with a did-you-mean), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def is_dns_label(value: str) -> bool:
    """1-63 lowercase letters, digits and '-', starting and ending with a letter or digit."""
    return bool(_NAME.match(value))


def dns_name(value: str, what: str) -> str:
    """``value`` when it is a DNS label (it names cloud resources), else ValueError naming ``what``."""
    if not is_dns_label(value):
        raise ValueError(f"{what} {value!r} must be lowercase letters, digits and '-', 1-63 characters "
                         "(it names cloud resources)")
    return value
