"""plan.json's sections other than allocations and routing: models, templates, baselines, solver,
inputs, purchase, fidelity, breakdown, churn and deploy."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from hetinfra.document.base import (IDENT, Doc, Fraction, ModelLen, NodeGpus, NonNegative, Number, Stages,
                                    Tokens, bounded, int_in)
from hetinfra.document.fidelity import Fidelity  # noqa: F401  (plan.json sections, one import place)
from hetinfra.spec.deploy import DeploySpec
from hetinfra.spec.models import MAX_PARAMS, MAX_TPOT_MS, MAX_TTFT_MS, MIN_SLO_MS, Percentile, Precision

SSH_KEY = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com)"
                     r" [A-Za-z0-9+/=]+( [A-Za-z0-9._@+=:-]+)?$")


#: the least positive rate a plan's model may state (and a period's fleet view, hetinfra.sim.period): no
#: planned demand comes near it (a spec's rate is at least 1e-3 req/s, and a demand profile may scale it
#: down by any multiplier, so no tighter floor holds for every spec), while arrival gaps of 1 / rate stay
#: finite: a hand-edited 5e-324 gave gaps of inf, and plan.json NaN (exit 1)
MIN_PLANNED_RPS = 1e-100


def _planned_rate(v: float) -> float:
    if 0 < v < MIN_PLANNED_RPS:
        raise ValueError(f"must be 0 or at least {MIN_PLANNED_RPS:g} req/s (got {v:g})")
    return v


#: models[].rate_rps: 0 (no demand) or a rate the simulator can draw arrivals at
PlannedRate = Annotated[NonNegative, AfterValidator(_planned_rate)]


#: a model's parameter count: > 0, at most the spec's bound (hetinfra.spec.models.MAX_PARAMS)
Params = bounded(gt=0, le=MAX_PARAMS)


class Slo(Doc):
    """The model's latency objective, as the spec declared it."""

    # the spec's bounds (hetinfra.spec.models.SloSpec): a plan never refuses what its spec accepted
    ttft_ms: bounded(ge=MIN_SLO_MS, le=MAX_TTFT_MS) = Field(description="Time-to-first-token objective, ms.")
    tpot_ms: bounded(ge=MIN_SLO_MS, le=MAX_TPOT_MS) = Field(description="Time-per-output-token objective, ms.")
    percentile: Percentile = Field(description="The statistic the objectives hold at (mean, p50, p90, p95, p99).")
    attainment: Optional[bounded(gt=0, le=1)] = Field(description="Fraction of requests that must meet both "
                                                                   "objectives (Melange); null: the percentile alone.")


class RequestClass(Doc):
    """A request class (size bucket) of a model, at the planned (peak) demand."""

    name: StrictStr = Field(description="Class name (e.g. 'in<=500,out<=200').")
    input_tokens: Tokens = Field(description="Input tokens a request of the class is planned for.")
    output_tokens: Tokens = Field(description="Output tokens a request of the class is planned for.")
    share: Fraction = Field(description="The class's share of the model's requests.")
    rate_rps: NonNegative = Field(description="Requests/s of the class at the planned demand.")


class Variant(Doc):
    """A variant of a model (another checkpoint or precision) the plan may serve it with."""

    name: StrictStr = Field(description="Variant name (allocations[].variant).")
    model: Optional[StrictStr] = Field(description="Architecture of the variant's checkpoint; null: the model's.")
    source: StrictStr = Field(description="Where the checkpoint is loaded from (a Hugging Face id or a path).")
    precision: Precision = Field(description="Weight precision of the variant.")
    params: Optional[Params] = Field(description="Parameter count (disk and memory sizing).")
    accuracy: Number = Field(description="The variant's accuracy score.")
    accuracy_from: StrictStr = Field(description="Where the accuracy score comes from.")
    meets_floor: StrictBool = Field(description="Whether the score meets the model's slo.min_accuracy.")


class VariantRate(Doc):
    rps: NonNegative = Field(description="Requests/s routed to the variant.")
    share: Fraction = Field(description="The variant's share of the model's routed requests.")


class Accuracy(Doc):
    """The accuracy a model with variants is served at, and what the plan gives up for its price."""

    min_accuracy: Optional[Number] = Field(description="The spec's accuracy floor.")
    served: Optional[Number] = Field(description="Mean score over the routed requests/s.")
    best: Number = Field(description="The best variant's score.")
    best_variant: StrictStr = Field(description="The best variant.")
    given_up: Optional[Number] = Field(description="best - served.")
    by_variant: dict[str, VariantRate] = Field(description="Routed rate per variant.")


