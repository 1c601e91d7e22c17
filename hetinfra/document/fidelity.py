"""plan.json ``fidelity``'s typed parts: how verification judged the plan on replications with a
stated confidence (hetinfra.plan.replicated) and what the confirmation on fresh seeds found
(hetinfra.plan.confirm). docs/verification.md says what each key means."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr

from hetinfra.document.base import Doc, Number, bounded


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
    bound: Optional[Statistics] = Field(None, description="Its one-sided bound at fidelity.replications.confidence, "
                                                          "or at this judgement's own confidence where it states "
                                                          "one (upper for latencies, lower for attainment); null on "
                                                          "one replication.")
    ratio_bound: Optional[Number] = Field(None, description="The worst bound over its objective (> 1 misses).")
    confidence: Optional[bounded(gt=0, lt=1)] = Field(None, description="This judgement's one-sided confidence where it is not "
                                                           "fidelity.replications.confidence: 0.99 for a model the "
                                                           "confirmation judged under pressure (in a replication, a "
                                                           "KV cache 95% full or preempting, or a replica running "
                                                           "95% of its max_num_seqs); absent otherwise.")


class _Head(Doc):
    """A model's name and whether it met: the first keys of its line (a subclass lists
    :class:`Judgement` first among its bases, so that its fields follow these in plan.json)."""

    model: StrictStr = Field(description="Model name.")
    met: StrictBool = Field(description="Whether it met (the judgement, and no unit past its ceiling).")


class _Worst(Doc):
    """A model's worst replication (the published latency blocks), the first keys of its line."""

    model: StrictStr = Field(description="Model name.")
    slo: Optional[dict[str, Any]] = Field(None, description="The model's objective.")
    met: StrictBool = Field(description="Whether it met (the judgement, and no unit past its ceiling).")
    requests: Optional[StrictInt] = Field(None, description="Requests simulated for it.")
    ttft_ms: Optional[dict[str, Optional[Number]]] = Field(None, description="TTFT statistics, ms.")
    tpot_ms: Optional[dict[str, Optional[Number]]] = Field(None, description="TPOT statistics, ms.")
    attainment: Optional[Number] = Field(None, description="Fraction of requests meeting both objectives.")
    preempted_requests: Optional[StrictInt] = Field(None, description="Requests the engine preempted.")


class FidelityModel(Judgement, _Worst):
    """A model of fidelity.models: its worst replication's latency blocks (ttft_ms, tpot_ms, ...) and the
    judgement over the replications of the search's seeds."""

    model_config = ConfigDict(extra="allow")

    @property
    def percentile(self) -> str:
        """The percentile its objective names (p99 where it names none)."""
        return (self.slo or {}).get("percentile") or "p99"

    def objective(self, stat: str) -> Optional[float]:
        """Its objective's ``stat`` (``ttft_ms``, ``tpot_ms``, ``attainment``), None where it has none."""
        return (self.slo or {}).get(stat)

    def statistic(self, stat: str, judged: Optional["Judgement"] = None) -> tuple[Any, Any]:
        """(estimate, bound) of ``stat`` by ``judged`` (this model's judgement, or its confirmation's);
        a plan of hetinfra before replications has no estimate: its worst replication's value at the
        objective's percentile (the attainment: its own), and no bound."""
        j = self if judged is None else judged
        if j.estimate is None:
            worst = self.attainment if stat == "attainment" else (getattr(self, stat) or {}).get(self.percentile)
            return worst, None
        return getattr(j.estimate, stat), getattr(j.bound, stat) if j.bound is not None else None


class CliffProbe(Doc):
    """A model met under pressure, run again at a little more load (hetinfra.plan.cliff): whether it
    falls off a cliff (a preemption cascade, a queue that stops draining) that close to its promise."""

    load: bounded(gt=0) = Field(description="The probe's load, a multiple of the declared demand: the promised "
                                            "load (fidelity.load) plus 5%.")
    seeds: list[StrictInt] = Field(description="Its seeds: the model's first confirm seeds.")
    run_ratios: list[Optional[Number]] = Field(description="Each run's worst statistic over its objective (null: a unit "
                                                       "not in steady state).")
    collapsed: StrictBool = Field(description="Whether a run missed its objective on a statistic by more than 1.5x "
                                              "that statistic's bound at the promised load (or a unit was not in "
                                              "steady state): the model is then not met.")


