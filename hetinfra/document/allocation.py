"""plan.json ``allocations[]`` and ``routing``: what runs where, and who gets which requests.

Four things are called a "unit" in hetinfra; plan.json names two of them:

- the **template** (``template``): a serving layout of one model on one cloud's instance type
  (``hetinfra.plan.templates.Template``), region-agnostic;
- the **solver unit** (``unit``): a template in one region at one purchase option, the ILP's
  variable (``hetinfra.solver.problem.Unit``); its id ``model|cloud|instance|...`` is internal;
- the **deployment unit** (``deployment_unit``): the DNS-safe name of the deployed group of
  replicas (a SkyPilot service, an ASG/MIG/VMSS), the key of state.json, routing and the gateway;
- the gateway's **backend group**: the endpoints of one deployment unit behind the gateway
  (``hetinfra.gateway.table``), keyed by ``deployment_unit``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Optional

from pydantic import Field, StrictBool, StrictInt, StrictStr, ValidationInfo, field_validator

from hetinfra.document.adapters import UnitAdapters
from hetinfra.spec.adapters import adapter_of
from hetinfra.document.base import (MAX_GPUS, MAX_STAGES, Doc, Fraction, ModelLen, NodeGpus, NonNegative, Number, Price,
                                    Positive, Replicas, Stages, int_in)
from hetinfra.document.bundle_shape import nodes_problem, price_problem, role_node, role_problem
from hetinfra.facts import is_dns_label



class Alternate(Doc):
    """An equivalent offer a SkyServe unit may fail over to (same GPU type and count, same layout)."""

    cloud: StrictStr = Field(description="Cloud of the alternate offer.")
    region: StrictStr = Field(description="Region of the alternate offer.")
    instance_type: StrictStr = Field(description="Instance type of the alternate offer.")
    price_per_hour: Price = Field(description="$/h of one instance of the alternate offer.")
    spot: StrictBool = Field(description="Whether the alternate is a spot offer (as the planned one).")


class OndemandFallback(Doc):
    """A spot unit's on-demand fallback (SkyServe ``dynamic_ondemand_fallback``)."""

    price_per_hour: Price = Field(description="$/h of one on-demand instance that replaces a spot one.")


class Role(Doc):
    """One role's engines in a prefill/decode bundle."""

    role: Literal["prefill", "decode"] = Field(description="prefill (vLLM kv_producer: the prompt, max_tokens 1) or "
                                                           "decode (kv_consumer: every output token)")
    engines: NodeGpus = Field(description="Engines of this role in one replica of the bundle.")
    tp: NodeGpus = Field(description="Tensor-parallel size of each of these engines.")
    nodes: int_in(0, MAX_STAGES) = Field(description="Nodes of this role in one replica; 0: the bundle shares one node.")
    instance_type: Optional[StrictStr] = Field(None, description="Instance type of this role's nodes when it differs "
                                                                 "from the allocation's (heterogeneous P/D across "
                                                                 "the nodes of one placement group); absent: the "
                                                                 "allocation's instance_type.")
    gpu: Optional[StrictStr] = Field(None, description="GPU of this role's nodes when it differs from the "
                                                       "allocation's; absent: the allocation's gpu.")
    gpus_per_node: Optional[NodeGpus] = Field(None, description="GPUs of one of this role's nodes when its "
                                                                   "instance type differs; absent: the "
                                                                   "allocation's gpus_per_instance.")
    price_per_node_usd_per_hour: Optional[Price] = Field(None, description="$/h of one of this role's nodes, "
                                                                                  "on both roles of a heterogeneous "
                                                                                  "bundle (whose allocation states "
                                                                                  "the mean over its nodes, as a "
                                                                                  "mixed pipeline does); absent: the "
                                                                                  "allocation's price.")

    def group_fields(self, alloc: "Allocation") -> dict:
        """The fields of this role's group of identical instances (``nodes`` per replica of the
        allocation's ``count``): a heterogeneous bundle counted role by role."""
        price = self.price_per_node_usd_per_hour
        price = alloc.price_per_instance_usd_per_hour if price is None else price
        n = alloc.count * self.nodes
        node = role_node(self, alloc)
        return {"instance_type": node.instance_type, "gpu": node.gpu, "gpus_per_instance": node.gpus, "instances": n,
                "price_per_instance_usd_per_hour": price, "cost_usd_per_hour": price * n, "stages": None}