class DemandProfile(Doc):
    rate_rps: NonNegative = Field(description="The declared (base) request rate.")
    multipliers: list[NonNegative] = Field(min_length=1, description="The demand multiplier of each period.")
    peak_period: int_in(0) = Field(description="Index of the peak period (the planned demand).")


class SplitDecision(Doc):
    """Whether a model's engines split prefill and decode, and why (issue 37)."""

    split: StrictBool = Field(description="Whether any allocation of the model is a prefill/decode bundle.")
    reason: StrictStr = Field(description="The comparison behind it: the best bundle's and the best colocated unit's "
                                       "$/h per req/s of the model's largest class, and the margin a bundle must beat.")


class ModelEntry(Doc):
    """A model the service serves."""

    name: StrictStr = Field(description="The service model's name (allocations[].model, routing's key).")
    slug: StrictStr = Field(description="DNS-safe short name that starts its deployment units' names.")
    model: Optional[StrictStr] = Field(description="Built-in catalog name or Hugging Face id of the architecture; "
                                                   "null: read from source.")
    source: StrictStr = Field(description="Where the weights are loaded from (Hugging Face id or a path).")
    precision: Precision = Field(description="Weight precision served (a GPU without BF16 runs fp16).")
    params: Optional[Params] = Field(description="Parameter count: apply sizes disks for the weights.")
    slo: Slo = Field(description="The latency objective.")
    rate_rps: PlannedRate = Field(description="Requests/s planned for (with a demand profile: the peak period's): "
                                              f"0, or at least {MIN_PLANNED_RPS:g}.")
    max_model_len: ModelLen = Field(description="vLLM --max-model-len of every engine of the model.")
    max_model_len_basis: StrictStr = Field(description="Why max_model_len has its value (prose).")
    classes: list[RequestClass] = Field(min_length=1, description="The model's request classes.")
    cost_usd_per_hour: Number = Field(description="$/h of the model's allocations.")
    variants: Optional[list[Variant]] = Field(min_length=1, description="The model's variants; null: none declared.")
    accuracy: Optional[Accuracy] = Field(description="Accuracy served; null without variants.")
    demand_profile: Optional[DemandProfile] = Field(None, description="The demand profile; absent without one.")
    disaggregation: Optional[SplitDecision] = Field(None, description="With planning.disaggregation: auto, whether "
                                                                      "the model is split and why; absent otherwise.")

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if not IDENT.match(v):
            raise ValueError(f"{v!r} is not a model id or path")
        return v


class StageNode(Doc):
    instance_type: StrictStr = Field(description="Instance type of the stage's node.")
    gpu: StrictStr = Field(description="GPU of the stage's node.")


class Placement(Doc):
    """How a template places the model on its nodes."""

    stages: Stages = Field(description="Pipeline stages (pp).")
    nodes_per_stage: Stages = Field(description="Nodes per stage.")
    nodes: Stages = Field(description="Nodes of one replica.")
    stages_per_node: Stages = Field(description="Pipeline stages on one node.")
    layers_per_stage: Optional[list[Stages]] = Field(min_length=1, description="Layers per stage; null: even split.")
    tp: NodeGpus = Field(description="Tensor-parallel size inside a node.")
    experimental: StrictBool = Field(description="An EXPERIMENTAL mixed-GPU pipeline.")
    stage_nodes: list[StageNode] = Field(min_length=1, description="Instance type and GPU of each stage (a heterogeneous "
                                                      "prefill/decode bundle: its prefill, then its decode node "
                                                      "type).")


class Confidence(Doc):
    level: StrictStr = Field(description="How far the template's rates can be trusted (measured, estimated, ...).")
    reason: StrictStr = Field(description="Why (prose).")
    interval: Optional[list[Number]] = Field(None, min_length=3, max_length=3, description="[low, middle, high] factors of the rates: the true "
                                             "rate lies in rate x [low, high] (hetinfra.perf.confidence).")
    interval_basis: Optional[StrictStr] = Field(None, description="Where the interval comes from: the regime's "
                                                "calibration residuals, or the trust level's where it has too few (prose).")
    widened_by: Optional[StrictStr] = Field(None, description="The second source (aiconfigurator's kernels, the "
                                            "built-in estimator, published vLLM runs of the layout) whose figure lay "
                                            "outside the interval, which was widened to cover it; null: no disagreement.")
    other_rate_factor: Optional[Number] = Field(None, description="That source's rate as a factor of capacity_rps; "
                                                "under planning.confidence safe the smaller of it and 1 applies.")


