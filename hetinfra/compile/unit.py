"""The deployment unit: what one plan.json allocation deploys, in the words every target uses.

A :class:`DeployedUnit` (plan.json's ``deployment_unit``) is one model x template x cloud x region x
purchase option. It says **what it serves** (:class:`Serves`: the served model name, the checkpoint
vLLM loads, its LoRA adapters and its role: ``colocated`` today, ``prefill`` or ``decode`` in a
disaggregated bundle later) and **where and how** (instance type, GPUs, TP/PP/DP layout, replicas,
purchase option, engine runtime). SkyPilot tasks (:mod:`hetinfra.compile.skypilot`), the Pulumi stacks
(:mod:`hetinfra.stacks`), the Kubernetes manifests (:mod:`hetinfra.compile.kubernetes`) and
``profile --launch`` all take it; how one of its engines starts is :mod:`hetinfra.compile.engine`.

Names of the other "unit" classes (the template, the solver's, the simulator's): docs/glossary.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from hetinfra.catalog.gpus import NO_BF16_GPUS
from hetinfra.catalog.interconnect import RDMA_CLASSES
from hetinfra.document.bundle_shape import node_count_problem, order_problem, spread_problem
from hetinfra.facts import LORA_RANKS, PRECISIONS, VLLM_PORT, is_dns_label
from hetinfra.plan.naming import MAX_NAME_LEN
from hetinfra.price_feeds.offers import KNOWN_CLOUDS as CLOUDS

__all__ = ["LORA_RANKS", "ROLES", "RUNTIMES", "Adapter", "Alternate", "DeployedUnit", "Serves", "link_problem"]

#: how an engine runs: the vllm/vllm-openai image, or vLLM pip-installed into a virtualenv
RUNTIMES = ("container", "virtualenv")
#: what an engine does with a request: the whole of it (colocated prefill and decode), or one phase in a
#: prefill/decode bundle (plan.json allocations[].disaggregation; hetinfra.compile.engine.bundle_engines)
ROLES = ("colocated", "prefill", "decode")
AUTOSCALE_MAX_FACTOR = 2

_ENV_SAFE_RE = re.compile(r"^[^\s'\"`$\\]+$")


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter an engine serves beside its base model (vLLM ``--lora-modules name=source``)."""

    name: str  # the OpenAI ``model`` a request names to get it
    source: str  # what vLLM loads: a Hugging Face repo id or a path
    rank: int  # the adapter's LoRA rank (vLLM ``--max-lora-rank`` covers the largest)


@dataclass(frozen=True)
class Serves:
    """What a unit's engines serve: the requests the gateway may send them."""

    model: str  # the served model name (the OpenAI ``model`` of its requests), e.g. "chat-7b"
    source: str  # the checkpoint vLLM loads, e.g. "meta-llama/Llama-2-7b-chat-hf"
    adapters: Tuple[Adapter, ...] = ()
    role: str = "colocated"  # one of ROLES
    #: GPU adapter slots of each engine (vLLM --max-loras); 0: one per adapter. Fewer than the adapters:
    #: the rest wait in host memory (--max-cpu-loras) and are swapped in LRU (hetinfra.sim.lora)
    max_loras: int = 0

    def names(self) -> Tuple[str, ...]:
        """Every OpenAI ``model`` name a request may use to reach these engines."""
        return (self.model, *(a.name for a in self.adapters))


@dataclass(frozen=True)
class Alternate:
    """An equivalent offer a unit may fail over to (plan.json ``allocations[].alternates``)."""

    cloud: str
    region: str
    instance_type: str
    price_per_hour: float  # one instance, at the unit's purchase option