class ClassTransfer(Doc):
    """One class's expected KV transfer in a bundle."""

    name: StrictStr = Field(description="The class (models[].classes[].name).")
    transfer_ms: NonNegative = Field(description="Expected time to move one request's prompt KV from its prefill "
                                                  "engine to its decode engine (latency + prompt x KV bytes per "
                                                  "token / link bandwidth), ms.")


class Disaggregation(Doc):
    """A unit whose engines split prefill and decode (an xPyD bundle, issue 37)."""

    xpyd: StrictStr = Field(description="Prefill to decode engines of one replica, e.g. 2P1D (x prefill, y decode).")
    roles: list[Role] = Field(description="The prefill role, then the decode role.")
    link: StrictStr = Field(description="What the KV moves over: nvlink or pcie inside one node; efa, infiniband or "
                                        "roce between the nodes of one placement group.")
    link_gbytes_s: Positive = Field(description="Bandwidth one KV transfer gets over that link, GB/s (nominal x "
                                                    "the achieved share, hetinfra.catalog.interconnect).")
    kv_bytes_per_token: Positive = Field(description="KV-cache bytes of one prompt token (2 x layers x KV heads x "
                                                         "head dim x bytes).")
    classes: list[ClassTransfer] = Field(min_length=1, description="Per class the bundle serves: the expected KV transfer.")


class Stage(Doc):
    """One pipeline stage of an EXPERIMENTAL mixed-GPU pipeline (Pulumi stacks only)."""

    instance_type: StrictStr = Field(description="Instance type of the stage's node.")
    gpu: StrictStr = Field(description="GPU of the stage's node.")
    gpus: NodeGpus = Field(description="GPUs of the stage's node (the stage's tensor-parallel size).")
    layers: Stages = Field(description="Model layers the stage serves.")
    price_usd_per_hour: Price = Field(description="$/h of the stage's instance.")

    def group_fields(self, count: int) -> dict:
        """The fields of the stage's group of identical instances (one per replica of ``count``): what a
        mixed pipeline's allocation becomes for counting instances, GPUs and prices stage by stage."""
        return {"instance_type": self.instance_type, "gpu": self.gpu, "gpus_per_instance": self.gpus,
                "instances": count, "price_per_instance_usd_per_hour": self.price_usd_per_hour,
                "cost_usd_per_hour": self.price_usd_per_hour * count, "stages": None}


