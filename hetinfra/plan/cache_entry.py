"""The typed format of a template-cache entry (hetinfra.plan.template_cache): what a read accepts.

A cache directory is shared and outlives the hetinfra that wrote it; an entry edited, truncated or
written by another program must be a miss (the library is rebuilt), never a template with a string
for a rate or a NaN. Strict types (no "3" for 3, no 1 for true), finite numbers, counts >= 1 and
rates >= 0, no keys the format lacks.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, model_validator

from hetinfra.plan.library import ClassCoverage, Template


class CacheEntry(BaseModel):
    # strict and finite hold for the dataclasses inside too (pydantic passes the config down)
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")

    format: int
    model: str
    templates: tuple[Template, ...]
    coverage: dict[str, ClassCoverage]

    @model_validator(mode="after")
    def _counts_and_rates(self) -> "CacheEntry":
        for t in self.templates:
            if min(t.gpus_per_instance, t.tp, t.pp, t.engines) < 1 or t.node_count < 0:
                raise ValueError(f"template {t.id}: a GPU, tp, pp or engine count below 1")
            if any(not math.isfinite(r) or r < 0 for r in t.rates.values()):
                raise ValueError(f"template {t.id}: a rate below 0")
        return self
