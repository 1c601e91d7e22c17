"""Pydantic models of the service spec (``service.yaml``). ``hetinfra schema`` prints their JSON Schema.

Every model forbids unknown keys (a typo is an error with a did-you-mean, never silently ignored)
and every field carries a description. Cross-file checks (does the GPU exist in the offers, does
the profile file exist) happen later, in :mod:`hetinfra.plan.inputs`, where the offers are known.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from hetinfra.architecture import HEAD_SPAN, MAX_PARAMS, arch_problem, size_bounds
from hetinfra.spec.adapters import MAX_ADAPTERS, AdapterSpec
from hetinfra.spec.base import ClassName, FilePath, ResourceWord, ShellArg, ShellChecked, Strict, dns_name
from hetinfra.spec.deploy import DEFAULT_VLLM_VERSION, DeploySpec
from hetinfra.spec.origins import OriginSpec, origin_shares
from hetinfra.spec.size import MAX_PLANNED_CLASSES, check_model_size, check_plan_size
from hetinfra.spec.infrastructure import AvailabilityCap, CustomGpuSpec, InfrastructureSpec, PurchaseTerm  # noqa: F401
from hetinfra.spec.planning import PlanningSpec, VerifySpec  # noqa: F401 (spec.models names every section)
from hetinfra.spec.units import MAX_SCALE, count, milliseconds

SPEC_VERSION = 1
#: longest demand.profile: hourly over a week
MAX_PROFILE_PERIODS = 168
#: most bucket edges of a histogram or dataset axis (64 buckets: a 100 x 100 histogram is refused)
MAX_EDGES = 65
#: largest token count a bucket edge, class or architecture may state
MAX_TOKENS = 10_000_000
#: most layers an architecture may have, and its longest context (input + output tokens): the
#: architecture rules' bounds (hetinfra.architecture.size_bounds), named here for the spec's other
#: fields and plan.json's (hetinfra.document.base); MAX_PARAMS is the architecture's too
MAX_LAYERS = size_bounds("layers")["le"]
MAX_CONTEXT = size_bounds("max_context")["le"]
#: largest latency objectives (an hour to the first token, 10 minutes between tokens)
MAX_TTFT_MS, MAX_TPOT_MS = 3_600_000, 600_000
#: the tightest latency objective (a microsecond; no engine steps faster by orders of magnitude): a
#: TTFT objective of 5e-324 ms made every ratio over it infinite, and plan.json NaN (exit 1)
MIN_SLO_MS = 1e-3
#: the statistics a latency objective may hold at (hetinfra.sim.stats.PERCENTILES computes them)
Percentile = Literal["mean", "p50", "p90", "p95", "p99"]
#: most a request rate may be (req/s per model) and least (below it the solver rounds the load to 0 GPUs)
MAX_RATE_RPS = 1e6
MIN_RATE_RPS = 1e-3
#: a variant's name: it ends template ids and deployment-unit names, so short and DNS-safe
_VARIANT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,22}[a-z0-9])?\Z")
Precision = Literal["bf16", "fp16", "fp8", "int8", "int4"]


#: what a served model name may not contain: whitespace and the characters that would need escaping in
#: the shell scripts and env files the artifacts write (vLLM itself accepts any string)
_SERVED_BAD = re.compile(r"[\s'\"`$\\]")
MAX_SERVED_NAME = 128


def _served_name(value: str) -> str:
    if not value or len(value) > MAX_SERVED_NAME:
        raise ValueError(f"model name {value!r} must be 1-{MAX_SERVED_NAME} characters")
    if _SERVED_BAD.search(value) or not value.isprintable():
        raise ValueError(f"model name {value!r} may not contain whitespace, quotes, '`', '$' or '\\' "
                         "(it is vLLM's --served-model-name in generated shell scripts)")
    if not re.search(r"[A-Za-z0-9]", value):
        raise ValueError(f"model name {value!r} needs at least one letter or digit (its cloud resources are named "
                         "after it)")
    return value


def _check_edges(input_edges: list[int], output_edges: list[int]) -> None:
    for label, edges in (("input_edges", input_edges), ("output_edges", output_edges)):
        if edges[0] < 0 or edges[-1] > MAX_TOKENS or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"{label} must start at >= 0, strictly increase and end at <= {MAX_TOKENS}, got "
                             f"{str(edges)[:80]}")


class ArchitectureSpec(Strict):
    """A model's architecture, for models outside the built-in catalog (HF config.json values). Its
    fields obey hetinfra.architecture's rules, as a config.json's do."""

    layers: int = Field(**size_bounds("layers"), description="num_hidden_layers.")
    hidden_size: int = Field(**size_bounds("hidden_size"), description="hidden_size.")
    heads: int = Field(**size_bounds("heads"), description="num_attention_heads (query heads).")
    kv_heads: int = Field(**size_bounds("kv_heads"),
                          description="num_key_value_heads (GQA): divides heads; equal to heads for MHA.")
    head_dim: int = Field(**size_bounds("head_dim"),
                          description=f"Dimension of one attention head (hidden_size / heads unless set); heads x "
                                      f"head_dim within {HEAD_SPAN}x of hidden_size.")
    params: count(gt=0, le=MAX_PARAMS) = Field(description="Total parameter count: 7000000000, 7e9 or '7B'; at least "
                                                          "layers x hidden_size^2.")
    active_params: count(gt=0, le=MAX_PARAMS) | None = Field(None, description="MoE only: parameters active per token "
                                                                               "(at most params).")
    vocab_size: int = Field(32000, **size_bounds("vocab_size"), description="Vocabulary size.")
    max_context: int = Field(4096, **size_bounds("max_context"),
                             description="max_position_embeddings: longest input+output the model accepts.")

    @model_validator(mode="after")
    def _consistent(self) -> "ArchitectureSpec":
        problem = arch_problem(self.model_dump())
        if problem:
            raise ValueError(problem)
        return self


def implied_percentile(attainment: float) -> str:
    """An attainment's percentile: the highest of p99, p95, p90 at or below it (which it implies), else p50."""
    return next((p for p, q in (("p99", 0.99), ("p95", 0.95), ("p90", 0.9)) if attainment >= q), "p50")


