"""Heterogeneous pipelines: one vLLM engine whose PP stages run on nodes of different GPU types.

Stage s holds L_s consecutive layers (``VLLM_PP_LAYER_PARTITION``) on a node of GPU g_s; every
stage uses the same TP degree t (vLLM has one ``--tensor-parallel-size``; ../shared/notes/vllm.md
s1.3-1.4). The estimator's homogeneous model (``estimator.py``) generalises stage by stage:

* memory: stage s holds body x L_s / L of the weights (+ the embedding on the first stage, the LM
  head on the last) split over t GPUs, and KV for its L_s layers. vLLM sizes the KV cache of every
  worker to the smallest one (``get_kv_cache_configs``), so the engine's KV capacity in tokens is
  min_s (budget_s / kv bytes per token of stage s).
* decode: K = number of stages micro-batches of b sequences are in flight; the slowest stage paces
  them, so TPOT(b) = K x max_s stage_s(b) + the shared per-step costs (fixed, per sequence,
  stage-to-stage sends). With identical stages this is the homogeneous formula.
* prefill (TTFT): the stages run one after another, so their prefill times add up.

``stage_batch_limit`` is Coral's per-node throughput T(n, l): the largest micro-batch a stage of
``l`` layers on one GPU type can carry under the TPOT SLO and its own KV memory. The pipeline's
micro-batch is the minimum over its stages, which is what ``hetinfra.plan.placement`` maximises.
"""

from __future__ import annotations

from hetinfra.catalog.gpus import GpuSpec
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import CALIBRATION, Calibration
from hetinfra.perf.estimator import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, Estimate, Engine, build_engine, best_point, max_num_batched_tokens_default

__all__ = ["MAX_NUM_SEQS", "estimate_pipeline", "pipeline_batched_tokens", "stage_batch_limit"]


def pipeline_batched_tokens(gpus: list[GpuSpec]) -> int:
    """--max-num-batched-tokens of a mixed pipeline: the smallest stage's serve default. vLLM
    would take the head's; hetinfra passes this value explicitly so every stage agrees."""
    return min(max_num_batched_tokens_default(g) for g in gpus)


class PipelineEngine(Engine):
    """An engine made of per-stage engines; each was built with pp = K so their shared terms agree."""

    __slots__ = ("stages",)

    def __init__(self, stages: list[Engine]):
        head = stages[0]
        for name in ("pp", "isl", "n_dec", "ratio", "mbt", "moe_p", "serial", "p2p_lat", "p2p_tok", "fixed",
                     "per_seq", "per_req", "overlap", "dispatch", "qs", "qcap"):
            setattr(self, name, getattr(head, name))
        self.stages = stages
        self.kv_seqs = min(s.kv_seqs for s in stages)
        self.kv_tokens = min(s.kv_tokens for s in stages)
        self.t_pre = self.prefill(1.0)

    def tpot(self, b: float, prefill: bool = True) -> tuple[float, bool]:
        return max(s.tpot(b, prefill) for s in self.stages)  # K x slowest stage + shared terms

    def step_s(self, prefill_tokens: float, prefill_positions: float, decode_seqs: float, decode_context: float,
               running_seqs: float | None = None) -> float:
        return max(s.step_s(prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs)
                   for s in self.stages)

    def b_tpot(self, slo: float) -> float:
        return min(s.b_tpot(slo) for s in self.stages)

    def prefill(self, n_req: float) -> float:
        tok = n_req * self.isl
        shared = self.dispatch + self.p2p_lat + self.p2p_tok * tok
        # each stage engine counts its own stage pp times: (its prefill - shared) / pp is one stage
        return sum((s.prefill(n_req) - shared) / self.pp for s in self.stages) + shared


def _stage_engines(model: ModelArch, gpus: list[GpuSpec], layers: list[int], tp: int, isl: int, osl: int,
                   precision: str, util: float, max_num_seqs: int, kv_precision: str | None, mbt: int,
                   calib: Calibration) -> list[Engine] | Estimate:
    k = len(gpus)
    out = []
    for s, (gpu, n) in enumerate(zip(gpus, layers)):
        e = build_engine(model, gpu, tp, k, isl, osl, precision, util, max_num_seqs, kv_precision, mbt, calib,
                    stage=(n, s == 0, s == k - 1))
        if isinstance(e, Estimate):
            return e
        out.append(e)
    return out


