"""What every spec model shares: unknown keys are errors, models are frozen, and names that name
cloud resources are DNS labels."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict", "dns_name"]

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class Strict(BaseModel):
    """A spec model: extra="forbid" (a typo is an error with a did-you-mean), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def dns_name(value: str, what: str) -> str:
    """``value`` when it is a DNS label (it names cloud resources), else ValueError naming ``what``."""
    if not _NAME.match(value):
        raise ValueError(f"{what} {value!r} must be lowercase letters, digits and '-', 1-63 characters "
                         "(it names cloud resources)")
    return value