class Thrashing(Doc):
    """A model met under pressure: its KV thrashing over the confirmation's replications
    (hetinfra.plan.kv_pressure.thrashing)."""

    unit: StrictStr = Field(description="Its unit whose bound is highest.")
    bound: bounded(ge=0) = Field(description="That unit's lower confidence bound (at the judgement's confidence) on "
                                             "its re-preemption, from its preemptions and preempted requests summed "
                                             "over the replications (hetinfra.sim.stability.repreemption_low); "
                                             "in plans made before it, a prediction bound on one more run's "
                                             "estimate.")
    repreemption_max: bounded(gt=0, lt=1) = Field(description="The limit this judgement holds a unit's pooled "
                                                              "re-preemption to (hetinfra.sim.stability."
                                                              "REPREEMPTION_MAX; no single run is judged on it).")
    met: StrictBool = Field(description="Whether the bound is within the limit: the model is not met otherwise.")


class LumpyCount(Doc):
    """A model met under KV pressure with a lumpy class (one request of it holds 5% of a replica's KV cache or
    more), or met with a rare heavy class (hetinfra.plan.lumpy.rare_heavy): its runs at the promised load on
    seeds no other judgement uses, counted (hetinfra.plan.lumpy)."""

    unit: StrictStr = Field(description="The unit on which one request of the class holds the largest share (a rare "
                                        "heavy class: the unit with a KV size that carries most of it).")
    request_class: StrictStr = Field(description="That class (its name in the model's demand).")
    share: bounded(gt=0) = Field(description="The share of one replica's KV cache one request of the class holds "
                                             "at its largest (its upper edges), in the simulator's blocks.")
    load: bounded(gt=0) = Field(description="The count's load: the promised load (fidelity.load).")
    runs: StrictInt = Field(description="Its runs: at most 200; it stops once the misses pass the allowed count, "
                                        "or once so few missed that a model missing 5% of its runs would have "
                                        "shown more with a chance under 5% (none in 60 runs).")
    missed: list[StrictInt] = Field(description="The seeds whose run missed the model's objective (or had a unit "
                                                "not in steady state).")
    allowed: StrictInt = Field(description="The most misses of 200 runs a model whose runs miss at 1% shows with a "
                                           "chance of 5% or more (5).")
    met: StrictBool = Field(description="Whether the misses are no more than allowed: the model is not met "
                                        "otherwise.")


class ConfirmedModel(Judgement, _Head):
    """A model of fidelity.confirmation: whether it met on the confirmation's seeds, and the judgement."""

    requests: Optional[StrictInt] = Field(None, description="Requests per replication this model was confirmed at: "
                                                            "its own need (fidelity.requests is the longest "
                                                            "model's); absent in plans before per-model lengths.")
    thrashing: Optional[Thrashing] = Field(None, description="The KV thrashing of a model met under pressure whose "
                                                             "units preempted (present only then).")
    cliff: Optional[CliffProbe] = Field(None, description="The cliff probe of a model met under pressure (present "
                                                          "only for such a model; absent in plans before it).")
    lumpy: Optional[LumpyCount] = Field(None, description="The lumpy count of a model met under KV pressure with a "
                                                          "lumpy class (present only for such a model; absent in "
                                                          "plans before it).")


class Veto(Doc):
    """A confirmation that missed where no removal was left to put back: the search resumed its rounds."""

    after_round: StrictInt = Field(description="The last round before it.")
    seeds: list[StrictInt] = Field(description="The confirm seeds of the models it missed (later confirmations judge "
                                               "those models, and every model under KV pressure, on others).")
    models: list[StrictStr] = Field(description="The models it missed.")
    padded_usd_per_hour: Optional[Number] = Field(
        None, description="The plan it vetoed, padded (hetinfra.plan.alternative: replicas added to the models it "
                          "missed, each padded plan judged on fresh confirm seeds): its $/h where it cost less than "
                          "any earlier veto's and every model then met on those seeds and on the search's; absent "
                          "otherwise.")
    kept: Optional[StrictBool] = Field(None, description="True where that padded plan is the final plan: it saves at "
                                                         "least 5% of the plan the resumed search confirmed (or that "
                                                         "plan misses), and it met again, every model on fresh confirm "
                                                         "seeds at 98.75% (present only then).")