@dataclass(frozen=True)
class DeployedUnit:
    """The deployed unit (plan.json's deployment_unit): one model x template x cloud x region x
    purchase option, as SkyPilot, the stacks and the Kubernetes renderer deploy it. What it serves is
    :attr:`serves` (model, checkpoint, adapters, role). Not the template (plan.library.Template), the
    solver's unit (solver.problem.SolverUnit) or the gateway's backend group
    (gateway.balancer.BackendGroup): docs/glossary.md."""

    name: str  # unit name, DNS-safe (see unit_name)
    service_model: str  # served-model-name, e.g. "chat-7b"
    source: str  # what vLLM loads, e.g. "meta-llama/Llama-2-7b-chat-hf"
    cloud: str  # aws | gcp | azure
    region: str
    instance_type: str
    gpu: str  # SkyPilot accelerator name, e.g. "L4", "A100-80GB"
    gpus_per_instance: int
    tp: int  # tensor parallel per engine
    pp: int  # pipeline stages (one node per stage unless ``nodes`` says otherwise)
    engines_per_instance: int  # data-parallel engines on one instance (single-node layouts only)
    replicas: int  # planned count of instances (pp == 1) or of pipelines (pp > 1)
    spot: bool
    precision: str  # bf16 | fp16 | fp8 | int8 | int4
    max_model_len: int
    port: int = VLLM_PORT
    layer_partition: Optional[Tuple[int, ...]] = None  # uneven PP split -> VLLM_PP_LAYER_PARTITION
    target_qps_per_replica: Optional[float] = None  # set -> autoscaling instead of fixed replicas
    #: mixed-GPU pipeline (experimental, Pulumi only): (instance type, gpu) per stage, in rank order
    stages: Optional[Tuple[Tuple[str, str], ...]] = None
    #: nodes of one replica (plan.json nodes_per_replica); None = one node per pipeline stage (pp).
    #: 1 with pp > 1: a TP x PP (x DP) layout inside one node (vLLM's mp backend, no Ray).
    nodes: Optional[int] = None
    #: where replicas may go when the planned offer has no capacity, in the order SkyPilot tries them
    alternates: Tuple[Alternate, ...] = ()
    #: spot unit: on-demand replicas stand in for preempted or unobtainable spot ones
    ondemand_fallback: bool = False
    runtime: str = "virtualenv"  # container: the vllm/vllm-openai image; virtualenv: pip install vllm
    vllm_version: Optional[str] = None  # deploy.vllm_version; None: unpinned (plans always pin it)
    disk_size: Optional[int] = None  # boot disk, GB (hetinfra.compile.disk); None: SkyPilot's default
    adapters: Tuple[Adapter, ...] = ()  # LoRA adapters its engines serve beside the base model
    role: str = "colocated"  # what its engines do with a request (ROLES)
    max_loras: int = 0  # GPU adapter slots per engine (Serves.max_loras); 0: one per adapter
    #: a one-node prefill/decode bundle: (role, engines, tp) per role, prefill first (plan.json
    #: ``disaggregation.roles``); empty: colocated engines. Its node runs every engine and the two-step
    #: hop in front of them (hetinfra.compile.bundle)
    bundle: Tuple[Tuple[str, int, int], ...] = ()
    #: a bundle's plan, trimmed to the unit (hetinfra.compile.bundle.hop_plan): what the node's hop routes with
    hop_plan: Optional[str] = None
    #: where a bundle's node installs hetinfra for its hop (deploy.gateway.package)
    hetinfra_package: Optional[str] = None
    #: a bundle across the nodes of one placement group: per role (role, nodes, instance type, gpu,
    #: gpus per node), prefill first, from plan.json ``disaggregation.roles``; empty: a one-node
    #: bundle. Node ranks run prefill nodes first; rank 0 also runs the hop (hetinfra.compile.bundle)
    role_nodes: Tuple[Tuple[str, int, str, str, int], ...] = ()
    #: the RDMA network a bundle across nodes moves its KV over (efa, infiniband, roce); "" otherwise
    link: str = ""

    def __post_init__(self) -> None:
        if self.nodes is None:
            object.__setattr__(self, "nodes", self.pp)
        object.__setattr__(self, "alternates", tuple(
            a if isinstance(a, Alternate) else Alternate(*a) for a in self.alternates))
        object.__setattr__(self, "adapters", tuple(self.adapters))
        object.__setattr__(self, "bundle", tuple(tuple(r) for r in self.bundle))
        object.__setattr__(self, "role_nodes", tuple(tuple(r) for r in self.role_nodes))
        if self.layer_partition is not None and not isinstance(self.layer_partition, tuple):
            object.__setattr__(self, "layer_partition", tuple(self.layer_partition))
        if self.stages is not None:
            object.__setattr__(self, "stages", tuple(tuple(s) for s in self.stages))
        _validate(self)

    @property
    def serves(self) -> Serves:
        """What the unit's engines serve (``service_model`` and ``source`` are its model and checkpoint)."""
        return Serves(self.service_model, self.source, self.adapters, self.role, self.max_loras)

    @property
    def mixed(self) -> bool:
        return self.stages is not None

    def node_instance_type(self, rank: int) -> str:
        if self.role_nodes:
            return self.node_role(rank)[2]
        return self.stages[rank][0] if self.stages else self.instance_type

    def node_gpu(self, rank: int) -> str:
        if self.role_nodes:
            return self.node_role(rank)[3]
        return self.stages[rank][1] if self.stages else self.gpu

    def node_gpus(self, rank: int) -> int:
        """GPUs of node ``rank`` (a bundle's role may run another instance type than the unit's)."""
        return self.node_role(rank)[4] if self.role_nodes else self.gpus_per_instance

    def node_role(self, rank: int) -> Tuple[str, int, str, str, int]:
        """The ``role_nodes`` entry of node ``rank`` of a bundle across nodes (prefill nodes first)."""
        first = 0
        for entry in self.role_nodes:
            if rank < first + entry[1]:
                return entry
            first += entry[1]
        raise ValueError(f"rank {rank} outside the {self.num_nodes} node(s) of {self.name}")

    @property
    def num_nodes(self) -> int:
        """Nodes of one replica (one per pipeline stage unless stages share a node)."""
        return self.nodes

    @property
    def autoscaling(self) -> bool:
        return self.target_qps_per_replica is not None

    @property
    def max_replicas(self) -> int:
        """Upper bound of the autoscaling range (equals replicas when not autoscaling)."""
        if not self.autoscaling:
            return self.replicas
        return max(AUTOSCALE_MAX_FACTOR * self.replicas, self.replicas + 1)


