"""Compile deployment units of a plan into SkyPilot 0.14 service task YAMLs.

One :class:`DeployedUnit` (model x template x cloud x region x purchase option) becomes one SkyServe
service task: ``resources`` with the planned accelerators, purchase option, port and boot disk, at
``infra: <cloud>/<region>`` on the planned instance type, or, when the plan lists alternates
(plan.json ``allocations[].alternates``: same GPU type and count, same vLLM layout), an ``ordered``
list of the planned offer first and then its alternates, cheapest first, which SkyPilot tries in
turn when one has no capacity; ``num_nodes`` = nodes of a multi-node pipeline; the engine of the
Pulumi path (``runtime: container``: ``image_id: docker:vllm/vllm-openai:v<version>``, the image's
own vLLM; ``virtualenv``: ``pip install vllm==<version>``); a ``run`` that starts ``vllm serve``
(behind a user-space Ray cluster for multi-node pipelines); and a ``service`` section with a
readiness probe on ``/health``, a fixed replica count or request-rate autoscaling, and for spot
units with on-demand fallback SkyServe's ``dynamic_ondemand_fallback`` (on-demand replicas stand in
for preempted or unobtainable spot ones).

SkyPilot opens ``ports`` (and SSH) to the world: the spec's ``ingress_cidrs``/``ssh_cidrs`` hold on
the Pulumi path only (the task's header and the plan's warnings say so).

SkyPilot is never imported here: the YAML is written as text with PyYAML's safe dumper, so that
``hetinfra plan`` stays fast and does not need SkyPilot installed. The tests load every rendered
file with SkyPilot's own parser (``sky.Task.from_yaml_str``) and ``sky.serve.validate_service_task``.

Secrets (``HF_TOKEN``, ``VLLM_API_KEY``) are never written in clear: they are declared as
null-valued entries of the top-level ``secrets:`` section, which SkyPilot 0.14 treats as references
whose values are given at launch time, e.g.::

    sky serve up chat-7b-aws-us-east-1-g6-xlarge.yaml -n chat-7b-aws-us-east-1-g6-xlarge \\
        --secret HF_TOKEN --secret VLLM_API_KEY      # values taken from the local environment
"""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import yaml

from hetinfra.catalog.gpus import NO_BF16_GPUS
from hetinfra.plan.naming import MAX_NAME_LEN, unit_name
from hetinfra.price_feeds.offers import KNOWN_CLOUDS as CLOUDS
from hetinfra.compile.ray import RayNode, ray_pipeline_script
from hetinfra.facts import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, PRECISIONS, RAY_CLICK_PIN, VLLM_PORT, is_dns_label

__all__ = [
    "DeployedUnit",
    "Alternate",
    "unit_name",
    "vllm_image",
    "vllm_pip_spec",
    "vllm_serve_command",
    "serve_envs",
    "render_task",
    "render_all",
    "task_config",
    "write_all",
    "SECRET_NAMES",
]

RUNTIMES = ("container", "virtualenv")
VLLM_IMAGE = "vllm/vllm-openai"
SECRET_NAMES = ("HF_TOKEN", "VLLM_API_KEY")

#: where a SkyPilot node finds its address, its head's and its rank (SkyPilot's environment); sed reads
#: all its input, so echo never dies of SIGPIPE under the script's pipefail (head -n1 could: exit 141)
SKYPILOT_NODE = RayNode(node_ip='$(echo "$SKYPILOT_NODE_IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p")',
                        head_ip='$(echo "$SKYPILOT_NODE_IPS" | sed -n 1p)', rank="$SKYPILOT_NODE_RANK")

# Readiness probe: the first probe waits for the install + weight download + CUDA graph capture.
INITIAL_DELAY_SINGLE_NODE_S = 1200
INITIAL_DELAY_MULTI_NODE_S = 1800
AUTOSCALE_MAX_FACTOR = 2


_ENV_SAFE_RE = re.compile(r"^[^\s'\"`$\\]+$")


def vllm_image(version: Optional[str]) -> str:
    """The vLLM server image of ``deploy.runtime: container`` (tag v<version>; latest without one)."""
    return f"{VLLM_IMAGE}:{'v' + version if version else 'latest'}"