class Padding(Doc):
    """A model the confirmation still missed after the search's last veto, or the search's own seeds
    missed when its rounds ran out: the replicas added to it alone, each padded plan judged on fresh
    confirm seeds (and, for the latter, on the search's seeds too) (hetinfra.plan.pad)."""

    model: StrictStr = Field(description="The model.")
    missed_on: Literal["confirmation", "search", "cliff", "thrashing"] = Field(
        "confirmation", description="What it missed before the padding: 'confirmation', the fresh seeds after the "
                                    "search's last veto; 'search', the search's own seeds when its rounds "
                                    "(planning.verify.max_rounds) ran out; 'cliff', the confirmation's cliff "
                                    "probe: met at the promised load, it collapsed at 5% more "
                                    "(fidelity.confirmation.models[].cliff); 'thrashing', the bound on its KV "
                                    "thrashing over the confirmation's runs (fidelity.confirmation.models[].thrashing).")
    replicas_added: StrictInt = Field(description="Replicas added to it in all (none removed), net of what a later "
                                                  "trim removed from the same units. 0 where the padding "
                                                  "did not make it meet: the replicas tried are removed "
                                                  "again, and `reason` says how many.")
    replicas_by_unit: dict[StrictStr, StrictInt] = Field(description="Replicas added per unit (allocation) that the "
                                                                     "final plan still has.")
    relieved: Optional[dict[StrictStr, bounded(ge=0)]] = Field(
        None, description="Req/s moved off each unit that could take no replica within the spec's rules (an "
                          "availability cap, the budget, a spot fraction) to the replicas added to another unit of "
                          "the model (hetinfra.plan.relief); present only where the padding did so.")
    seeds: list[StrictInt] = Field(description="The fresh confirm seeds of its last judgement (no decision saw "
                                               "them).")
    met: StrictBool = Field(description="Whether that judgement met: the padded plan is confirmed for it.")
    after_veto: Optional[StrictInt] = Field(None, description="Where the final plan is a plan the confirmation vetoed, "
                                                              "padded (fidelity.confirmation.vetoes[].kept): that "
                                                              "veto's number, from 1 (present only then).")
    reason: Optional[StrictStr] = Field(None, description="Why the padding stopped short of a met judgement "
                                                          "(its step limit, no unit can take a replica, the work "
                                                          "budget; present only then).")


class OffPeakFleet(Doc):
    """One distinct off-peak fleet of a demand profile (``counts_by_period``), judged on the confirmation's
    judge with each model at its largest demand over the periods that run it, routed as the gateway routes
    with the top-up scaled down,
    and mended where it missed (hetinfra.plan.levels)."""

    periods: list[StrictInt] = Field(description="The profile periods (0-based) that run this fleet.")
    met: StrictBool = Field(description="Whether its last judgement met every model's objective.")
    replicas_added: dict[StrictStr, StrictInt] = Field(
        description="Replicas given back per unit (allocation) in those periods, over the counts first planned "
                    "there, because the fleet missed without them (never above the unit's peak count); "
                    "counts_by_period includes them.")
    missed: list[StrictStr] = Field(description="Models its last judgement still missed (empty when met).")


class Confirmation(Doc):
    """The final plan on fresh seeds that no decision of the search saw."""

    met: StrictBool = Field(description="Whether every model met on them.")
    seeds: list[StrictInt] = Field(description="The confirm seeds used.")
    models: list[ConfirmedModel] = Field(description="Per model.")
    vetoes: list[Veto] = Field(default_factory=list, description="Earlier confirmations that sent the search back.")
    padded: list[Padding] = Field(default_factory=list, description="Models still missed after the last veto, "
                                                                    "padded with replicas and judged on fresh "
                                                                    "seeds (none: nothing padded).")
    off_peak: list[OffPeakFleet] = Field(default_factory=list, description="A demand profile's off-peak fleets, each "
                                                                          "judged and mended (none: no profile, "
                                                                          "or no fleet smaller than the peak's).")
    reason: Optional[StrictStr] = Field(None, description="Why the plan is not confirmed where no confirmation ran "
                                                          "(the work budget was spent first; present only then).")