class Allocation(Doc):
    """One deployment unit of the plan: ``count`` replicas of a template in a region at a purchase option."""

    unit: StrictStr = Field(description="The solver unit's internal id (template x region x purchase option, "
                                        "``model|cloud|instance|...``): what ``routing`` and ``baselines`` refer to. "
                                        "Not a name for clouds: see ``deployment_unit``.")
    template: StrictStr = Field(description="Id of the serving template (``templates[].id``) the unit instantiates.")
    model: StrictStr = Field(description="The service model (``models[].name``) the unit serves.")
    cloud: StrictStr = Field(description="Cloud of the offer (aws, gcp, azure, or a custom cloud from a user CSV).")
    region: StrictStr = Field(description="Region of the offer.")
    instance_type: StrictStr = Field(description="Instance type of every node (for a mixed pipeline: the first stage's).")
    gpu: StrictStr = Field(description="GPU type of the instance.")
    gpus_per_instance: NodeGpus = Field(description="GPUs per instance.")
    tp: NodeGpus = Field(description="vLLM tensor-parallel size (GPUs of one node per engine).")
    pp: Stages = Field(description="vLLM pipeline-parallel size (stages per replica).")
    engines_per_instance: NodeGpus = Field(description="vLLM engines on one instance (data parallel inside it).")
    disaggregation: Optional[Disaggregation] = Field(None, description="A prefill/decode bundle's roles, ratio and "
                                                                       "expected KV transfer; absent: colocated "
                                                                       "engines (declared before nodes_per_replica, whose check reads it).")
    nodes_per_replica: Stages = Field(description="Instances one replica spans (a multi-node pipeline > 1).")
    layer_partition: Optional[list[Stages]] = Field(min_length=1, description="Layers per pipeline stage, one per stage of pp "
                                                               "(VLLM_PP_LAYER_PARTITION); null: vLLM's even split.")
    count: Replicas = Field(description="Replicas planned (at the peak demand period); with its engines at most "
                                        "hetinfra.document.base.MAX_GPUS (each engine holds a GPU).")
    instances: Replicas = Field(description="Instances planned: count x nodes_per_replica.")
    spot: StrictBool = Field(description="Whether the unit runs on spot instances.")
    price_per_instance_usd_per_hour: Price = Field(description="$/h of one instance (mixed pipeline or heterogeneous "
                                                      "bundle: the mean over a replica's nodes).")
    cost_usd_per_hour: NonNegative = Field(description="$/h of the unit (with a demand profile: its horizon average).")
    utilization: NonNegative = Field(description="Planned load of a replica, as a fraction of its rated capacity: the "
                                                 "req/s routed to the unit (routed_rps) over count x its rate at "
                                                 "the unit's class mix (templates[].capacity_rps: the estimate "
                                                 "or profile x derate), before headroom. The solve keeps it at most "
                                                 "1 - headroom (a verified plan: 1 / the verification load); above 1 "
                                                 "where verification's trim removed replicas its simulation showed "
                                                 "were not needed (the fleet carries more than its rates credit).")
    custom_cloud: StrictBool = Field(description="An offer from the user's own CSV: planned, never deployed by apply.")
    routed_rps: NonNegative = Field(description="Requests/s routed to the unit at the planned demand.")
    target_qps_per_replica: Optional[Number] = Field(description="Requests/s one replica sustains at the unit's class "
                                                                 "mix less the headroom: the autoscaler's and the "
                                                                 "router's per-replica target; null without load.")
    experimental: StrictBool = Field(description="An EXPERIMENTAL mixed-GPU pipeline.")
    confidence: Optional[StrictStr] = Field(description="Confidence level of the template's rates (see templates[]).")
    variant: Optional[StrictStr] = Field(description="The model variant the unit serves (models[].variants); null: "
                                                     "the model as declared.")
    purchase: Optional[StrictStr] = Field(None, description="Purchase option (on_demand, spot, committed_1y, "
                                                            "committed_3y); only in plans that plan purchases.")
    on_demand_price_per_instance_usd_per_hour: Optional[Price] = Field(
        None, description="A committed unit's on-demand price per instance (the VM runs on demand; the commitment "
                          "is a billing discount).")
    counts_by_period: Optional[list[int_in(0)]] = Field(None, min_length=1, description="A top-up's replicas in each demand profile "
                                                                          "period.")
    stages: Optional[list[Stage]] = Field(None, min_length=1, description="The stages of a mixed-GPU pipeline.")
    adapters: Optional[UnitAdapters] = Field(None, description="The LoRA adapters the unit's engines serve, with "
                                                                "their slots, memory and derate; absent: the base "
                                                                "model only (issue 38).")
    max_model_len: Optional[ModelLen] = Field(
        None, description="The unit's vLLM --max-model-len: the largest class routed to it (the model's value when it "
                          "serves the largest class), capped at its KV cache (docs/verification.md).")
    kv_cache_tokens: Optional[int_in(1, None)] = Field(None, description="Tokens one engine's KV cache holds on the unit's "
                                                                   "layout; null for mixed pipelines.")
    gpu_memory_gb: Optional[Positive] = Field(None, description="GPU memory per GPU of the offer (a custom GPU's comes "
                                                              "from its offer row).")
    custom_gpu: StrictBool = Field(False, description="The unit's ``gpu`` is not in hetinfra's GPU catalog: a GPU of "
                                                      "the user's offers CSV, its memory from the offer "
                                                      "(``gpu_memory_gb``), its bandwidth and FLOP/s from the spec's "
                                                      "``infrastructure.custom_gpus`` or conservative defaults. "
                                                      "Written only when true; absent (false), a GPU outside the "
                                                      "catalog is an error to ``hetinfra simulate``.")
    deployment_unit: StrictStr = Field(description="The deployed unit's name: a DNS label naming its SkyPilot "
                                                   "service, cloud groups and state.json entries; the key of the "
                                                   "gateway's backend group. Not the solver's ``unit``.")
    skypilot_task: Optional[StrictStr] = Field(description="``skypilot/<deployment_unit>.yaml``; null for custom "
                                                           "clouds and mixed pipelines (no SkyPilot task).")
    alternates: list[Alternate] = Field(description="Equivalent offers the SkyServe unit may fail over to, cheapest "
                                                    "first (empty: pinned to its planned offer).")
    ondemand_fallback: Optional[OndemandFallback] = Field(description="A spot unit's on-demand fallback; null when "
                                                                      "off or not spot.")

    # Invariants, each on the field it names (so an error reads ``allocations[0].instances``); a
    # validator sees the fields declared above its own.
    @field_validator("disaggregation")
    @classmethod
    def _bundle_roles(cls, v: Optional[Disaggregation], info: ValidationInfo) -> Optional[Disaggregation]:
        why = None if v is None else role_problem(v, info.data.get("gpus_per_instance"))
        if why:  # hetinfra.document.bundle_shape: what every reader of a bundle relies on
            raise ValueError(why)
        return v

    @field_validator("tp", "engines_per_instance")
    @classmethod
    def _within_node(cls, v: int, info: ValidationInfo) -> int:
        gpus = info.data.get("gpus_per_instance")
        # an engine's tensor-parallel ranks are GPUs of one node, and each engine holds at least one of them
        if gpus is not None and v > gpus:
            raise ValueError(f"is {v}, more than the {gpus} GPU(s) of one instance (gpus_per_instance)")
        return v

    @field_validator("layer_partition")
    @classmethod
    def _one_per_stage(cls, v: Optional[list[int]], info: ValidationInfo) -> Optional[list[int]]:
        pp = info.data.get("pp")
        if v is not None and pp is not None and len(v) != pp:
            raise ValueError(f"lists {len(v)} stage(s), but pp is {pp} (one entry per pipeline stage)")
        return v

    @field_validator("count")
    @classmethod
    def _engines_bounded(cls, v: int, info: ValidationInfo) -> int:
        # each engine (and each node) holds at least one GPU: no allocation hetinfra plans has more than
        # MAX_GPUS of them, and the simulator builds one per engine (engine_count: a bundle's prefill
        # engines too, which engines_per_instance leaves out)
        per = (info.data.get("engines_per_instance") or 1) * (info.data.get("nodes_per_replica") or 1)
        if (split := info.data.get("disaggregation")) is not None:
            per = max(per, sum(r.engines for r in split.roles))
        engines = v * per
        if engines > MAX_GPUS:
            raise ValueError(f"is {v}: at {per} engine(s) or node(s) a replica that is {engines:,} engines, "
                             f"more than hetinfra plans ({MAX_GPUS:,} GPUs in all)")
        return v

    @field_validator("nodes_per_replica")
    @classmethod
    def _whole_nodes(cls, v: int, info: ValidationInfo) -> int:
        why = nodes_problem(info.data.get("disaggregation"), v)
        if why:
            raise ValueError(why)
        pp = info.data.get("pp")
        # a pipeline spans whole nodes (several stages on one node allowed); a bundle's roles take whole nodes
        if pp is not None and pp % v and info.data.get("disaggregation") is None:
            raise ValueError(f"is {v}, which does not divide pp {pp}")
        return v

    @field_validator("instances")
    @classmethod
    def _instances(cls, v: int, info: ValidationInfo) -> int:
        count, nodes = info.data.get("count"), info.data.get("nodes_per_replica")
        if count is not None and nodes is not None and v != count * nodes:
            raise ValueError(f"is {v}; count x nodes_per_replica is {count * nodes}")
        return v

    @field_validator("price_per_instance_usd_per_hour")
    @classmethod
    def _bundle_price(cls, v: float, info: ValidationInfo) -> float:
        why = price_problem(info.data.get("disaggregation"), info.data.get("nodes_per_replica"), v)
        if why:
            raise ValueError(why)
        return v

    @field_validator("deployment_unit")
    @classmethod
    def _unit_name(cls, v: str) -> str:
        if not is_dns_label(v, letter_first=True):
            raise ValueError(f"{v!r} is not a unit name (a DNS label that starts with a letter)")
        return v

    @field_validator("skypilot_task")
    @classmethod
    def _task_path(cls, v: str | None, info: ValidationInfo) -> str | None:
        unit = info.data.get("deployment_unit")
        if v is not None and unit is not None and v != f"skypilot/{unit}.yaml":
            raise ValueError(f"is {v!r}; expected 'skypilot/{unit}.yaml'")
        return v

    def stage_groups(self) -> list["Allocation"]:
        """The allocation as groups of identical instances: a mixed-GPU pipeline as one group per stage
        (:meth:`Stage.group_fields`: the stage's instance type, GPU and price, ``count`` instances), any
        other allocation as itself."""
        if self.heterogeneous_bundle:  # prefill nodes of one instance type, decode nodes of another
            return [self.model_copy(update=r.group_fields(self)) for r in self.disaggregation.roles]
        if not self.stages:
            return [self]
        return [self.model_copy(update=s.group_fields(self.count)) for s in self.stages]

    @property
    def engine_count(self) -> int:
        """vLLM engines the allocation runs, one simulated replica each (hetinfra.sim.plan_sim,
        hetinfra.sim.split): a prefill/decode bundle's prefill and decode engines per replica, else
        ``engines_per_instance`` per replica. The simulator's size limits count these."""
        if self.disaggregation is not None:
            return self.count * sum(r.engines for r in self.disaggregation.roles)
        return self.count * self.engines_per_instance

    @property
    def heterogeneous_bundle(self) -> bool:
        """A prefill/decode bundle whose roles run on different instance types (issue 37)."""
        return self.disaggregation is not None and any(r.instance_type for r in self.disaggregation.roles)

    # Readers' accessors (typed views the deploy and replan stages share).
    def to_dict(self) -> dict:
        """plan.json's dict of the allocation (absent optional keys stay absent): for writers of
        state.json and plan.json copies, and for readers that still take dicts."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def gpus_per_replica(self) -> int:
        """GPUs of one replica: a mixed pipeline's stages (one instance each), else every node's."""
        if self.stages:
            return sum(s.gpus for s in self.stages)
        if self.heterogeneous_bundle:
            return sum(r.nodes * role_node(r, self).gpus for r in self.disaggregation.roles)
        return self.gpus_per_instance * self.nodes_per_replica

    def instance_groups(self) -> list[InstanceGroup]:
        """:meth:`stage_groups` as light tuples (deploy's and replan's instance counting)."""
        return [InstanceGroup(g.instance_type, g.gpu, g.gpus_per_instance, g.instances,
                              g.price_per_instance_usd_per_hour, g.cost_usd_per_hour) for g in self.stage_groups()]


class RouteShare(Doc):
    """The share of one request class that one solver unit serves."""

    unit: StrictStr = Field(description="The solver unit (``allocations[].unit``).")
    share: Fraction = Field(description="Fraction of the class's declared rate routed to the unit.")
    rps: NonNegative = Field(description="Requests/s of the class routed to the unit.")


#: ``routing``: model -> request class -> the units serving it, largest share first
Routing = dict[str, dict[str, list[RouteShare]]]


class OriginRouteShare(Doc):
    """The share of one origin's requests of one class that one solver unit serves (docs/regions.md)."""

    unit: StrictStr = Field(description="The solver unit (``allocations[].unit``).")
    deployment_unit: Optional[StrictStr] = Field(description="The deployed unit's name (``allocations[].deployment_unit``).")
    region: StrictStr = Field(description="Region of the unit.")
    share: Fraction = Field(description="Fraction of the origin's requests of the class routed to the unit.")
    rps: NonNegative = Field(description="Requests/s of the origin's class routed to the unit.")
    network_ms: Optional[Number] = Field(description="Estimated round trip origin -> unit region, added once to TTFT; "
                                                     "null when the network table knows neither place.")