def vllm_pip_spec(version: Optional[str]) -> str:
    """The pip requirement of ``deploy.runtime: virtualenv``."""
    return f"vllm=={version}" if version else "vllm"


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
    purchase option, as SkyPilot, the stacks and the Kubernetes renderer deploy it. Not the
    template (plan.library.Template), the solver's unit (solver.problem) or the gateway's backend
    group (gateway.balancer.BackendGroup)."""

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

    def __post_init__(self) -> None:
        if self.nodes is None:
            object.__setattr__(self, "nodes", self.pp)
        object.__setattr__(self, "alternates", tuple(
            a if isinstance(a, Alternate) else Alternate(*a) for a in self.alternates))
        if self.layer_partition is not None and not isinstance(self.layer_partition, tuple):
            object.__setattr__(self, "layer_partition", tuple(self.layer_partition))
        if self.stages is not None:
            object.__setattr__(self, "stages", tuple(tuple(s) for s in self.stages))
        _validate(self)

    @property
    def mixed(self) -> bool:
        return self.stages is not None

    def node_instance_type(self, rank: int) -> str:
        return self.stages[rank][0] if self.stages else self.instance_type

    def node_gpu(self, rank: int) -> str:
        return self.stages[rank][1] if self.stages else self.gpu

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
    def bad(msg: str) -> None:
        raise ValueError(f"DeployedUnit {u.name!r}: {msg}")

    if not isinstance(u.name, str) or not is_dns_label(u.name, letter_first=True):
        bad("name must be lowercase [a-z0-9-], start with a letter, end with a letter or digit, "
            f"and be at most {MAX_NAME_LEN} characters (use unit_name(...) to build one)")
    for field in ("service_model", "source", "region", "instance_type", "gpu"):
        value = getattr(u, field)
        if not isinstance(value, str) or not value or not _ENV_SAFE_RE.match(value):
            bad(f"{field} must be a non-empty string without whitespace, quotes, '$' or '\\'; "
                f"got {value!r}")
    if u.cloud not in CLOUDS:
        bad(f"cloud must be one of {', '.join(CLOUDS)}; got {u.cloud!r}")
    for field in ("gpus_per_instance", "tp", "pp", "engines_per_instance", "replicas",
                  "max_model_len", "port", "nodes"):
        if not _is_pos_int(getattr(u, field)):
            bad(f"{field} must be a positive integer; got {getattr(u, field)!r}")
    if u.port > 65535:
        bad(f"port must be at most 65535; got {u.port}")
    if not isinstance(u.spot, bool):
        bad(f"spot must be a bool; got {u.spot!r}")
    if u.precision not in PRECISIONS:
        bad(f"precision must be one of {', '.join(PRECISIONS)}; got {u.precision!r}")
    if u.precision == "bf16" and u.gpu.upper() in NO_BF16_GPUS:
        bad(f"{u.gpu} has no BF16 support; plan fp16 (vLLM --dtype float16) for it")
    if u.nodes == 1:
        if u.tp * u.pp * u.engines_per_instance != u.gpus_per_instance:
            bad(f"tp ({u.tp}) x pp ({u.pp}) x engines_per_instance ({u.engines_per_instance}) must equal "
                f"gpus_per_instance ({u.gpus_per_instance})")
    else:
        if u.engines_per_instance != 1:
            bad("engines_per_instance must be 1 for a multi-node pipeline")
        if u.pp % u.nodes or u.tp * (u.pp // u.nodes) != u.gpus_per_instance:
            bad(f"a multi-node pipeline runs pp / nodes consecutive stages per node with TP inside a node: "
                f"tp ({u.tp}) x pp ({u.pp}) must equal nodes ({u.nodes}) x gpus_per_instance ({u.gpus_per_instance})")
        if u.stages is not None and u.nodes != u.pp:
            bad("a mixed pipeline runs one stage per node")
    if u.stages is not None:
        if len(u.stages) != u.pp or any(len(s) != 2 or not all(isinstance(x, str) and x for x in s)
                                        for s in u.stages):
            bad(f"stages must hold pp ({u.pp}) (instance type, gpu) pairs; got {u.stages!r}")
        if u.layer_partition is None:
            bad("a mixed pipeline needs its layer_partition")
    if u.layer_partition is not None:
        if len(u.layer_partition) != u.pp or not all(_is_pos_int(x) for x in u.layer_partition):
            bad(f"layer_partition must hold pp ({u.pp}) positive integers; got {u.layer_partition!r}")
    for alt in u.alternates:
        if alt.cloud not in CLOUDS or not all(isinstance(v, str) and _ENV_SAFE_RE.match(v)
                                              for v in (alt.region, alt.instance_type)):
            bad(f"alternate {alt!r}: cloud must be one of {', '.join(CLOUDS)}; region and instance_type non-empty "
                "strings without whitespace, quotes, '$' or '\\'")
    if u.ondemand_fallback and not u.spot:
        bad("ondemand_fallback is for spot units")
    if u.runtime not in RUNTIMES:
        bad(f"runtime must be one of {', '.join(RUNTIMES)}; got {u.runtime!r}")
    if u.vllm_version is not None and not (isinstance(u.vllm_version, str) and _ENV_SAFE_RE.match(u.vllm_version)):
        bad(f"vllm_version must be a version string such as 0.12.0; got {u.vllm_version!r}")
    if u.disk_size is not None and not _is_pos_int(u.disk_size):
        bad(f"disk_size must be a positive integer (GB); got {u.disk_size!r}")
    if u.target_qps_per_replica is not None:
        q = u.target_qps_per_replica
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not math.isfinite(q) or q <= 0:
            bad(f"target_qps_per_replica must be a positive number; got {q!r}")


def _precision_flags(u: DeployedUnit) -> Tuple[list, Optional[str]]:
    """vLLM flags for the unit's precision and an explanatory note (or None)."""
    if u.precision == "bf16":
        return ["--dtype", "bfloat16"], None
    if u.precision == "fp16":
        return ["--dtype", "float16"], None
    if u.precision == "fp8":
        if "fp8" in u.source.lower():
            # An FP8 checkpoint carries its own quantization_config (e.g. compressed-tensors);
            # vLLM rejects --quantization fp8 when the config names another method.
            return [], ("fp8: the checkpoint is expected to be pre-quantized to FP8; vLLM reads "
                        "its quantization_config (dtype auto)")
        return ["--quantization", "fp8"], ("fp8: online FP8 weight quantization of a 16-bit "
                                           "checkpoint (--quantization fp8, dtype auto)")
    return [], (f"{u.precision}: a pre-quantized checkpoint (AWQ/GPTQ) is expected; vLLM reads "
                "its quantization_config (dtype auto)")