class Replications(Doc):
    """How every decision of verification and the confirmation were judged."""

    method: StrictStr = Field(description="The method, in words.")
    confidence: Number = Field(description="One-sided confidence of every bound of the search (0.95), but a "
                                           "judgement's that states its own (confirmation.models[].confidence).")
    confirm_confidence: Optional[Number] = Field(None, description="One-sided confidence of the confirmation's bounds "
                                                                   "(0.975; 0.99 for a model under pressure, which "
                                                                   "states it); absent in plans made before stop 56, "
                                                                   "whose confirmation was held to `confidence`.")
    base_seed: StrictInt = Field(description="planning.verify.seed: the decide and confirm seeds derive from it.")
    start: StrictInt = Field(description="Replications per judgement after the one-seed screen.")
    step: StrictInt = Field(description="Replications added at a time while a model is undecided.")
    max_replications: StrictInt = Field(description="The most replications of one judgement (the confirmation's "
                                                    "for a pressed model: 13, or 26 under bursty arrivals).")
    decide_requests: Optional[StrictInt] = Field(None, description="Requests per model and replication of the search "
                                                                   "(fidelity.requests: the confirmation's).")
    decide_seeds: list[StrictInt] = Field(description="Seeds of the final plan's judgement by the search.")
    confirm_seeds: list[StrictInt] = Field(description="Seeds of its confirmation (disjoint from the decide seeds).")
    simulated: dict[StrictStr, StrictInt] = Field(description="Replications simulated per purpose (decide, confirm), "
                                                              "the over-provisioning search's and the off-peak "
                                                              "fleets' included.")


class OverProvisioning(Doc):
    """fidelity.over_provisioning: how much more demand than declared the plan still meets."""

    ratio: Optional[Number] = Field(description="The smallest sustained multiple over the models; null: none "
                                                "searched.")
    by_model: dict[str, Number] = Field(description="Each model's largest sustained multiple of its demand.")
    definition: StrictStr = Field(description="How the multiple is searched.")


class TrimCheck(Doc):
    """fidelity.trim.last_pass[]: one removal the trim's last pass checked, and what refused it."""

    unit: StrictStr = Field(description="The unit (allocations[].unit) a replica, or the whole allocation, of "
                                        "was removed.")
    whole: StrictBool = Field(description="Whether the whole allocation was removed (else one replica).")
    refused_by: Optional[Literal["routing", "rules", "ceiling", "simulation", "confirmation"]] = Field(
        None, description="routing (a class or an origin's left without a unit), rules (the spec's spot, "
                          "locality, cap, budget or committed rules), ceiling (a unit past its measured interval "
                          "or roofline, not simulated), simulation (missed on the search's seeds) or confirmation "
                          "(missed on the confirm seeds); null: taken, where the work budget stopped the pass "
                          "after it.")
    detail: Optional[StrictStr] = Field(None, description="What refused it, in words.")
    unit_over: Optional[StrictStr] = Field(None, description="ceiling only: the unit loaded past its ceiling.")
    ratio: Optional[Number] = Field(None, description="ceiling only: that unit's load over its ceiling at the "
                                                     "verification load.")
    basis: Optional[StrictStr] = Field(None, description="ceiling only: which ceiling (its measured interval, or "
                                                         "a roofline).")
    missed_model: Optional[StrictStr] = Field(None, description="simulation or confirmation only: the model the "
                                                                "judgement missed (the removed unit's where it "
                                                                "missed); absent in plans before it.")
    decision: Optional[StrictStr] = Field(None, description="simulation or confirmation only: that model's verdict: "
                                                            "missed (its bound past the objective), undecided (the "
                                                            "replications ran out near it), vetoed, cliff, "
                                                            "thrashing or lumpy (a check after the bounds).")
    ratio_bound: Optional[Number] = Field(None, description="simulation or confirmation only: that model's worst "
                                                            "bound over its objective (> 1 misses), where the "
                                                            "judgement has one.")