class SloSpec(Strict):
    """Latency objectives of the model's requests, as a percentile (and optionally an attainment
    fraction, Mélange's definition), checked by simulating the plan."""

    ttft_ms: milliseconds(ge=MIN_SLO_MS, le=MAX_TTFT_MS) = Field(description="Time to first token, milliseconds (or '2s').")
    tpot_ms: milliseconds(ge=MIN_SLO_MS, le=MAX_TPOT_MS) = Field(description="Time per output token after the first, milliseconds: a request's "
                                                    "mean time between output tokens, as vLLM's benchmark reports it.")
    percentile: Percentile = Field(
        "p99", description="Which statistic of TTFT and of TPOT the bounds hold at: p99 (default) means 99% of requests "
                           "have TTFT <= ttft_ms and 99% have TPOT <= tpot_ms; mean is the behaviour before v0.2. "
                           "Not given beside an attainment: the highest of p50, p90, p95, p99 at or below it (which "
                           "the attainment implies: the objective is the attainment), p50 below 0.5.")
    attainment: float | None = Field(None, gt=0, le=1, description="Also require this fraction of requests to meet "
                                                                    "BOTH bounds (Mélange's SLO attainment), e.g. 0.99.")
    min_accuracy: float | None = Field(
        None, ge=-MAX_SCALE, le=MAX_SCALE,
        description="Accuracy floor, on the scale of the model's variants' `accuracy` scores (needs `variants`): "
                    "every request is served by a variant scoring at least this; variants below it are never "
                    "planned. No floor: the cheapest variants serve.")

    @field_validator("attainment")
    @classmethod
    def _attainment(cls, v: float | None) -> float | None:
        """An attainment of 1 asks every request to meet: no finite simulation shows that (its bound stays
        below 1), so the plan shipped "undecided" after every round; refused at its line (exit 2)."""
        if v is not None and v >= 1:
            raise ValueError(f"attainment {v:g} asks every request to meet both bounds, which no simulation can "
                             "show (its bound stays below 1): write 0.999 or less")
        return v

    @model_validator(mode="after")
    def _percentile_of_attainment(self) -> "SloSpec":
        """An attainment without a percentile is the objective (Mélange's SLO; p99 on top made it moot):
        its bounds hold at :func:`implied_percentile`, set once here and counted as given (a dump carries it)."""
        if self.attainment is not None and "percentile" not in self.model_fields_set:
            object.__setattr__(self, "percentile", implied_percentile(self.attainment))
            self.model_fields_set.add("percentile")
        return self