def vllm_serve_command(unit: DeployedUnit, *, model_arg: str = '"$MODEL_ID"') -> str:
    """The exact ``vllm serve`` command line of one engine set (one instance or one pipeline head).

    It expects ``MODEL_ID`` and ``VLLM_API_KEY`` in the environment (``HF_TOKEN`` too for gated
    models, ``VLLM_PP_LAYER_PARTITION`` for uneven pipelines; see :func:`serve_envs`). For a
    multi-node pipeline it must run on the head of a Ray cluster that all nodes have joined.
    ``model_arg`` replaces the model argument, e.g. ``shlex.quote(unit.source)``.
    """
    args = ["vllm", "serve", model_arg,
            "--served-model-name", shlex.quote(unit.service_model),
            "--tensor-parallel-size", str(unit.tp)]
    if unit.mixed:
        # vLLM's mp backend puts stage r on node rank r (under Ray the order of worker nodes is
        # arbitrary, which an uneven split across GPU types cannot tolerate); engine defaults
        # are pinned because vLLM derives them from the head's GPU only (vllm.md s1.4).
        args += ["--pipeline-parallel-size", str(unit.pp), "--distributed-executor-backend", "mp",
                 "--nnodes", str(unit.pp), "--node-rank", '"$NODE_RANK"', "--master-addr", '"$HEAD_IP"']
    elif unit.pp > 1 and unit.num_nodes == 1:
        # every stage on this node: vLLM's multiprocessing backend, no Ray
        args += ["--pipeline-parallel-size", str(unit.pp), "--distributed-executor-backend", "mp"]
    elif unit.pp > 1:
        args += ["--pipeline-parallel-size", str(unit.pp),
                 "--distributed-executor-backend", "ray"]
    if unit.engines_per_instance > 1:
        args += ["--data-parallel-size", str(unit.engines_per_instance)]
    args += ["--max-model-len", str(unit.max_model_len)] + engine_flags(unit)
    args += _precision_flags(unit)[0]
    # The API key is NOT a flag: vLLM reads VLLM_API_KEY from the environment (a SkyPilot secret),
    # so it never shows up in `ps` output or logs of the command line.
    args += ["--host", "0.0.0.0", "--port", str(unit.port)]
    return " ".join(args)


def engine_flags(unit: DeployedUnit) -> list[str]:
    """The engine settings the performance model assumed, pinned so that vLLM runs what was planned
    (its own defaults differ by version and GPU): KV share of GPU memory, the concurrency cap and the
    chunked-prefill token budget (a mixed pipeline's is its smallest stage's: vLLM would derive it
    from the head's GPU only, vllm.md s1.4)."""
    from hetinfra.catalog.gpus import GPUS
    from hetinfra.perf.estimator import max_num_batched_tokens_default
    from hetinfra.perf.pipeline import pipeline_batched_tokens

    gpus = [GPUS[g] for _, g in unit.stages] if unit.mixed else [GPUS[unit.gpu]] if unit.gpu in GPUS else []
    flags = ["--gpu-memory-utilization", f"{GPU_MEMORY_UTILIZATION:g}", "--max-num-seqs", str(MAX_NUM_SEQS)]
    if gpus:
        mbt = pipeline_batched_tokens(gpus) if unit.mixed else max_num_batched_tokens_default(gpus[0])
        flags += ["--max-num-batched-tokens", str(mbt)]
    return flags