def pipeline_engine(model: ModelArch, gpus: list[GpuSpec], layers: list[int], *, tp: int, input_tokens: int,
                    output_tokens: int, precision: str = "bf16", gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
                    max_num_seqs: int = MAX_NUM_SEQS, kv_precision: str | None = None,
                    max_num_batched_tokens: int | None = None, calib: Calibration = CALIBRATION) -> Engine | Estimate:
    """The engine of one mixed pipeline (its step model, KV size and token budget), or why it cannot run."""
    mbt = max_num_batched_tokens or pipeline_batched_tokens(gpus)
    stages = _stage_engines(model, gpus, layers, tp, max(int(input_tokens), 1), max(int(output_tokens), 1), precision,
                            gpu_memory_utilization, max_num_seqs, kv_precision, mbt, calib)
    return stages if isinstance(stages, Estimate) else PipelineEngine(stages)


def estimate_pipeline(model: ModelArch, gpus: list[GpuSpec], layers: list[int], *, tp: int, input_tokens: int,
                      output_tokens: int, ttft_ms: float, tpot_ms: float, precision: str = "bf16",
                      gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_seqs: int = MAX_NUM_SEQS,
                      kv_precision: str | None = None, max_num_batched_tokens: int | None = None,
                      calib: Calibration = CALIBRATION) -> Estimate:
    """Largest request rate of one pipeline engine (stage s: ``layers[s]`` layers on ``tp`` GPUs of
    ``gpus[s]``) meeting mean TTFT and TPOT SLOs. The chunked-prefill budget defaults to
    :func:`pipeline_batched_tokens`, the value hetinfra pins on mixed pipelines."""
    if len(gpus) != len(layers) or not gpus:
        raise InvalidInputError(f"a pipeline needs one layer count per stage (got {len(gpus)} GPUs, "
                                f"{len(layers)} layer counts)")
    if sum(layers) != model.layers or min(layers) < 1:
        raise InvalidInputError(f"layer partition {layers} must give every stage >= 1 layer and sum to "
                                f"{model.name}'s {model.layers} layers")
    isl, osl = max(int(input_tokens), 1), max(int(output_tokens), 1)
    mbt = max_num_batched_tokens or pipeline_batched_tokens(gpus)
    stages = _stage_engines(model, gpus, layers, tp, isl, osl, precision, gpu_memory_utilization, max_num_seqs,
                            kv_precision, mbt, calib)
    if isinstance(stages, Estimate):
        return stages
    where = (f"{model.name} on " + "+".join(f"{g.name}[{n}]" for g, n in zip(gpus, layers))
             + f" (tp={tp}, pp={len(gpus)}, {precision})")
    return best_point(PipelineEngine(stages), where, osl, ttft_ms, tpot_ms, max_num_seqs)


def stage_batch_limit(model: ModelArch, gpu: GpuSpec, *, tp: int, stages: int, first: bool, last: bool, layers: int,
                      input_tokens: int, output_tokens: int, tpot_ms: float, precision: str = "bf16",
                      gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_seqs: int = MAX_NUM_SEQS, kv_precision: str | None = None,
                      max_num_batched_tokens: int = 2048, calib: Calibration = CALIBRATION) -> float:
    """Coral's T(n, l): the largest decode micro-batch one stage (``layers`` layers on ``gpu``, at
    the first / last position of a ``stages``-stage pipeline) sustains under the TPOT SLO, its KV
    memory and the step token budget; 0 when the stage cannot hold its layers. Nonincreasing in
    ``layers``: more layers mean more weights, KV and work per step."""
    isl, osl = max(int(input_tokens), 1), max(int(output_tokens), 1)
    e = build_engine(model, gpu, tp, stages, isl, osl, precision, gpu_memory_utilization, max_num_seqs, kv_precision,
                max_num_batched_tokens, calib, stage=(layers, first, last))
    if isinstance(e, Estimate):
        return 0.0
    limits = [e.kv_seqs / stages, max_num_seqs / stages, e.mbt / (1.0 + e.ratio)]
    if osl > 1:
        limits.append(e.b_tpot(tpot_ms * 1e-3))
    return max(0.0, min(limits))