class Template(Doc):
    """A serving template the plan uses: a layout of one model on one cloud's instance type (region-agnostic)."""

    id: StrictStr = Field(description="Template id (allocations[].template).")
    model: StrictStr = Field(description="The service model.")
    cloud: StrictStr = Field(description="Cloud of the instance type.")
    instance_type: StrictStr = Field(description="Instance type.")
    gpu: StrictStr = Field(description="GPU type.")
    gpus_per_instance: NodeGpus = Field(description="GPUs per instance.")
    tp: NodeGpus = Field(description="Tensor-parallel size.")
    pp: Stages = Field(description="Pipeline-parallel size.")
    engines_per_instance: NodeGpus = Field(description="Engines per instance.")
    placement: Placement = Field(description="The placement.")
    capacity_rps: dict[str, NonNegative] = Field(min_length=1, description="Requests/s one replica sustains per class under the SLO "
                                                        "(estimate or profile x derate).")
    sources: dict[str, str] = Field(description="Where each class's rate comes from (estimate, profile file).")
    derate: Number = Field(description="Factor simulation applied to the rates (< 1: slower than estimated).")
    confidence: Optional[Confidence] = Field(description="Confidence in the rates; null when not graded.")
    variant: Optional[StrictStr] = Field(description="The model variant the template serves.")


class BaselineUnit(Doc):
    unit: StrictStr = Field(description="Solver unit of the baseline plan.")
    count: int_in(0) = Field(description="Its replicas.")


class Baseline(Doc):
    """The cheapest plan with one GPU type (Melange's single-GPU baselines): solved over the same offers
    at the rates and load of the plan's last solve, never simulated; or, where the plan itself uses that
    GPU type only (``plan_itself``), the plan's own figures."""

    gpu: StrictStr = Field(description="The one GPU type.")
    feasible: StrictBool = Field(description="Whether a plan with that GPU alone serves the demand.")
    cost_usd_per_hour: Optional[Number] = Field(None, description="Its $/h (feasible only).")
    instances: Optional[int_in(0, None)] = Field(None, description="Its instances: each unit's replicas (allocation[].count) "
                                                                   "x its nodes per replica, as allocations[].instances "
                                                                   "counts them (feasible only).")
    savings_usd_per_hour: Optional[Number] = Field(None, description="Its $/h minus the plan's (feasible only; null "
                                                                 "where the plan leaves demand unserved, unmet_rps: "
                                                                 "the baseline serves all of it).")
    savings_pct: Optional[Number] = Field(None, description="Savings in percent of its cost (feasible only; null where "
                                                        "the plan leaves demand unserved, as savings_usd_per_hour).")
    allocation: Optional[list[BaselineUnit]] = Field(None, description="Its units (feasible only).")
    reason: Optional[StrictStr] = Field(None, description="Why it is infeasible (infeasible only), or why a verified "
                                                          "row's plan was not simulated (no met).")
    safety_stop: Optional[StrictBool] = Field(None, description="Present (true) when the wall-clock stop cut its solve.")
    plan_itself: Optional[StrictBool] = Field(None, description="Present (true) where the plan uses this GPU type only "
                                                                "and serves all its demand: the row is the plan's own "
                                                                "cost, instances and units (verified as the plan is; "
                                                                "savings 0), not a separate solve, which would carry "
                                                                "neither the trim nor the replicas verification added.")
    verified: Optional[StrictBool] = Field(None, description="Present (true) under plan --verify-baselines: the row is "
                                                             "the spec planned on this GPU type alone and verified "
                                                             "(its own rounds, confirmation and trim), not a solve at "
                                                             "the plan's rates.")
    met: Optional[StrictBool] = Field(None, description="Verified rows only: whether that plan met its objectives in "
                                                        "its verification (absent where it was too large to "
                                                        "simulate: reason says so).")


class WarmStart(Doc):
    from_: StrictStr = Field(alias="from", description="Where the warm start came from.")
    objective: Optional[Number] = Field(description="Its objective.")


