"""What every spec model shares: unknown keys are errors, models are frozen, and names that name
cloud resources are DNS labels."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from hetinfra.facts import is_dns_label  # the one DNS-label rule

__all__ = ["Strict", "dns_name", "is_dns_label"]


class Strict(BaseModel):
    """A spec model: extra="forbid" (a typo is an error with a did-you-mean), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def dns_name(value: str, what: str) -> str:
    """``value`` when it is a DNS label (it names cloud resources), else ValueError naming ``what``."""
    if not is_dns_label(value):
        raise ValueError(f"{what} {value!r} must be lowercase letters, digits and '-', 1-63 characters "
                         "(it names cloud resources)")
    return value