def serve_envs(unit: DeployedUnit) -> Dict[str, str]:
    """Non-secret environment of the unit (secrets are listed in SECRET_NAMES)."""
    envs = {"MODEL_ID": unit.source}
    if unit.pp > 1 and unit.layer_partition is not None:
        envs["VLLM_PP_LAYER_PARTITION"] = ",".join(str(x) for x in unit.layer_partition)
    return envs


def _setup_script(u: DeployedUnit) -> Optional[str]:
    """None in a container with nothing to add: the image brings its vLLM (and Ray)."""
    lines = [] if u.runtime == "container" else [f"pip install {shlex.quote(vllm_pip_spec(u.vllm_version))}"]
    if u.num_nodes > 1:
        lines += [
            "# User-space Ray for the pipeline (ray[default] gives `ray health-check`/dashboard agent) at the",
            "# version vLLM came with; click<8.3 avoids the Ray CLI breakage with click 8.3.0/8.3.1 (ray-project/ray#56747).",
            f"pip install \"ray[default]==$(python3 -c 'import ray; print(ray.__version__)')\" \"{RAY_CLICK_PIN}\"",
        ]
    return "\n".join(lines) + "\n" if lines else None


def _run_script(u: DeployedUnit) -> str:
    lines = []
    note = _precision_flags(u)[1]
    if u.num_nodes == 1:
        if u.pp > 1:
            lines.append(f"# Pipeline of {u.pp} stages (TP={u.tp} each) inside this node: vLLM's mp backend, "
                         f"layers per stage from VLLM_PP_LAYER_PARTITION.")
        if u.engines_per_instance > 1:
            lines.append(f"# vLLM data parallel: {u.engines_per_instance} independent engines "
                         f"(TP={u.tp}" + (f" x PP={u.pp}" if u.pp > 1 else "") + f" each) behind one API endpoint "
                         f"on port {u.port}.")
        if note:
            lines.append(f"# {note}")
        lines.append(vllm_serve_command(u))
        return "\n".join(lines) + "\n"

    serve = (f"# {note}\n" if note else "") + f"exec {vllm_serve_command(u)}\n"
    return ray_pipeline_script(u, SKYPILOT_NODE, serve)


def _service_section(u: DeployedUnit) -> Dict[str, Any]:
    delay = INITIAL_DELAY_SINGLE_NODE_S if u.num_nodes == 1 else INITIAL_DELAY_MULTI_NODE_S
    svc: Dict[str, Any] = {
        "readiness_probe": {"path": "/health", "initial_delay_seconds": delay},
    }
    if u.autoscaling:
        # Scalar target QPS -> SkyServe's RequestRateAutoscaler (a dict of per-GPU targets would break
        # with on-demand fallback in 0.14.1: ../shared/notes/sky.md s3b).
        svc["replica_policy"] = {
            "min_replicas": u.replicas,
            "max_replicas": u.max_replicas,
            "target_qps_per_replica": float(u.target_qps_per_replica),
        }
    elif u.ondemand_fallback:  # `replicas` cannot carry the fallback; min_replicas alone is a fixed count
        svc["replica_policy"] = {"min_replicas": u.replicas}
    else:
        svc["replicas"] = u.replicas
    if u.ondemand_fallback:
        # The resources stay all spot (SkyServe rejects mixed purchase options); the autoscaler
        # launches on-demand replicas (use_spot overridden) for spot ones not READY, and removes them
        # once spot is back.
        svc["replica_policy"]["dynamic_ondemand_fallback"] = True
    return svc


def generator_version() -> str:
    root = sys.modules.get(__name__.split(".")[0])
    return str(getattr(root, "__version__", "dev"))


