"""How a deployment unit's engine starts: the vLLM image or pip requirement, the ``vllm serve`` command
line, its engine flags and its environment. The one statement of them: the SkyPilot tasks
(:mod:`hetinfra.compile.skypilot`), the Pulumi VMs' startup scripts (:mod:`hetinfra.stacks.startup`),
the Kubernetes containers (:mod:`hetinfra.compile.kubernetes.workloads`) and ``profile --launch``
import them from here, so every target runs the engine the performance model planned with.

A unit's role and adapters (:class:`hetinfra.compile.unit.Serves`) give a disaggregated engine's
``--kv-transfer-config`` and the adapters' ``--enable-lora --lora-modules``: one place, every target
(how a bundle's engines share a node: :mod:`hetinfra.compile.bundle`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

from hetinfra.compile.unit import LORA_RANKS, DeployedUnit, Serves
from hetinfra.facts import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS

__all__ = ["KV_TRANSFER_CONFIG", "NIXL_SIDE_CHANNEL_PORT", "BundleEngine", "bundle_engines", "role_flags",
           "INITIAL_DELAY_MULTI_NODE_S", "INITIAL_DELAY_SINGLE_NODE_S", "SECRET_NAMES", "VLLM_IMAGE", "adapter_flags",
           "engine_flags", "precision_flags", "serve_envs", "vllm_image",
           "vllm_pip_spec", "vllm_serve_command"]

VLLM_IMAGE = "vllm/vllm-openai"
#: what an engine reads from its environment and no file may hold (SkyPilot secrets, the VMs' secret
#: store, a Kubernetes Secret)
SECRET_NAMES = ("HF_TOKEN", "VLLM_API_KEY")
#: how long an engine may take to answer /health at first (the install, the weights' download, CUDA
#: graph capture): SkyPilot's readiness probe and Kubernetes' startup probe wait this long
INITIAL_DELAY_SINGLE_NODE_S = 1200
INITIAL_DELAY_MULTI_NODE_S = 1800


def vllm_image(version: Optional[str]) -> str:
    """The vLLM server image of ``deploy.runtime: container`` (tag v<version>; latest without one)."""
    return f"{VLLM_IMAGE}:{'v' + version if version else 'latest'}"


def vllm_pip_spec(version: Optional[str]) -> str:
    """The pip requirement of ``deploy.runtime: virtualenv``."""
    return f"vllm=={version}" if version else "vllm"


def precision_flags(u: DeployedUnit) -> Tuple[list, Optional[str]]:
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
    served = unit.serves
    args = ["vllm", "serve", model_arg,
            "--served-model-name", shlex.quote(served.model),
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
    args += precision_flags(unit)[0]
    args += adapter_flags(served)
    args += role_flags(served)
    # The API key is NOT a flag: vLLM reads VLLM_API_KEY from the environment (a SkyPilot secret),
    # so it never shows up in `ps` output or logs of the command line.
    args += ["--host", "0.0.0.0", "--port", str(unit.port)]
    return " ".join(args)


#: a prefill or decode engine's KV connector: NixlConnector with kv_role kv_both on both roles, as
#: vLLM's NixlConnector usage guide starts them (checked against vLLM 0.12.0, the pinned
#: deploy.vllm_version; vLLM is not importable here, so not against its parser): which engine
#: produces and which consumes is said per request (the gateway's kv_transfer_params)
KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
#: NIXL's side channel (VLLM_NIXL_SIDE_CHANNEL_PORT): one port per engine on a host, from this one up
NIXL_SIDE_CHANNEL_PORT = 5600


def role_flags(served: Serves) -> list[str]:
    """The KV-transfer flag of a prefill or decode engine (none for a colocated one)."""
    return [] if served.role == "colocated" else ["--kv-transfer-config", shlex.quote(KV_TRANSFER_CONFIG)]


@dataclass(frozen=True)
class BundleEngine:
    """One engine of a one-node prefill/decode bundle: its role, GPUs, port, environment and command."""

    role: str
    gpus: Tuple[int, ...]
    port: int
    envs: Dict[str, str]
    command: str


def bundle_engines(unit: DeployedUnit, roles: list[tuple[str, int, int]], *, first_port: int | None = None,
                   nixl_host: str = "127.0.0.1", first_index: int = 0,
                   node: tuple[str, str, int] | None = None, extra_envs: Dict[str, str] | None = None
                   ) -> list[BundleEngine]:
    """The engines of one node of a bundle, ``roles`` = [(role, engines, tp), ...] (plan.json
    ``disaggregation.roles``): consecutive GPUs per engine (prefill first), ports from ``first_port``
    (the unit's port by default) up, one NIXL side-channel port each (from ``first_index`` up, so the
    engines of a replica's nodes never share one), announced at ``nixl_host`` (loopback: a one-node
    bundle's decode engines read the KV on the same node; a bundle across nodes: the node's address).
    ``node``: (instance type, gpu, GPUs) of a role's node when it is not the unit's (heterogeneous P/D);
    ``extra_envs``: the RDMA transport's settings. Every engine is the unit's ``vllm serve`` at its
    role's TP on its node's GPU, so the engine flags the performance model planned with hold for both roles."""
    itype, gpu_kind, gpus = node or (unit.instance_type, unit.gpu, unit.gpus_per_instance)
    out, gpu, k = [], 0, 0
    port = unit.port if first_port is None else first_port
    for role, engines, tp in roles:
        for _ in range(engines):
            one = replace(unit, tp=tp, pp=1, engines_per_instance=1, nodes=1, gpus_per_instance=tp, role=role,
                          port=port + k, bundle=(), role_nodes=(), link="", instance_type=itype,
                          gpu=gpu_kind)  # the engine on its slice of the node
            envs = {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in range(gpu, gpu + tp)),
                    "VLLM_NIXL_SIDE_CHANNEL_PORT": str(NIXL_SIDE_CHANNEL_PORT + first_index + k),
                    "VLLM_NIXL_SIDE_CHANNEL_HOST": nixl_host, **(extra_envs or {})}
            out.append(BundleEngine(role, tuple(range(gpu, gpu + tp)), port + k, envs, vllm_serve_command(one)))
            gpu, k = gpu + tp, k + 1
    if gpu > gpus:
        raise ValueError(f"bundle of {unit.name} needs {gpu} GPUs, its instance has {gpus}")
    return out


def adapter_flags(served: Serves) -> list[str]:
    """vLLM's LoRA flags for the adapters a unit serves (none without adapters): every adapter in a
    slot, the rank limit the smallest vLLM allows that holds the largest (vLLM's choices:
    ../shared/notes/pd-lora.md, B)."""
    if not served.adapters:
        return []
    rank = min(r for r in LORA_RANKS if r >= max(a.rank for a in served.adapters))
    slots = min(served.max_loras or len(served.adapters), len(served.adapters))
    # more adapters than GPU slots: vLLM keeps the others in host memory (--max-cpu-loras >= --max-loras)
    cpu = ["--max-cpu-loras", str(len(served.adapters))] if slots < len(served.adapters) else []
    return ["--enable-lora", "--max-loras", str(slots), "--max-lora-rank", str(rank), *cpu,
            "--lora-modules", *(shlex.quote(f"{a.name}={a.source}") for a in served.adapters)]


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