def _is_pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _validate(u: DeployedUnit) -> None:
    """The first problem of the unit's identity, layout or engine, as a ValueError naming the unit."""
    for check in (_identity_problems, _layout_problems, _engine_problems):
        problem = next(check(u), None)
        if problem is not None:
            raise ValueError(f"DeployedUnit {u.name!r}: {problem}")


def _identity_problems(u: DeployedUnit):
    """What it is: name, model, place, counts, purchase, precision."""
    if not isinstance(u.name, str) or not is_dns_label(u.name, letter_first=True):
        yield ("name must be lowercase [a-z0-9-], start with a letter, end with a letter or digit, "
               f"and be at most {MAX_NAME_LEN} characters (use unit_name(...) to build one)")
    for field in ("service_model", "source", "region", "instance_type", "gpu"):
        value = getattr(u, field)
        if not isinstance(value, str) or not value or not _ENV_SAFE_RE.match(value):
            yield (f"{field} must be a non-empty string without whitespace, quotes, '$' or '\\'; "
                   f"got {value!r}")
    if u.cloud not in CLOUDS:
        yield f"cloud must be one of {', '.join(CLOUDS)}; got {u.cloud!r}"
    for field in ("gpus_per_instance", "tp", "pp", "engines_per_instance", "replicas",
                  "max_model_len", "port", "nodes"):
        if not _is_pos_int(getattr(u, field)):
            yield f"{field} must be a positive integer; got {getattr(u, field)!r}"
    if u.port > 65535:
        yield f"port must be at most 65535; got {u.port}"
    if not isinstance(u.spot, bool):
        yield f"spot must be a bool; got {u.spot!r}"
    if u.precision not in PRECISIONS:
        yield f"precision must be one of {', '.join(PRECISIONS)}; got {u.precision!r}"
    if u.precision == "bf16" and u.gpu.upper() in NO_BF16_GPUS:
        yield f"{u.gpu} has no BF16 support; plan fp16 (vLLM --dtype float16) for it"