class Origin(Doc):
    """Where one share of a model's traffic comes from, and where it may be served."""

    share: Fraction = Field(description="Fraction of the model's demand from this origin.")
    residency: Literal["region", "continent", "none"] = Field(description="Where the origin's requests may be served.")
    area: Optional[StrictStr] = Field(description="The allowed area's name (a region or continent); null: anywhere.")
    allowed_regions: Optional[list[StrictStr]] = Field(description="The plan's regions inside the area (the gateway "
                                                                   "fails over only to these); null: anywhere.")
    worst_network_ms: Optional[Number] = Field(description="The largest round trip any of the origin's routed "
                                                           "requests pays; null when unknown.")


#: ``routing_by_origin``: model -> origin -> request class -> the units serving it, largest rps first
OriginRouting = dict[str, dict[str, dict[str, list[OriginRouteShare]]]]
#: ``origins``: model -> origin -> its share and residency
Origins = dict[str, dict[str, Origin]]


def routes_to_missing(units: set[str], routing: Routing, by_origin: OriginRouting | None) -> list[str]:
    """Each route of a whole plan (``routing``, ``routing_by_origin``) to a unit not in ``units`` (its
    allocations'), as a message: the simulation and the gateway follow routes (the trim of earlier
    versions could leave an origin routed to a unit it had removed). A cloud's Pulumi project keeps
    every cloud's routes, so plan.json's own model does not ask this."""
    rows = [(f"routing.{m}.{c}", e.unit) for m, per in routing.items() for c, es in per.items() for e in es]
    rows += [(f"routing_by_origin.{m}.{o}.{c}", e.unit) for m, per in (by_origin or {}).items()
             for o, classes in per.items() for c, es in classes.items() for e in es]
    return [f"{where} routes to unit {unit!r}, which is not among allocations" for where, unit in rows if unit not in units]


