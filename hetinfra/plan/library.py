"""The data of the template stage: templates (region-free ways to serve a model), units (a template
in a region with a purchase option and a price: one ILP variable), a model's template library and
per-class coverage. Shared by the homogeneous and mixed-pipeline generators and the cache."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from hetinfra.perf.lora import LoraCost


@dataclass(frozen=True)
class Bundle:
    """A template's prefill/decode split (hetinfra.plan.templates_pd): x prefill engines of TP a and
    y decode engines of TP b, on one node (``prefill_nodes`` = ``decode_nodes`` = 0) or on kp + kd
    nodes of one placement group; the link the KV moves over and each class's expected transfer."""

    prefill_engines: int
    prefill_tp: int
    decode_engines: int
    decode_tp: int
    prefill_nodes: int
    decode_nodes: int
    link: str  # nvlink | pcie (one node), efa | infiniband | roce (across nodes)
    kv_bytes_per_token: float
    link_bytes_s: float  # bandwidth one transfer gets
    transfer_ms: dict[str, float]  # class name -> expected KV transfer time of one request
    #: heterogeneous P/D (Splitwise, HexGen-2): the decode nodes' instance type, GPU and GPUs per node
    #: where they differ from the template's (whose ``instance_type`` and ``gpu`` are the prefill role's);
    #: None: both roles on the template's instance type
    decode_instance_type: str | None = None
    decode_gpu: str | None = None
    decode_gpus_per_node: int | None = None

    @property
    def ratio(self) -> str:
        return f"{self.prefill_engines}P{self.decode_engines}D"

    @property
    def heterogeneous(self) -> bool:
        return self.decode_instance_type is not None

    @property
    def across_nodes(self) -> bool:
        return self.prefill_nodes > 0


#: a dataclass -> its declared fields' names, in order (with_fields)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def with_fields(obj, **changes):
    """The frozen dataclass ``obj`` with ``changes``: what ``dataclasses.replace`` gives, its declared
    fields copied at once and nothing else of its ``__dict__`` (a value cached there could be stale).
    ``replace`` re-runs the frozen ``__init__`` field by field: a derate copies every template and
    unit of a fleet once per verification round (the 32-model linked fleet's 3,447 templates: 23-25
    ms with ``replace``, 12-15 ms this way). A class with a ``__post_init__`` takes ``replace``."""
    cls = type(obj)
    if hasattr(cls, "__post_init__"):
        return replace(obj, **changes)
    names = _FIELD_NAMES.get(cls)
    if names is None:  # dataclasses.fields filters the class's fields on every call
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    own = obj.__dict__
    state = {name: own[name] for name in names}
    state.update(changes)
    out = object.__new__(cls)
    object.__setattr__(out, "__dict__", state)
    return out


@dataclass(frozen=True)
class Template:
    id: str
    model: str
    cloud: str
    instance_type: str
    gpu: str
    gpus_per_instance: int
    tp: int
    pp: int  # pipeline stages (one node per stage unless ``node_count`` says otherwise)
    engines: int  # engines per instance (data parallel inside the instance); 1 for multi-node replicas
    rates: dict[str, float]  # class name -> req/s per replica (only classes it can serve)
    sources: dict[str, str]  # class name -> where the number came from
    layer_partition: tuple[int, ...] | None = None  # layers per stage when pp > 1
    #: mixed-GPU pipeline (experimental): (instance type, gpu) of each stage in pipeline order;
    #: then ``instance_type`` and ``gpu`` join the stages' names with "+".
    stages: tuple[tuple[str, str], ...] | None = None
    #: how far to trust the rates: (level, reason), the least trusted of its classes
    #: (hetinfra.perf.confidence: measured / calibrated / extrapolated)
    confidence: tuple[str, str] | None = None
    #: nodes of one replica; 0 = one per pipeline stage (pp). 1 with pp > 1: a TP x PP (x DP) layout
    #: inside one node; k > 1 with pp > k: pp / k consecutive stages per node (TP x PP across nodes)
    node_count: int = 0
    #: the model's variant this template serves (its id ends in ``|<variant>``) and the variant's
    #: accuracy score; None for a model with one checkpoint
    variant: str | None = None
    accuracy: float | None = None
    #: (low, middle, high) factors of the rates and what they come from (hetinfra.perf.confidence.
    #: rate_interval: the least trusted class's regime residuals, else its trust level's)
    interval: tuple[float, float, float] | None = None
    interval_basis: str | None = None
    #: (source, factor): another source's rate as a factor of the rates, where it lies outside the
    #: interval (which was widened to cover it; hetinfra.perf.confidence.widen_for_disagreement)
    disagreement: tuple[str, float] | None = None
    #: a prefill/decode bundle (issue 37); None: colocated engines
    bundle: Bundle | None = None
    #: LoRA adapter slots of each engine with their memory and derate (issue 38, hetinfra.plan.adapters);
    #: None: the base engine, no adapters
    lora: LoraCost | None = None

    @property
    def slots(self) -> int:
        """Adapter slots of one engine (vLLM --max-loras); 0 without adapters."""
        return self.lora.slots if self.lora is not None else 0

    @property
    def nodes(self) -> int:
        return self.node_count or self.pp

    @property
    def engines_per_replica(self) -> int:
        """vLLM engines one replica runs, each of which the simulator builds: a bundle's prefill engines
        as well as its decode engines (``engines`` holds only the latter), else ``engines``. The same
        count as plan.json's :attr:`hetinfra.document.allocation.Allocation.engine_count` per replica."""
        return self.engines + (self.bundle.prefill_engines if self.bundle is not None else 0)

    @property
    def stages_per_node(self) -> int:
        """Pipeline stages on one node; a bundle's nodes each hold whole engines (one stage)."""
        return 1 if self.bundle is not None else self.pp // self.nodes

    @property
    def mixed(self) -> bool:
        return self.stages is not None

    @property
    def gpus(self) -> int:
        """GPUs of one replica (all its nodes)."""
        b = self.bundle
        if b is not None and b.heterogeneous:
            return b.prefill_nodes * self.gpus_per_instance + b.decode_nodes * b.decode_gpus_per_node
        return self.gpus_per_instance * self.nodes

    @property
    def per_node_types(self) -> bool:
        """Whether the replica's nodes are of several instance types, priced node by node: a mixed
        pipeline's stages, or a heterogeneous bundle's prefill and decode nodes."""
        return self.stages is not None or (self.bundle is not None and self.bundle.heterogeneous)

    @property
    def node_types(self) -> list[str]:
        """The instance type of each node of one replica (a heterogeneous bundle: prefill nodes first)."""
        if self.stages is not None:
            return [s for s, _ in self.stages]
        b = self.bundle
        if b is not None and b.heterogeneous:
            return [self.instance_type] * b.prefill_nodes + [b.decode_instance_type] * b.decode_nodes
        return [self.instance_type] * self.nodes


