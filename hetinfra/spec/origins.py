"""Where a model's clients are: ``demand.origins`` entries and what they require of routing.

An origin is a region name with a share of the model's requests, written either as a number (the
published shape, ``{us-east-1: 0.6}``) or as a mapping with a residency rule
(``{eu-west-1: {share: 0.4, residency: continent}}``). Residency says where its requests may be
served: ``region`` (only in that region), ``continent`` (on its continent), ``none`` (anywhere).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hetinfra.spec.base import Strict

__all__ = ["ANY_ORIGIN", "OriginSpec", "Residency", "origin_residency", "origin_shares"]

Residency = Literal["region", "continent", "none"]

#: the one origin of a model that declares none: its routing is plan.json's ``routing``
ANY_ORIGIN = "any"


class OriginSpec(Strict):
    """One origin with a residency rule."""

    share: float = Field(ge=0, allow_inf_nan=False, description="Relative share of the model's requests (normalized).")
    residency: Residency = Field(
        "none", description="Where this origin's requests may be served: region (only in the origin's region), "
                            "continent (on its continent), none (anywhere the objectives allow).")


def origin_shares(origins) -> dict[str, float]:
    """region -> share (as written, not normalized), whatever shape each entry has."""
    return {r: (v.share if isinstance(v, OriginSpec) else float(v)) for r, v in (origins or {}).items()}


def origin_residency(origins) -> dict[str, str]:
    """region -> residency rule ('none' for a plain share)."""
    return {r: (v.residency if isinstance(v, OriginSpec) else "none") for r, v in (origins or {}).items()}