def plan_route_problems(allocations: "list[Allocation]", routing: Routing, by_origin: OriginRouting | None) -> list[str]:
    """Each route of a plan to a unit of another model, whose deployment unit is not that unit's, or
    of an adapter's class (``<class>~<adapter>``) to a unit that does not hold the adapter."""
    by_unit = {a.unit: a for a in allocations}
    rows = [(f"routing.{m}.{c}", m, c, e.unit, None) for m, per in routing.items() for c, es in per.items() for e in es]
    rows += [(f"routing_by_origin.{m}.{o}.{c}", m, c, e.unit, e.deployment_unit)
             for m, per in (by_origin or {}).items() for o, classes in per.items() for c, es in classes.items()
             for e in es]
    out = []
    for where, model, cls, unit, deployed in rows:
        a = by_unit.get(unit)
        adapter = adapter_of(cls)  # an adapter's class is <class>~<adapter>
        if a is not None and a.model != model:
            out.append(f"{where} sends model {model!r} to unit {unit!r}, which serves model {a.model!r}")
        elif a is not None and adapter and adapter not in {h.name for h in (a.adapters.held if a.adapters else [])}:
            out.append(f"{where} sends adapter {adapter!r}'s requests to unit {unit!r}, which does not hold it "
                       "(allocations[].adapters.held)")
        elif a is not None and deployed is not None and deployed != a.deployment_unit:
            out.append(f"{where} names unit {unit!r} as deployment unit {deployed!r}, but it is "
                       f"{a.deployment_unit!r}")
    return out


class InstanceGroup(NamedTuple):
    """Identical instances of one allocation (:meth:`Allocation.instance_groups`)."""

    instance_type: str
    gpu: str
    gpus_per_instance: int
    instances: int
    price_per_instance_usd_per_hour: float
    cost_usd_per_hour: float