class SolveBlock(Doc):
    """One block of linked models, solved on its own."""

    models: list[str] = Field(min_length=1, description="Models of the block.")
    method: StrictStr = Field(description="How it was solved (direct MILP, lagrangian, ...).")
    status: StrictStr = Field(description="Solver status.")
    objective: Optional[Number] = Field(description="Objective.")
    bound: Optional[Number] = Field(description="Best bound.")
    gap: Optional[Number] = Field(description="Relative gap.")
    nodes: StrictInt = Field(description="Branch-and-bound nodes.")
    warm_start: Optional[StrictStr] = Field(description="Warm start used.")
    iterations: StrictInt = Field(description="Lagrangian iterations.")


class Solver(Doc):
    """How the solve went."""

    name: StrictStr = Field(description="The MIP solver: planning.solver (highs by default).")
    status: StrictStr = Field(description="Solver status of the final solve.")
    objective: Optional[Number] = Field(description="Objective value: $/h and penalties, and with origins the routing "
                                                    "tie-break (solver.rows.NETWORK_TIE, at most 1e-7 $/h per req/s "
                                                    "and ms of round trip).")
    bound: Optional[Number] = Field(description="Best bound.")
    gap: Optional[Number] = Field(description="Relative MIP gap.")
    lp_bound: Optional[Number] = Field(description="LP relaxation bound.")
    warm_start: Optional[WarmStart] = Field(description="The warm start; null: none.")
    build_s: Optional[Number] = Field(description="Seconds to build the model (run-dependent).")
    solve_s: Optional[Number] = Field(description="Seconds to solve (run-dependent).")
    time_limit_s: Number = Field(description="planning.time_limit_s.")
    mip_gap: Number = Field(description="planning.mip_gap.")
    routing: StrictStr = Field(description="Routing model (fractional or sliced).")
    slice_factor: Optional[StrictInt] = Field(description="Slice factor of sliced routing; null otherwise.")
    headroom: Number = Field(description="Capacity kept free (over-provisioning headroom).")
    units_considered: StrictInt = Field(description="Solver units offered to the ILP.")
    variables: Optional[StrictInt] = Field(None, description="Variables of the model.")
    integer_variables: Optional[StrictInt] = Field(None, description="Integer variables.")
    constraints: Optional[StrictInt] = Field(None, description="Constraints.")
    method: StrictStr = Field(description="Decomposed into blocks, or one joint model.")
    blocks: list[SolveBlock] = Field(description="Each block's method, bound and gap.")
    max_nodes: Optional[StrictInt] = Field(description="The deterministic node limit.")
    safety_stop: StrictBool = Field(description="Whether the wall-clock safety stop cut a solve (the plan may "
                                                "differ on a faster machine).")


class WorkBudget(Doc):
    """The work budget of the ``plan`` command that made the plan (hetinfra.plan.budget), present only
    where its wall-clock safety stop cut some work: then the plan may differ on a faster machine."""

    time_limit_s: Number = Field(description="planning.time_limit_s: the wall-clock safety stop of the whole "
                                             "command (templates, solves, verification, baselines).")
    stopped: list[StrictStr] = Field(description="What the stop cut, in the order it did.")


class OfferSource(Doc):
    name: StrictStr = Field(description="Feed or file name.")
    as_of: Optional[StrictStr] = Field(description="As-of time of its prices: its oldest row's.")
    newest_as_of: Optional[StrictStr] = Field(None, description="As-of time of its newest row (equal to as_of when "
                                                                 "every row has one date; null in plans made before "
                                                                 "it was recorded).")
    sha256: Optional[StrictStr] = Field(description="Hash of its content.")
    rows: Optional[StrictInt] = Field(description="Offers read from it.")


class TemplateCache(Doc):
    dir: StrictStr = Field(description="The cache folder ($HETINFRA_CACHE_DIR).")
    hits: list[str] = Field(description="Models whose template library was read from the cache.")
    misses: list[str] = Field(description="Models whose template library was built (and stored).")


