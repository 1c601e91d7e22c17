"""Each deployment unit's --max-model-len: derived from the classes routed to it and never above the
tokens its engine's KV cache holds (vLLM refuses to start an engine whose max model length does not
fit its KV cache: "the model's max seq len is larger than the maximum number of tokens that can be
stored in KV cache").

* need: the largest input + output of the classes routed to the unit; a unit that serves the
  model's largest class takes the model's max_model_len instead (the last bucket also holds the
  requests the sizes allow beyond its edges, e.g. a clipped dataset: hetinfra.plan.inputs);
* KV capacity: the estimator's KV cache of one engine (tp x pp GPUs, gpu_memory_utilization 0.9,
  16-bit KV), the same memory model that rules a class out of a layout that cannot hold it;
* max_model_len = min(need, KV capacity). A class that does not fit the KV cache of a layout is
  infeasible there (hetinfra.perf.estimator, "kv_memory"), so no routed class is ever above it.
"""

from __future__ import annotations

import math

from hetinfra.catalog.gpus import GpuSpec
from hetinfra.catalog.models import ModelArch

__all__ = ["kv_cache_tokens", "unit_max_model_len"]


def kv_cache_tokens(arch: ModelArch, gpu: GpuSpec, tp: int, pp: int, precision: str, nodes: int | None = None,
                    vllm_version: str | None = None) -> int | None:
    """Tokens one engine's KV cache holds (None: the weights do not fit, or the layout is invalid)."""
    from hetinfra.perf.calibration import calibration_for
    from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION, Estimate, build_engine
    from hetinfra.perf.pipeline import MAX_NUM_SEQS

    eng = build_engine(arch, gpu, tp, pp, 1, 1, precision, GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, None, None,
                       calibration_for(vllm_version), nodes=nodes)
    if isinstance(eng, Estimate):
        return None
    return int(math.floor(eng.kv_tokens))


def unit_max_model_len(routed: list[tuple[int, int]], largest: tuple[int, int], model_len: int,
                       kv_tokens: int | None) -> int:
    """--max-model-len of a unit serving classes of (input, output) tokens ``routed`` of a model whose
    largest class is ``largest`` and whose max_model_len is ``model_len``."""
    if not routed:
        need = model_len
    elif largest in routed:
        need = model_len
    else:
        need = max(i + o for i, o in routed)
    return need if kv_tokens is None else min(need, kv_tokens)
