"""Compile deployment units of a plan into SkyPilot 0.14 service task YAMLs.

One :class:`hetinfra.compile.unit.DeployedUnit` (model x template x cloud x region x purchase option)
becomes one SkyServe service task: ``resources`` with the planned accelerators, purchase option, port and boot disk, at
``infra: <cloud>/<region>`` on the planned instance type, or, when the plan lists alternates
(plan.json ``allocations[].alternates``: same GPU type and count, same vLLM layout), an ``ordered``
list of the planned offer first and then its alternates, cheapest first, which SkyPilot tries in
turn when one has no capacity; ``num_nodes`` = nodes of a multi-node pipeline; the engine of the
Pulumi path (``runtime: container``: ``image_id: docker:vllm/vllm-openai:v<version>``, the image's
own vLLM; ``virtualenv``: ``pip install vllm==<version>``); a ``run`` that starts ``vllm serve`` (the
engine's command line: :mod:`hetinfra.compile.engine`, as every target runs it)
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

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Union

import yaml

from hetinfra.compile.bundle import hop_install, node_script
from hetinfra.compile.engine import (INITIAL_DELAY_MULTI_NODE_S, INITIAL_DELAY_SINGLE_NODE_S, SECRET_NAMES,
                                     precision_flags, serve_envs, vllm_image, vllm_pip_spec, vllm_serve_command)
from hetinfra.compile.ray import RayNode, ray_pipeline_script
from hetinfra.compile.unit import DeployedUnit
from hetinfra.facts import RAY_CLICK_PIN

if TYPE_CHECKING:
    from hetinfra.document import Allocation

__all__ = ["SKYPILOT_NODE", "TaskDumper", "generator_version", "render_all", "render_task", "skypilot_refusal",
           "task_config", "write_all"]

#: where a SkyPilot node finds its address, its head's and its rank (SkyPilot's environment); sed reads
#: all its input, so echo never dies of SIGPIPE under the script's pipefail (head -n1 could: exit 141)
SKYPILOT_NODE = RayNode(node_ip='$(echo "$SKYPILOT_NODE_IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p")',
                        head_ip='$(echo "$SKYPILOT_NODE_IPS" | sed -n 1p)', rank="$SKYPILOT_NODE_RANK")



def skypilot_refusal(a: "Allocation") -> str | None:
    """Why SkyPilot 0.14.1 cannot run allocation ``a`` as planned (None: it can). A prefill/decode
    bundle across nodes needs its nodes in one placement group over the RDMA network the plan priced,
    and a SkyPilot task cannot ask for that: one task (one cluster) has one instance type, so a
    heterogeneous bundle is not one task; Azure has no custom network tier in SkyPilot
    (CUSTOM_NETWORK_TIER unsupported); ``network_tier: best`` gives GCP GPUDirect-TCPX, not RDMA; on
    AWS it gives EFA, but one interface of the type's several unless the user's own SkyPilot config
    sets ``aws.use_internal_ips`` (not a key a task may override), and SkyPilot creates no cluster
    placement group (its ``_configure_placement_group`` is never called). tests/compile/test_skypilot_bundles
    reads these facts from SkyPilot's library, so a release that changes them fails there."""
    d = a.disaggregation
    if d is None or not any(r.nodes for r in d.roles):
        return None
    if any(r.instance_type and r.instance_type != a.instance_type for r in d.roles):
        why = "its roles run different instance types, and a SkyPilot task (one cluster) has one"
    elif a.cloud == "aws":
        from hetinfra.compile.bundle_nodes import EFA_INTERFACES

        many = EFA_INTERFACES.get(a.instance_type, 1)
        why = ("SkyPilot creates no cluster placement group for its nodes" + (
            f", and its network_tier: best gives them one EFA interface of the {many} of {a.instance_type} "
            "unless your SkyPilot config sets aws.use_internal_ips" if many > 1 else ""))
    else:
        why = f"SkyPilot gives no RDMA network ({d.link}) between the nodes of a {a.cloud} cluster"
    return (f"{a.deployment_unit} is a prefill/decode bundle across {a.nodes_per_replica} nodes of one placement "
            f"group over {d.link}, which SkyPilot cannot run as planned: {why}")


#: where a bundle's node keeps hetinfra (the hop in front of its engines) and the hop's plan
HOP_HETINFRA = "$HOME/hetinfra-venv/bin/hetinfra"
HOP_PLAN = "$HOME/hetinfra/hop-plan.json"


def _hop_setup(u: DeployedUnit) -> list[str]:
    """A bundle's node: hetinfra in its own virtualenv (deploy.gateway.package), and the hop's plan."""
    return [hop_install("$HOME/hetinfra-venv"), "mkdir -p ~/hetinfra",
            f"cat > {HOP_PLAN} <<'HETINFRA_PLAN'", u.hop_plan, "HETINFRA_PLAN"]


def _setup_script(u: DeployedUnit) -> Optional[str]:
    """None in a container with nothing to add: the image brings its vLLM (and Ray)."""
    lines = [] if u.runtime == "container" else [f"pip install {shlex.quote(vllm_pip_spec(u.vllm_version))}"]
    if u.bundle:
        lines += _hop_setup(u)
    if u.num_nodes > 1:
        lines += [
            "# User-space Ray for the pipeline (ray[default] gives `ray health-check`/dashboard agent) at the",
            "# version vLLM came with; click<8.3 avoids the Ray CLI breakage with click 8.3.0/8.3.1 (ray-project/ray#56747).",
            f"pip install \"ray[default]==$(python3 -c 'import ray; print(ray.__version__)')\" \"{RAY_CLICK_PIN}\"",
        ]
    return "\n".join(lines) + "\n" if lines else None


def _run_script(u: DeployedUnit) -> str:
    lines = []
    note = precision_flags(u)[1]
    if u.bundle:
        return (f"# {note}\n" if note else "") + node_script(u, HOP_HETINFRA, HOP_PLAN)
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
    layout = (" + ".join(f"{n} {r} engine(s) TP={tp}" for r, n, tp in u.bundle) + " (NixlConnector) behind the "
              "node's hop" if u.bundle else f"TP={u.tp} PP={u.pp} DP={u.engines_per_instance}")
    lines = [
        f"# Generated by hetinfra {generator_version()}; do not edit.",
        f"# Unit {u.name}: model {u.service_model} ({u.source})",
        f"#   {u.cloud}/{u.region} {u.instance_type} ({u.gpu}:{u.gpus_per_instance}) x {u.num_nodes} node(s), "
        f"{purchase}; {scale} ({what})",
        f"#   {layout} per replica; precision {u.precision}; max_model_len {u.max_model_len}",
    ]
    note = precision_flags(u)[1]
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
    if u.bundle:
        cfg["envs"]["HETINFRA_PACKAGE"] = u.hetinfra_package
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