class Inputs(Doc):
    """What the plan was made from: same inputs, same plan."""

    spec_path: StrictStr = Field(min_length=1,  # '' named no file: simulate's search for it was an IndexError
                                 description="The spec file: relative to the OUT folder the plan was made for "
                                             "(absolute without one); read against plan.json's folder or one above "
                                             "it, else the current folder (hetinfra.document.spec_location).")
    spec_sha256: StrictStr = Field(description="Hash of the spec file.")
    offers_as_of: Optional[StrictStr] = Field(description="As-of time of the offers.")
    sources: list[OfferSource] = Field(description="The offer sources.")
    profiles: list[str] = Field(description="Measured profile files used.")
    estimator: StrictStr = Field(description="Performance estimator version.")
    engine: StrictStr = Field(description="The engine the plan is made for ('vllm <version>').")
    template_cache: Optional[TemplateCache] = Field(description="Where the template libraries came from "
                                                                "(run-dependent); null: the cache was off.")


class BreakEven(Doc):
    unit: StrictStr = Field(description="Solver unit.")
    purchase: StrictStr = Field(description="The committed term.")
    chosen: StrictBool = Field(description="Whether the plan bought the commitment.")
    committed_price_usd_per_hour: Optional[Number] = Field(description="$/h committed.")
    on_demand_price_usd_per_hour: Optional[Number] = Field(description="$/h on demand.")
    break_even_utilization: Optional[Number] = Field(description="Utilization above which committing pays.")
    utilization: Optional[Number] = Field(description="The unit's horizon-average utilization.")


class Purchase(Doc):
    """Purchase options: the committed base and its top-ups (only in plans that plan purchases)."""

    terms: list[str] = Field(min_length=1, description="Purchase terms the spec allows.")
    horizon_months: Number = Field(description="planning.horizon_months.")
    periods: StrictInt = Field(description="Demand profile periods.")
    levels: StrictInt = Field(description="Distinct demand levels (the solver's periods).")
    committed_cost_usd_per_hour: Optional[Number] = Field(description="$/h of the committed base.")
    top_up_cost_usd_per_hour: Optional[Number] = Field(description="$/h of the top-ups (horizon average).")
    peak_cost_usd_per_hour: Optional[Number] = Field(description="$/h in the costliest period.")
    without_committed_usd_per_hour: Optional[Number] = Field(description="$/h of the plan with no committed term; "
                                                                          "null under --no-verify or none.")
    cost_by_period: list[Optional[Number]] = Field(min_length=1, description="$/h in each profile period.")
    break_even: list[BreakEven] = Field(description="Break-even of each (possibly) committed allocation.")


class Totals(Doc):
    cost_usd_per_hour: Number = Field(description="$/h.")
    gpus: int_in(0, None) = Field(description="GPUs.")
    instances: int_in(0, None) = Field(description="Instances.")
    models: Optional[list[str]] = Field(None, min_length=1, description="Models served there (by_region only).")


class Breakdown(Doc):
    by_model: dict[str, Totals] = Field(description="Cost, GPUs and instances per model.")
    by_region: dict[str, Totals] = Field(description="Per 'cloud/region'.")


class Churn(Doc):
    """What re-planning against a running deployment starts and stops."""

    penalty_hours: Number = Field(description="planning.churn_penalty_hours.")
    payback_hours: Optional[Number] = Field(None, description="planning.churn_payback_hours: the solver charges each "
                                                              "new instance penalty_hours / payback_hours of its price "
                                                              "per hour (absent in plans before 0.1.0: 1).")
    running: dict[str, int_in(0)] = Field(description="Replicas running per solver unit.")
    started: dict[str, int_in(0)] = Field(description="Replicas the plan starts per solver unit.")
    stopped: dict[str, int_in(0)] = Field(description="Replicas the plan stops per solver unit.")


def demand_multiple(objective: str | None, demand_scale) -> float:
    """The demand a plan serves, as a multiple of its models' ``rate_rps``: ``demand_scale`` for a
    max_throughput plan (null: 1), else 1. The one rule the simulator, the ceilings and the summary read."""
    return float(demand_scale or 1.0) if objective == "max_throughput" else 1.0


class PlanDeploy(DeploySpec):
    """plan.json ``deploy``: the spec's deploy section as planned (its keys, defaults and checks are the
    spec's, hetinfra.spec.deploy), plus the key format apply needs."""

    model_config = ConfigDict(strict=True)

    @field_validator("ssh_public_key")
    @classmethod
    def _ssh_key(cls, v: str | None) -> str | None:
        if v is not None and not SSH_KEY.match(v.strip()):
            raise ValueError("is not one OpenSSH public key line (e.g. 'ssh-ed25519 AAAA... me@host')")
        return v