class HistogramSizes(Strict):
    """Joint histogram of request sizes. Bucket k holds sizes in (edge[k], edge[k+1]]; rows = input buckets."""

    input_edges: list[int] = Field(min_length=2, max_length=MAX_EDGES, description="Increasing input-token bucket "
                                                                                   "edges, from 0 (at most 65).")
    output_edges: list[int] = Field(min_length=2, max_length=MAX_EDGES, description="Increasing output-token bucket "
                                                                                    "edges, from 0 (at most 65).")
    weights: list[list[Annotated[float, Field(ge=0, le=MAX_SCALE)]]] = Field(
        max_length=MAX_EDGES - 1,description="Relative frequency per (input bucket, output bucket); "
                                                   "rows = input buckets, columns = output buckets. Need not sum to 1.")

    @model_validator(mode="after")
    def _shape(self) -> "HistogramSizes":
        _check_edges(self.input_edges, self.output_edges)
        rows, cols = len(self.input_edges) - 1, len(self.output_edges) - 1
        if len(self.weights) != rows or any(len(r) != cols for r in self.weights):
            got = f"{len(self.weights)}x{','.join(str(len(r)) for r in self.weights)}"
            raise ValueError(f"weights must be {rows} rows (input buckets) x {cols} columns (output buckets), got {got}")
        if any(w < 0 for r in self.weights for w in r) or sum(map(sum, self.weights)) <= 0:
            raise ValueError("weights must be >= 0 and sum to a positive number")
        return self


class DatasetSizes(Strict):
    """Request sizes from a CSV of ``input_tokens,output_tokens`` rows, bucketed like a histogram."""

    path: FilePath = Field(description="CSV file (relative to the spec file); header optional.")
    input_edges: list[int] = Field(min_length=2, max_length=MAX_EDGES, description="Input-token bucket edges (at most 65).")
    output_edges: list[int] = Field(min_length=2, max_length=MAX_EDGES, description="Output-token bucket edges (at most 65).")
    outside: Literal["drop", "clip"] = Field("drop", description="Rows outside the edges (below the first, beyond the last): drop them, or clip to the nearer edge.")

    @model_validator(mode="after")
    def _edges(self) -> "DatasetSizes":
        _check_edges(self.input_edges, self.output_edges)
        return self


class ClassSpec(Strict):
    """One explicit request class."""

    name: ClassName = Field(description="Class name, shown in the plan (1-128 printable characters; no quotes, ';', "
                                        "'&', '$', '`', '\\', and no '~' or '@', which join flow keys).")
    input_tokens: int = Field(gt=0, le=MAX_TOKENS, description="Prompt tokens (planned at this size).")
    output_tokens: int = Field(gt=0, le=MAX_TOKENS, description="Generated tokens (planned at this size).")
    share: float = Field(gt=0, le=MAX_SCALE, description="Relative share of the model's requests (normalized over classes).")


