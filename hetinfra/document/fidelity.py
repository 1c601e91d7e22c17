"""plan.json ``fidelity``'s typed parts: how verification judged the plan on replications with a
stated confidence (hetinfra.plan.replicated) and what the confirmation on fresh seeds found
(hetinfra.plan.confirm). docs/verification.md says what each key means."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr

from hetinfra.document.base import Doc, Number


class Statistics(Doc):
    """A model's statistics at its objective's percentile, over its replications."""

    ttft_ms: Optional[Number] = Field(None, description="TTFT at the objective's percentile, ms.")
    tpot_ms: Optional[Number] = Field(None, description="TPOT at the objective's percentile, ms.")
    attainment: Optional[Number] = Field(None, description="Fraction of requests meeting both objectives.")


class Judgement(Doc):
    """One model judged on independent replications (distinct seeds)."""

    replications: Optional[StrictInt] = Field(None, description="Replications the judgement rests on (1: missed on "
                                                                "the screening seed); absent in plans of hetinfra "
                                                                "before replications.")
    seeds: Optional[list[StrictInt]] = Field(None, description="Their seeds.")
    decision: Optional[Literal["met", "missed", "undecided"]] = Field(
        None,
        description="met: every bound inside its objective and stable; missed: outside even optimistically, "
                    "missed on the screening seed, unstable or past a ceiling; undecided: the bound straddles the "
                    "objective after the most replications (not met).")
    stable: Optional[StrictBool] = Field(None, description="Its units were in steady state in every replication.")
    estimate: Optional[Statistics] = Field(None, description="The mean over replications of each statistic.")
    bound: Optional[Statistics] = Field(None, description="Its one-sided bound at fidelity.replications.confidence "
                                                          "(upper for latencies, lower for attainment); null on one "
                                                          "replication.")
    ratio_bound: Optional[Number] = Field(None, description="The worst bound over its objective (> 1 misses).")


class FidelityModel(Judgement):
    """A model of fidelity.models: its worst replication's latency blocks (ttft_ms, tpot_ms, ...) and the
    judgement over the replications of the search's seeds."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr = Field(description="Model name.")
    met: StrictBool = Field(description="Whether it met (the judgement, and no unit past its ceiling).")


class ConfirmedModel(Judgement):
    model: StrictStr = Field(description="Model name.")
    met: StrictBool = Field(description="Whether it met on the confirmation's seeds.")


class Veto(Doc):
    """A confirmation that missed where no removal was left to put back: the search resumed its rounds."""

    after_round: StrictInt = Field(description="The last round before it.")
    seeds: list[StrictInt] = Field(description="The confirm seeds it missed on (later confirmations use others).")
    models: list[StrictStr] = Field(description="The models it missed.")


class Confirmation(Doc):
    """The final plan on fresh seeds that no decision of the search saw."""

    met: StrictBool = Field(description="Whether every model met on them.")
    seeds: list[StrictInt] = Field(description="The confirm seeds used.")
    models: list[ConfirmedModel] = Field(description="Per model.")
    vetoes: list[Veto] = Field(default_factory=list, description="Earlier confirmations that sent the search back.")


class Replications(Doc):
    """How every decision of verification and the confirmation were judged."""

    method: StrictStr = Field(description="The method, in words.")
    confidence: Number = Field(description="One-sided confidence of every bound (0.95).")
    base_seed: StrictInt = Field(description="planning.verify.seed: the decide and confirm seeds derive from it.")
    start: StrictInt = Field(description="Replications per judgement after the one-seed screen.")
    step: StrictInt = Field(description="Replications added at a time while a model is undecided.")
    max_replications: StrictInt = Field(description="The most replications of one judgement.")
    decide_requests: Optional[StrictInt] = Field(None, description="Requests per model and replication of the search "
                                                                   "(fidelity.requests: the confirmation's).")
    decide_seeds: list[StrictInt] = Field(description="Seeds of the final plan's judgement by the search.")
    confirm_seeds: list[StrictInt] = Field(description="Seeds of its confirmation (disjoint from the decide seeds).")
    simulated: dict[StrictStr, StrictInt] = Field(description="Replications simulated per purpose (decide, confirm).")
