"""The measured-kernel backend (``planning.estimator: aiconfigurator`` / ``auto``): step times from
NVIDIA aiconfigurator-core's kernel database for exactly the planned model and layout.

aiconfigurator is optional (``pip install 'hetinfra[aiconfigurator]'``, Apache-2.0) and imported here
only, lazily. For a (model, GPU, TP, precision) its database covers, the backend asks it for the
layout's decode, prefill and mixed prefill+decode step times (the grid of tools/aic_steps.py) and fits
the built-in step model's GPU-side constants to them (hetinfra.perf.kernel_fit), starting from the
GPU's shipped constants: the result is an ordinary Calibration, so the estimator, the confidence
intervals and the simulator use it as they use the built-in one. The engine's CPU-side step costs
(fixed, per sequence, TTFT queueing) stay the shipped ones: kernels do not measure them, the measured
end-to-end runs do (tools/fit_kernels.py).

Elsewhere (a GPU or model its database lacks: L4, A10G, T4, V100, custom GPUs, custom architectures)
``layout_calibration`` returns None and the built-in constants apply.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from functools import lru_cache

from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import CALIBRATION, Calibration
from hetinfra.perf.published import KernelRow

__all__ = ["ESTIMATORS", "available", "covers", "layout_calibration", "require"]

ESTIMATORS = ("builtin", "aiconfigurator", "auto")
# catalog GPU -> aiconfigurator system (the exact part: an A100 40 GB is not the database's SXM 80 GB)
SYSTEMS = {"A100-80GB": "a100_sxm", "H100": "h100_sxm", "H200": "h200_sxm", "L40S": "l40s"}
# catalog model -> aiconfigurator model_configs entry (shipped in its wheel: no download)
MODELS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
          "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B", "qwen3-32b": "Qwen/Qwen3-32B",
          "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B"}
PRECISIONS = {"bf16": None, "fp16": None, "fp8": "fp8"}
FP8_GPUS = {"H100", "H200", "L40S"}
DECODE_BATCHES, CONTEXTS = (1, 4, 16, 64, 256), (1024, 8192)
PREFILLS = (256, 1024, 4096, 16384)
MIXED = ((512, 16, 2048), (2048, 16, 2048), (2048, 128, 2048), (8192, 64, 8192))


def available() -> bool:
    """Whether aiconfigurator-core is installed (no import: ``hetinfra --help`` stays light)."""
    return importlib.util.find_spec("aiconfigurator_core") is not None


def require() -> None:
    if not available():
        raise InvalidInputError("planning.estimator: aiconfigurator needs aiconfigurator-core, which is not installed",
                                hint="pip install 'hetinfra[aiconfigurator]', or use estimator: builtin or auto")


def covers(model: str, gpu: str, tp: int, precision: str) -> bool:
    """Whether the kernel database has this layout (catalog names; fp8 only on fp8 GPUs)."""
    p = precision.lower()
    return (gpu in SYSTEMS and model in MODELS and p in PRECISIONS and (p != "fp8" or gpu in FP8_GPUS)
            and tp in (1, 2, 4, 8))


def _handle(model: str, gpu: str, tp: int, precision: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # model configs ship in the wheel; never reach out
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    from aiconfigurator_core.sdk.engine import EngineHandle  # optional dependency, imported only here

    quant = PRECISIONS[precision.lower()]
    return EngineHandle.compile(MODELS[model], SYSTEMS[gpu], "vllm", tp_size=tp, moe_tp_size=tp,
                                gemm_quant_mode=quant, moe_quant_mode=quant)


def kernel_rows_for(model: str, gpu: str, tp: int, precision: str) -> list[KernelRow]:
    """The layout's step times from the kernel database (tools/aic_steps.py's grid)."""
    h = _handle(model, gpu, tp, precision)
    p = "fp8" if precision.lower() == "fp8" else "bf16"
    rows = [KernelRow(gpu, model, p, tp, "decode", b, ctx, 0, h.decode_step_latency(b, ctx, 2))
            for ctx in CONTEXTS for b in DECODE_BATCHES]
    rows += [KernelRow(gpu, model, p, tp, "prefill", 0, n, n, h.predict_prefill_latency(1, n)) for n in PREFILLS]
    rows += [KernelRow(gpu, model, p, tp, "mixed", b, ctx, chunk, h.mixed_step_latency(chunk, b, ctx, 2))
             for chunk, b, ctx in MIXED]
    return rows


def layout_calibration(model: str, gpu: str, tp: int, precision: str,
                       calib: Calibration = CALIBRATION) -> Calibration | None:
    """``calib`` whose constants for ``gpu`` are fitted to this layout's kernel step times, or None
    where the database does not cover the layout (or aiconfigurator is not installed). A fit is made
    once per process and layout, whether ``calib`` is passed or left to its default (the CLI's
    ``estimate --compare`` and the simulator's hook ask for the same fit in the two forms)."""
    if not available() or not covers(model, gpu, tp, precision):
        return None
    return _fitted(model, gpu, tp, precision, calib)


@lru_cache(maxsize=256)
def _fitted(model: str, gpu: str, tp: int, precision: str, calib: Calibration) -> Calibration:
    from hetinfra.perf.kernel_fit import fit_gpu, with_gpu

    rows = kernel_rows_for(model, gpu, tp, precision)
    return with_gpu(calib, gpu, fit_gpu(gpu, rows, calib, rounds=3, log=lambda *_: None))