class SizesSpec(Strict):
    """Request-size distribution: exactly one of histogram, dataset, classes."""

    histogram: HistogramSizes | None = Field(None, description="Joint input x output histogram.")
    dataset: DatasetSizes | None = Field(None, description="CSV of observed request sizes.")
    classes: list[ClassSpec] | None = Field(None, min_length=1, json_schema_extra={"maxItems": MAX_PLANNED_CLASSES},
                                            description=(
        f"Explicit classes with shares (at most {MAX_PLANNED_CLASSES} classes, over all models and variants, "
        "per spec)."))

    @model_validator(mode="after")
    def _exactly_one(self) -> "SizesSpec":
        given = [k for k in ("histogram", "dataset", "classes") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of histogram, dataset, classes (got {', '.join(given) or 'none'})")
        if self.classes and len({c.name for c in self.classes}) != len(self.classes):
            raise ValueError("class names must be unique")
        return self


class DemandSpec(Strict):
    """How much traffic the model gets."""

    rate_rps: float = Field(ge=MIN_RATE_RPS, le=MAX_RATE_RPS, description="Mean request arrival rate to plan for, "
                            "requests per second (0.001 to 1000000).")
    sizes: SizesSpec = Field(description="Distribution of request sizes.")
    origins: dict[ResourceWord, Annotated[float, Field(ge=0, le=MAX_SCALE)] | OriginSpec] | None = Field(
        None, max_length=1000, description="Where requests come from: region -> relative share (normalized), or region -> {share, "
                          "residency: region | continent | none} (docs/regions.md). Requests are routed per origin and "
                          "pay the round trip to the serving region inside the TTFT objective. With "
                          "planning.locality > 0, capacity in each region serves at least that fraction of its local demand.")
    profile: list[Annotated[float, Field(ge=0, le=1e6)]] | None = Field(
        None, min_length=1, max_length=MAX_PROFILE_PERIODS,
        description="Demand over time: multipliers of rate_rps for equal periods that repeat over the planning "
                    "horizon (e.g. 24 hourly values of a day, 168 of a week). Period t's demand is rate_rps x "
                    "profile[t]; the plan's fleet serves the peak period, a committed base (with committed "
                    "purchase_terms) the hours it pays for, and on-demand/spot top-ups follow the periods. "
                    "Unset: a flat load (every period rate_rps). All models' profiles have the same length.")

    @property
    def peak(self) -> float:
        """The profile's largest multiplier (1.0 without a profile): the plan's fleet, routing and rate are
        the peak period's."""
        return max(self.profile) if self.profile is not None else 1.0

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (any(x < 0 for x in v) or max(v) <= 0):
            raise ValueError("profile multipliers must be >= 0 with at least one > 0")
        return v

    @field_validator("origins")
    @classmethod
    def _origins(cls, v: dict[str, float | OriginSpec] | None) -> dict[str, float | OriginSpec] | None:
        shares = origin_shares(v)
        if v is not None and (not v or any(x < 0 for x in shares.values()) or sum(shares.values()) <= 0):
            raise ValueError("origins must map regions to shares >= 0 that sum to a positive number")
        return v


class VariantSpec(ShellChecked):
    """One way to serve the model: another precision and/or another checkpoint of the same family,
    with its accuracy score. Fields left out are the model's own."""

    shell_unchecked = frozenset({"architecture"})  # a file read at plan time; plan.json lacks it

    name: str = Field(description="Variant name (lowercase letters, digits, '-', at most 24 characters), e.g. fp8: "
                                  "it names the variant in the plan and ends its deployment units' names.")
    source: ShellArg | None = Field(None, description="What vLLM loads for this variant (a Hugging Face id "
                                                               "or a path); default: the model's source.")
    precision: Precision | None = Field(None, description="Weight precision of this variant (bf16 | fp16 | fp8 | "
                                                          "int8 | int4); default: the model's precision.")
    model: ShellArg | None = Field(None, description="Another checkpoint's architecture: a built-in catalog name or a "
                                                "Hugging Face repo id; default: the model's.")
    architecture: ArchitectureSpec | FilePath | None = Field(
        None, description="Another checkpoint's architecture: its fields or an HF config.json path (relative to the "
                          "spec file); default: the model's.")
    accuracy: float | None = Field(
        None, ge=-MAX_SCALE, le=MAX_SCALE,
        description="Accuracy score of this variant, higher is better, on a scale of your choice shared by the "
                    "model's variants and slo.min_accuracy (e.g. an eval's average). Unset: the built-in table's "
                    "score for the variant's source (percent of the 16-bit checkpoint's OpenLLM v1 score; "
                    "docs/concepts/variants.md).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _VARIANT_NAME.match(v):
            raise ValueError(f"variant name {v!r} must be lowercase letters, digits and '-', 1-24 characters "
                             "(it ends deployment-unit names)")
        return v

    @model_validator(mode="after")
    def _one_arch(self) -> "VariantSpec":
        if self.model is not None and self.architecture is not None:
            raise ValueError("give at most one of `model` and `architecture`")
        return self


class ModelSpec(ShellChecked):
    """One model the service serves."""

    shell_unchecked = frozenset({"architecture"})  # a file read at plan time; plan.json lacks it

    name: str = Field(description="The name clients ask for (vLLM --served-model-name): free-form as vLLM allows, "
                                  "e.g. llama-3.1-8b or Qwen/Qwen2.5-72B-Instruct (no whitespace or shell metacharacter "
                                  ";&|$`\\\"'<>(){}[]*?!#~; no '-' first: vLLM would read an option). Cloud "
                                  "resources use a DNS-safe slug of it (plan.json models[].slug).")
    model: ShellArg | None = Field(None, description="Built-in catalog name (lowercase), e.g. llama-3.1-8b, or a Hugging "
                                                "Face repo id (org/name) whose config.json (and safetensors index) is "
                                                "read from the Hugging Face cache, downloaded with huggingface_hub "
                                                "when missing (never with HF_HUB_OFFLINE=1).")
    architecture: ArchitectureSpec | FilePath | None = Field(
        None, description="Architecture, for models not in the catalog: its fields, or the path of an HF config.json "
                          "(relative to the spec file; a model.safetensors.index.json beside it gives the weight size).")
    source: ShellArg = Field(description="What vLLM loads: a Hugging Face id or a path (no whitespace, quotes, "
                                         "'`', '$', '\\', ';', '|', '&', '<', '>'; not starting with '-').")
    precision: Precision = Field(
        "bf16", description="Weight precision. fp8 uses FP8 tensor cores where the GPU has them (weight-only FP8 elsewhere); int8/int4 expect a pre-quantized checkpoint.")
    slo: SloSpec = Field(description="Latency objectives.")
    demand: DemandSpec = Field(description="Traffic to plan for.")
    max_spot_fraction: float = Field(1.0, ge=0, le=1, description="Most of this model's GPUs that may be spot "
                                                                  "(with infrastructure.spot: true).")
    variants: list[VariantSpec] | None = Field(
        None, min_length=1, max_length=32, description="Ways to serve the model, all under its one served name: precisions or "
                                        "checkpoints of the same family, each with an accuracy score. The plan "
                                        "picks among those meeting slo.min_accuracy per deployment unit, cheapest "
                                        "first; the model's own source/precision/model only fill what a variant "
                                        "leaves out. Unset: the model's one checkpoint.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _served_name(v)

    @model_validator(mode="after")
    def _model_or_arch(self) -> "ModelSpec":
        if (self.model is None) == (self.architecture is None):
            raise ValueError("give exactly one of `model` (a built-in catalog name or a Hugging Face repo id) or "
                             "`architecture`")
        if self.slo.min_accuracy is not None and not self.variants:
            raise ValueError("slo.min_accuracy needs `variants` with accuracy scores (the floor picks among them)")
        names = [v.name for v in self.variants or ()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"variant names must be unique; repeated: {', '.join(dup)}")
        seen: dict[tuple, str] = {}
        for v in self.variants or ():
            key = self._checkpoint_key(self.variant_spec(v.name))
            if key in seen:
                raise ValueError(f"variants {seen[key]} and {v.name} serve the same checkpoint at the same precision")
            seen[key] = v.name
        check_model_size(self)
        return self

    @staticmethod
    def _checkpoint_key(m: "ModelSpec") -> tuple:
        arch = m.architecture.model_dump() if isinstance(m.architecture, ArchitectureSpec) else m.architecture
        return (m.source, m.precision, m.model, repr(arch))

    def variant_spec(self, name: str) -> "ModelSpec":
        """This model as variant ``name`` serves it: the variant's source, precision and architecture
        over the model's own, no variants (for the performance model, the artifacts and the simulator)."""
        v = next(x for x in self.variants or () if x.name == name)
        update: dict = {"variants": None}
        if v.source is not None:
            update["source"] = v.source
        if v.precision is not None:
            update["precision"] = v.precision
        if v.model is not None or v.architecture is not None:
            update.update(model=v.model, architecture=v.architecture)
        slo = self.slo.model_copy(update={"min_accuracy": None})
        return self.model_copy(update={**update, "slo": slo})


class ServiceSpec(Strict):
    """A service to plan: its models, SLOs, demand and where it may run."""

    name: str = Field(description="Service name (lowercase letters, digits, '-'; a letter first); names generated resources.")
    models: list[ModelSpec] = Field(min_length=1, max_length=64, description="Models served.")
    infrastructure: InfrastructureSpec = Field(default_factory=InfrastructureSpec, description="Allowed clouds, regions, GPUs.")
    budget_usd_per_hour: float | None = Field(None, gt=0, le=1e7, description="Most the plan may cost, USD per hour.")
    planning: PlanningSpec = Field(default_factory=PlanningSpec, description="Objective, routing and solver settings.")
    profiles: list[FilePath] = Field([], max_length=256, description="Measured profile CSVs (relative to the spec file).")
    offers: list[FilePath] = Field([], max_length=256, description="Extra offers CSVs (relative to the spec file).")
    deploy: DeploySpec = Field(default_factory=DeploySpec, description="Deployment: runtime, ports, ingress, Pulumi stack.")
    adapters: list[AdapterSpec] = Field(
        [], max_length=MAX_ADAPTERS, description="LoRA adapters served beside their base models: name, base, source, "
                                                 "rank, demand, optional residency regions (docs/concepts/adapters.md).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return dns_name(v, "service name", letter_first=True)

    @model_validator(mode="after")
    def _unique_models(self) -> "ServiceSpec":
        names = [m.name for m in self.models]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dup)}")
        if self.planning.objective == "max_throughput" and self.budget_usd_per_hour is None:
            raise ValueError("objective max_throughput needs budget_usd_per_hour (otherwise throughput is unbounded)")
        if self.planning.objective == "max_throughput" and self.planning.routing == "sliced":
            raise ValueError("routing: sliced is a min_cost formulation; use routing: fractional with max_throughput")
        check_plan_size(self.models)
        lengths = {len(m.demand.profile) for m in self.models if m.demand.profile is not None}
        if len(lengths) > 1:
            raise ValueError(f"models' demand.profile lengths differ ({', '.join(map(str, sorted(lengths)))}); give "
                             "every profile the same periods")
        if lengths and self.planning.allow_unmet:
            raise ValueError("planning.allow_unmet is not supported with a demand.profile; drop one of them")
        return self