class Trim(Doc):
    """fidelity.trim: the replicas the trim removed, how many removals it checked, and those the
    confirmation put back."""

    removed: list[dict[str, Any]] = Field(description="Removals the trim kept.")
    checked_removals: StrictInt = Field(description="Removals the trim's last pass checked (the length of "
                                                    "last_pass), each refused unless the work budget stopped it.")
    put_back: list[dict[str, Any]] = Field(description="The final plan's trim removals put back after missing on the "
                                                       "confirm seeds (the last confirmation's; a plan a veto "
                                                       "replaced keeps its own).")
    last_pass: list[TrimCheck] = Field(default_factory=list, description="The trim's last pass, removal by removal: "
                                       "why the trim took no more (the plan.json of a version before it has none).")

    def replicas_by_unit(self, removals: list[dict[str, Any]]) -> dict[str, int]:
        """Replicas per unit of ``removals`` (this trim's ``removed`` or ``put_back``: a whole unit's
        removal states its replicas, one replica's does not)."""
        out: dict[str, int] = {}
        for r in removals:
            unit = r["unit"]
            out[unit] = out.get(unit, 0) + int(r.get("replicas", 1))
        return out


class Fidelity(Doc):
    """How simulation checked the plan's latency objectives (written by verification, hetinfra.plan.verify;
    built by hetinfra.plan.fidelity). The fields are declared in plan.json's order (its bytes are this
    model's dump); unknown keys are kept (verification owns this section)."""

    model_config = ConfigDict(extra="allow")

    verified: StrictBool = Field(description="Whether the plan was simulated.")
    reason: Optional[StrictStr] = Field(None, description="Why it was not (unverified plans only).")
    met: Optional[StrictBool] = Field(None, description="Whether every model met its objective in simulation, on the "
                                                        "search's seeds and on the confirmation's.")
    rounds: Optional[StrictInt] = Field(None, description="Rounds of re-planning simulated.")
    max_rounds: Optional[StrictInt] = Field(None, description="planning.verify.max_rounds.")
    settle_rounds: Optional[StrictInt] = Field(None, description="planning.verify.settle_rounds: rounds that may "
                                                                 "follow max_rounds where no round met (history[] "
                                                                 "marks them settling).")
    simulator: Optional[StrictStr] = Field(None, description="The simulator's version.")
    seed: Optional[StrictInt] = Field(None, description="The base seed (planning.verify.seed).")
    load: Optional[Number] = Field(None, description="Multiple of the declared demand simulated.")
    load_basis: Optional[StrictStr] = Field(None, description="Where the load multiple comes from.")
    statistic: Optional[dict[str, StrictStr]] = Field(None, description="Each model's objective percentile.")
    burst_cv: Optional[Number] = Field(None, description="Coefficient of variation of the simulated arrivals.")
    requests: Optional[StrictInt] = Field(None, description="Requests simulated per replication: the longest length "
                                                            "a model of the final plan was confirmed at (no shorter "
                                                            "than its longest class needs); each model's own is "
                                                            "fidelity.confirmation.models[].requests.")
    requests_per: Optional[StrictStr] = Field(None, description="What ``requests`` counts per.")
    margin: Optional[Number] = Field(None, description="planning.verify.margin.")
    confidence: Optional[StrictStr] = Field(None, description="planning.confidence.")
    cost_before_usd_per_hour: Optional[Number] = Field(None, description="$/h of the first round's plan.")
    cost_after_usd_per_hour: Optional[Number] = Field(None, description="$/h of the final plan.")
    over_provisioning: Optional[OverProvisioning] = Field(None, description="Demand the plan sustains beyond "
                                                                            "the declared.")
    trim: Optional[Trim] = Field(None, description="What the trim removed and put back.")
    derate: Optional[dict[str, Number]] = Field(None, description="Per model, its templates' smallest factor.")
    derate_by_template: Optional[dict[str, Number]] = Field(None, description="The derate of each template the "
                                                                              "allocations use.")
    models: Optional[list[FidelityModel]] = Field(None, description="Per model: the statistics and their judgement.")
    history: Optional[list[dict[str, Any]]] = Field(None, description="Each round: its cost, what met, the "
                                                                      "derates it applied.")
    round_by_model: Optional[dict[str, StrictInt]] = Field(None, description="The round each model's plan comes "
                                                                             "from.")
    replications: Optional[Replications] = Field(None, description="How the judgements were made.")
    confirmation: Optional[Confirmation] = Field(None, description="The final plan on fresh seeds.")
    safety_stop: Optional[StrictBool] = Field(None, description="A verification round's solve was cut by the wall "
                                                                "clock (present only then).")
