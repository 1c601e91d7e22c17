"""plan.json ``allocations[].adapters``: the LoRA adapters a unit holds, with the slots, memory and
derate its engines were planned at (issue 38, hetinfra.plan.adapters; docs/concepts/adapters.md)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator
from pydantic import ValidationInfo

from hetinfra.document.base import Doc, NonNegative, Number, bounded


class HeldAdapter(Doc):
    """One adapter a unit holds."""

    name: StrictStr = Field(description="The adapter's name: the OpenAI `model` its requests carry (vLLM "
                                        "--lora-modules name).")
    source: StrictStr = Field(description="What vLLM loads (--lora-modules name=source).")
    lora_rank: StrictInt = Field(ge=1, description="The adapter's LoRA rank (spec `adapters[].rank`).")
    instances: StrictInt = Field(ge=1, description="Instances holding it: every instance of the unit (one "
                                                   "--lora-modules list, a GPU slot each).")
    routed_rps: NonNegative = Field(description="Requests/s of the adapter routed to the unit at the planned demand.")


class UnitAdapters(Doc):
    """A unit whose engines serve LoRA adapters beside the base model."""

    max_loras: StrictInt = Field(ge=1, description="GPU adapter slots of each engine (vLLM --max-loras).")
    max_lora_rank: StrictInt = Field(ge=1, description="Rank of each slot (vLLM --max-lora-rank): the smallest "
                                                       "vLLM allows at or above the largest adapter's rank.")
    slot_memory_gb: NonNegative = Field(description="GPU memory per GPU the slots take out of the KV cache, GB.")
    slowdown: bounded(ge=1) = Field(description="Step-time multiplier of a batch with max_loras distinct adapters "
                                               "(hetinfra.perf.lora.slowdown; its constants name their sources).")
    derate: bounded(gt=0, le=1) = Field(description="Throughput factor the unit's rates were planned at: 1 / slowdown, "
                                                   "beside the slots' memory.")
    cold_load_ms: NonNegative = Field(description="Time to copy one adapter from host memory into a slot.")
    held: list[HeldAdapter] = Field(min_length=1, description="The adapters the unit holds, by name.")

    @field_validator("held")
    @classmethod
    def _loadable(cls, v: list[HeldAdapter], info: ValidationInfo) -> list[HeldAdapter]:
        """Each adapter once, each within the slots' rank: vLLM refuses --lora-modules with an adapter
        above --max-lora-rank, and a name twice would be one adapter counted twice."""
        names = [h.name for h in v]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"holds adapter(s) {', '.join(dup)} more than once")
        rank = info.data.get("max_lora_rank")
        if over := [h.name for h in v if rank is not None and h.lora_rank > rank]:
            raise ValueError(f"holds {', '.join(over)} of a rank above the slots' max_lora_rank {rank} (vLLM would "
                             "refuse to load it)")
        return v


class AdapterCandidate(Doc):
    """One placement of a base's adapters that planning priced (hetinfra.plan.held_everywhere)."""

    name: Literal["placed", "everywhere"] = Field(description="placed: the ILP's placement (slot tiers, x[u,a]); "
                                                              "everywhere: every adapter on every replica.")
    verified: StrictBool = Field(description="Simulated through verification's rounds, trim and confirmation.")
    met: Optional[StrictBool] = Field(None, description="It met every objective (null: not verified).")
    cost_usd_per_hour: Optional[NonNegative] = Field(None, description="$/h of its verified plan (null: not verified).")
    gpus: Optional[StrictInt] = Field(None, ge=0, description="GPUs of its verified plan (null: not verified).")
    starting_cost_usd_per_hour: Optional[NonNegative] = Field(
        None, description="$/h of its plan at the starting rate factors, before verification (everywhere: what "
                          "decides whether it is verified; null where it was not solved or has no plan).")


class AdapterCandidates(Doc):
    """plan.json ``adapter_candidates``: the placements compared, which was kept and why; absent without
    adapters, with ``adapter_placement: everywhere``, or unverified."""

    placements: list[AdapterCandidate] = Field(min_length=1, description="The placements priced, placed first.")
    kept: Literal["placed", "everywhere"] = Field(description="The candidate whose plan this is.")
    reason: StrictStr = Field(description="Why it was kept (and why the other was or was not verified).")