def _header(u: DeployedUnit) -> str:
    purchase = "spot" if u.spot else "on-demand"
    if u.autoscaling:
        scale = (f"autoscaling {u.replicas}..{u.max_replicas} replicas at "
                 f"{float(u.target_qps_per_replica):g} req/s per replica")
    else:
        scale = f"{u.replicas} replica(s)"
    what = "pipeline(s)" if u.num_nodes > 1 else "instance(s)"
    lines = [
        f"# Generated by hetinfra {generator_version()}; do not edit.",
        f"# Unit {u.name}: model {u.service_model} ({u.source})",
        f"#   {u.cloud}/{u.region} {u.instance_type} ({u.gpu}:{u.gpus_per_instance}) x {u.num_nodes} node(s), "
        f"{purchase}; {scale} ({what})",
        f"#   TP={u.tp} PP={u.pp} DP={u.engines_per_instance} per replica; precision {u.precision}; "
        f"max_model_len {u.max_model_len}",
    ]
    note = _precision_flags(u)[1]
    if note:
        lines.append(f"#   {note}")
    engine = (f"image {vllm_image(u.vllm_version)}" if u.runtime == "container"
              else f"pip {vllm_pip_spec(u.vllm_version)}")
    lines.append(f"#   engine: {engine}" + (f"; boot disk {u.disk_size} GB" if u.disk_size else ""))
    if u.alternates:
        lines.append("#   failover, tried in order after the planned offer (per instance):")
        lines += [f"#     {a.cloud}/{a.region} {a.instance_type} ${a.price_per_hour:g}/h" for a in u.alternates]
    if u.ondemand_fallback:
        lines.append("#   on-demand fallback: on-demand replicas stand in for preempted or unobtainable spot ones")
    lines += [
        f"#   network: SkyPilot opens port {u.port} and SSH to 0.0.0.0/0 (deploy.ingress_cidrs/ssh_cidrs hold on "
        "the Pulumi path only); vLLM requires VLLM_API_KEY",
        f"# Launch: sky serve up {u.name}.yaml -n {u.name} "
        + " ".join(f"--secret {s}" for s in SECRET_NAMES),
        "#   (secret values come from your environment at launch; they are never written here)",
    ]
    return "\n".join(lines) + "\n"


class TaskDumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings as literal blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


TaskDumper.add_representer(str, _str_representer)


def task_config(unit: DeployedUnit) -> Dict[str, Any]:
    """The task as a plain dict (what render_task dumps, without the header)."""
    u = unit
    res: Dict[str, Any] = {"accelerators": {u.gpu: u.gpus_per_instance}}
    if not u.alternates:
        res = {"infra": f"{u.cloud}/{u.region}", **res, "instance_type": u.instance_type}
    res.update(use_spot=u.spot, ports=u.port)
    if u.disk_size:
        res["disk_size"] = u.disk_size
    if u.runtime == "container":
        # SkyPilot runs setup and run inside this image on every node (its own entrypoint, host network,
        # /dev/shm sized from the host's memory: what --ipc host is for on the Pulumi path).
        res["image_id"] = f"docker:{vllm_image(u.vllm_version)}"
    if u.alternates:
        # `ordered`, not `any_of`: the planned offer first even where SkyPilot's catalog prices an
        # alternate lower, then the alternates cheapest first (as the plan priced them).
        places = [(u.cloud, u.region, u.instance_type)] + [(a.cloud, a.region, a.instance_type) for a in u.alternates]
        res["ordered"] = [{"infra": f"{c}/{r}", "instance_type": it} for c, r, it in places]
    cfg: Dict[str, Any] = {"name": u.name, "resources": res}
    if u.num_nodes > 1:
        cfg["num_nodes"] = u.num_nodes
    cfg["envs"] = serve_envs(u)
    cfg["secrets"] = {name: None for name in SECRET_NAMES}
    setup = _setup_script(u)
    if setup:
        cfg["setup"] = setup
    cfg["run"] = _run_script(u)
    cfg["service"] = _service_section(u)
    return cfg


def render_task(unit: DeployedUnit) -> str:
    """YAML text of one SkyPilot service task, starting with a '# Generated by hetinfra' header."""
    body = yaml.dump(task_config(unit), Dumper=TaskDumper, sort_keys=False,
                     default_flow_style=False, allow_unicode=False, width=10_000)
    return _header(unit) + body


def render_all(units: Sequence[DeployedUnit]) -> Dict[str, str]:
    """File name ("<unit.name>.yaml") -> YAML text, in input order; unit names must be unique."""
    out: Dict[str, str] = {}
    for u in units:
        fname = f"{u.name}.yaml"
        if fname in out:
            raise ValueError(f"duplicate SkyPilot unit name {u.name!r}")
        out[fname] = render_task(u)
    return out


def write_all(units: Sequence[DeployedUnit], directory: Union[str, "os.PathLike[str]"]) -> Mapping[str, str]:
    """Render all units and write them into ``directory`` (created if missing); returns render_all."""
    files = render_all(units)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (d / fname).write_text(text, encoding="utf-8")
    return files