@dataclass(frozen=True)
class TemplateUnit:
    """The template unit: a template in a region with a purchase option, what the plan stage prices
    and prunes. It becomes one solver unit (solver.problem.SolverUnit: one ILP integer variable
    n[u]) and, once chosen, one deployed unit (compile.skypilot.DeployedUnit)."""

    id: str
    template: Template
    region: str
    spot: bool
    cost: float  # $/h per replica (all its nodes)
    gpu_memory_gb: float
    vcpus: float
    memory_gb: float
    custom_cloud: bool
    #: $/h of each node's instance where they differ (``Template.per_node_types``: a mixed pipeline's
    #: stages, a heterogeneous bundle's prefill then decode nodes); None: every node at ``cost / nodes``
    stage_prices: tuple[float, ...] | None = None
    #: how it is bought (price_feeds.offers.PURCHASE_OPTIONS); None: "spot" or "on_demand" by ``spot``
    purchase: str | None = None
    #: committed units: $/h of the same replica on demand (the break-even's denominator)
    on_demand_cost: float | None = None

    def with_template(self, template: Template) -> "TemplateUnit":
        """This unit with ``template`` (the same template with other rates: hetinfra.plan.planner.derated),
        copied by :func:`with_fields`."""
        return with_fields(self, template=template)

    @property
    def purchase_option(self) -> str:
        return self.purchase or ("spot" if self.spot else "on_demand")

    @property
    def committed(self) -> bool:
        return self.purchase_option.startswith("committed")

    @property
    def model(self) -> str:
        return self.template.model

    @property
    def gpus(self) -> int:
        return self.template.gpus

    @property
    def gpu_use(self) -> dict[tuple[str, str, str], int]:
        """GPUs one instance takes from each availability group (cloud, region, gpu)."""
        t = self.template
        b = t.bundle
        if b is not None and b.heterogeneous:  # both roles' GPUs count against their own caps
            nodes = [(t.gpu, t.gpus_per_instance * b.prefill_nodes), (b.decode_gpu, b.decode_gpus_per_node * b.decode_nodes)]
        elif t.stages is None:
            return {(t.cloud, self.region, t.gpu): t.gpus}
        else:
            nodes = [(gpu, t.gpus_per_instance) for _, gpu in t.stages]
        out: dict[tuple[str, str, str], int] = {}
        for gpu, n in nodes:
            key = (t.cloud, self.region, gpu)
            out[key] = out.get(key, 0) + n
        return out


def regime_of(t) -> str:
    """A template's regime: its model (and variant), GPU type and layout (TP x PP over its nodes). The
    same GPU and layout on another instance type or cloud runs the same engine, so it shares the
    factor; the regime's units serve one class range (what the ILP routes to that layout)."""
    pd = getattr(t, "bundle", None)  # a prefill/decode bundle runs other engines than a colocated layout
    return f"{t.model}|{t.variant or ''}|{t.gpu}|tp{t.tp}|pp{t.pp}|n{t.nodes}" + (f"|pd{pd.prefill_tp}{pd.ratio}" if pd else "")


@dataclass(frozen=True)
class ClassCoverage:
    """Why a class can or cannot be served, for infeasibility messages."""

    served: bool
    best_tpot_floor: tuple[float, str] | None  # (ms, "H100 tp=8") fastest TPOT any layout reaches
    reasons: tuple[str, ...]  # distinct reasons layouts failed
    #: (ms, "H200 tp=8") fastest TTFT any layout reaches: its prompt's prefill alone, nothing queued
    best_ttft_floor: tuple[float, str] | None = None


@dataclass(frozen=True)
class ModelLibrary:
    """One model's serving templates (region- and price-free) and why each class is or is not served."""

    model: str
    templates: tuple[Template, ...]
    coverage: dict[str, ClassCoverage]  # class name -> coverage