def _layout_problems(u: DeployedUnit):
    """How its GPUs are laid out: TP x PP x DP on one node, a pipeline over several, or a bundle's roles."""
    if u.bundle:
        yield from _bundle_problems(u)
    elif u.nodes == 1:
        if u.tp * u.pp * u.engines_per_instance != u.gpus_per_instance:
            yield (f"tp ({u.tp}) x pp ({u.pp}) x engines_per_instance ({u.engines_per_instance}) must equal "
                   f"gpus_per_instance ({u.gpus_per_instance})")
    else:
        if u.engines_per_instance != 1:
            yield "engines_per_instance must be 1 for a multi-node pipeline"
        if u.pp % u.nodes or u.tp * (u.pp // u.nodes) != u.gpus_per_instance:
            yield (f"a multi-node pipeline runs pp / nodes consecutive stages per node with TP inside a node: "
                   f"tp ({u.tp}) x pp ({u.pp}) must equal nodes ({u.nodes}) x gpus_per_instance ({u.gpus_per_instance})")
        if u.stages is not None and u.nodes != u.pp:
            yield "a mixed pipeline runs one stage per node"
    if u.stages is not None:
        if len(u.stages) != u.pp or any(len(s) != 2 or not all(isinstance(x, str) and x for x in s)
                                        for s in u.stages):
            yield f"stages must hold pp ({u.pp}) (instance type, gpu) pairs; got {u.stages!r}"
        if u.layer_partition is None:
            yield "a mixed pipeline needs its layer_partition"
    if u.layer_partition is not None:
        if len(u.layer_partition) != u.pp or not all(_is_pos_int(x) for x in u.layer_partition):
            yield f"layer_partition must hold pp ({u.pp}) positive integers; got {u.layer_partition!r}"


def _bundle_problems(u: DeployedUnit):
    """A bundle: a prefill role then a decode role whose engines take one node's GPUs, or (``role_nodes``)
    spread over the nodes of one placement group; either way the hop in front of them."""
    if not u.hop_plan or not u.hetinfra_package:
        yield "a bundle needs its hop_plan and hetinfra_package (the hop in front of its engines)"
    elif [r[0] if len(r) == 3 else None for r in u.bundle] != ["prefill", "decode"] \
            or not all(_is_pos_int(n) and _is_pos_int(tp) for _, n, tp in u.bundle):
        yield f"bundle must be ((prefill, engines, tp), (decode, engines, tp)) with positive counts; got {u.bundle!r}"
    elif u.pp != 1 or u.stages is not None:
        yield "a prefill/decode bundle has no pipeline (pp 1, no stages)"
    elif u.role_nodes:
        yield from _across_nodes_problems(u)
    elif u.nodes != 1:
        yield f"a one-node prefill/decode bundle has nodes 1; got {u.nodes} (role_nodes says a bundle's nodes)"
    elif sum(n * tp for _, n, tp in u.bundle) != u.gpus_per_instance:
        yield (f"the bundle's engines x tp ({' + '.join(f'{n} x {tp}' for _, n, tp in u.bundle)}) must equal "
               f"gpus_per_instance ({u.gpus_per_instance})")


def link_problem(link: str) -> Optional[str]:
    """A bundle across nodes moves its KV over an RDMA network (hetinfra.catalog.interconnect.RDMA_CLASSES):
    the one check of a bundle's link, for the unit, the compilers (bundle.role_nodes_of) and preflight."""
    if link not in RDMA_CLASSES:
        return f"a bundle across nodes moves its KV over RDMA ({', '.join(RDMA_CLASSES)}); its link is {link!r}"
    return None


def _across_nodes_problems(u: DeployedUnit):
    """A bundle across nodes: entries that each name a whole node, then plan.json's rules
    (hetinfra.document.bundle_shape: the roles' order, each role's engines spread evenly over its nodes
    and within their GPUs, the nodes adding up to the unit's, an RDMA link between them)."""
    if any(len(r) != 5 for r in u.role_nodes) or order_problem([r[0] for r in u.role_nodes]):
        yield f"role_nodes must be ((prefill, nodes, instance_type, gpu, gpus), (decode, ...)); got {u.role_nodes!r}"
        return
    for role, nodes, itype, gpu, gpus in u.role_nodes:
        if not (_is_pos_int(nodes) and _is_pos_int(gpus)) or not all(isinstance(v, str) and _ENV_SAFE_RE.match(v)
                                                                       for v in (itype, gpu)):
            yield f"role_nodes {role}: positive nodes and GPUs, instance type and gpu without whitespace or quotes"
            return
    shapes = [(engines, tp, nodes, gpus) for (_, engines, tp), (_, nodes, _, _, gpus) in zip(u.bundle, u.role_nodes)]
    count = node_count_problem([r[1] for r in u.role_nodes], u.nodes)  # worded for the field: "nodes is ..."
    for why in (spread_problem(shapes, "role_nodes"), count and f"nodes {count}", link_problem(u.link)):
        if why:
            yield why


def _engine_problems(u: DeployedUnit):
    """Where it may fail over to, and what its engines run and serve."""
    for alt in u.alternates:
        if alt.cloud not in CLOUDS or not all(isinstance(v, str) and _ENV_SAFE_RE.match(v)
                                              for v in (alt.region, alt.instance_type)):
            yield (f"alternate {alt!r}: cloud must be one of {', '.join(CLOUDS)}; region and instance_type non-empty "
                   "strings without whitespace, quotes, '$' or '\\'")
    if u.ondemand_fallback and not u.spot:
        yield "ondemand_fallback is for spot units"
    if u.runtime not in RUNTIMES:
        yield f"runtime must be one of {', '.join(RUNTIMES)}; got {u.runtime!r}"
    if u.vllm_version is not None and not (isinstance(u.vllm_version, str) and _ENV_SAFE_RE.match(u.vllm_version)):
        yield f"vllm_version must be a version string such as 0.12.0; got {u.vllm_version!r}"
    if u.role not in ROLES:
        yield f"role must be one of {', '.join(ROLES)}; got {u.role!r}"
    for adapter in u.adapters:
        if not isinstance(adapter, Adapter) or not all(isinstance(v, str) and _ENV_SAFE_RE.match(v)
                                                       for v in (adapter.name, adapter.source)) \
                or not _is_pos_int(adapter.rank) or adapter.rank > LORA_RANKS[-1]:
            yield (f"adapter {adapter!r}: name and source non-empty strings without whitespace, quotes, '$' or '\\', "
                   f"rank a positive integer up to {LORA_RANKS[-1]} (vLLM's largest --max-lora-rank)")
    if u.disk_size is not None and not _is_pos_int(u.disk_size):
        yield f"disk_size must be a positive integer (GB); got {u.disk_size!r}"
    if u.target_qps_per_replica is not None:
        q = u.target_qps_per_replica
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not math.isfinite(q) or q <= 0:
            yield f"target_qps_per_replica must be a positive number; got {q!r}"
