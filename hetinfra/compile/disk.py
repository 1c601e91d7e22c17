"""Boot disk sizes: what a VM of a unit must hold (the model's weights, the engine, the OS image).

``deploy.disk_gb`` unset (the default) sizes every unit's disk from :func:`disk_need_gb`, rounded
up to 10 GB; set, it is used as given and ``hetinfra apply``'s preflight refuses a disk smaller
than the need. The need is:

- **weights**: the checkpoint vLLM downloads into the Hugging Face cache, ``params x bytes``:
  2 bytes for bf16/fp16 and for ``fp8`` on a 16-bit checkpoint (online quantization downloads the
  16-bit weights), 1 for an FP8 checkpoint (``fp8`` in its name) and int8, 0.5 for int4. Every node
  of a pipeline downloads the whole checkpoint (vLLM does not fetch per-stage shards);
- **engine**: the ``vllm/vllm-openai`` image unpacked (``runtime: container``) or the virtualenv
  with vLLM and torch (``runtime: virtualenv``);
- **OS image**: the GPU image's own root file system (driver, CUDA, Docker);
- 10% headroom for logs, compile caches and a second copy during an update.

A unit serving one of a model's variants is sized for that variant's checkpoint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hetinfra.catalog.models import get_model
from hetinfra.compile.checkpoint import served_checkpoint

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan
    from hetinfra.document.sections import ModelEntry

ENGINE_GB = {"container": 25, "virtualenv": 15}
OS_IMAGE_GB = {"aws": 75, "gcp": 50, "azure": 64}  # DLAMI base root volume, DL VM image, Ubuntu HPC image
DEFAULT_OS_IMAGE_GB = 75
HEADROOM = 0.10


def weight_bytes_per_param(precision: str, source: str) -> float:
    if precision in ("bf16", "fp16"):
        return 2.0
    if precision == "fp8":
        return 1.0 if "fp8" in source.lower() else 2.0
    if precision == "int8":
        return 1.0
    return 0.5  # int4


def weights_gb(model: "ModelEntry") -> float | None:
    """GB the checkpoint of a plan.json ``models[]`` entry takes on disk, or None (unknown model)."""
    params = model.params
    if not params:
        arch = get_model(str(model.model or ""))
        params = arch.params if arch else None
    if not params:
        return None
    return params * weight_bytes_per_param(model.precision, model.source) / 1e9


def alloc_weights_gb(plan: "Plan", alloc: "Allocation") -> float | None:
    """GB of the checkpoint a VM of ``alloc`` downloads (its variant's, when it serves one), or None."""
    return weights_gb(served_checkpoint(plan.model(alloc.model), alloc))


def disk_need_gb(plan: "Plan", alloc: "Allocation", cloud: str | None = None) -> tuple[int, str]:
    """(GB, how) one VM of ``alloc`` needs (on ``cloud``: an alternate's; default the allocation's);
    ``how`` explains the sum."""
    cloud = cloud or alloc.cloud
    runtime = plan.deploy.runtime
    w = alloc_weights_gb(plan, alloc)
    engine = ENGINE_GB.get(runtime, ENGINE_GB["container"])
    osgb = OS_IMAGE_GB.get(cloud, DEFAULT_OS_IMAGE_GB)
    weights = w if w is not None else 0.0
    need = int(math.ceil((weights + engine + osgb) * (1 + HEADROOM) / 10.0) * 10)
    how = (f"weights {weights:.0f} GB{' (model size unknown: not counted)' if w is None else ''} + "
           f"{runtime} engine {engine} GB + {cloud} OS image {osgb} GB + {int(HEADROOM * 100)}%")
    return need, how


def disk_gb(plan: "Plan", alloc: "Allocation", cloud: str | None = None) -> int:
    """The boot disk a VM of ``alloc`` (on ``cloud``, default its own) gets: ``deploy.disk_gb`` when
    set, else the need."""
    return plan.deploy.disk_gb or disk_need_gb(plan, alloc, cloud)[0]
