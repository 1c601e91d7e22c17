"""The step model of one vLLM engine (tp x pp GPUs, one request size): ``build_engine`` turns the GPU and
model facts and the calibration constants into ``Engine``'s per-step coefficients, whose ``step_s``
the simulator replays request by request and whose ``tpot`` / ``ttft`` are the estimator's mean-field
case (hetinfra.perf.estimator has the model's description and the rate search)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetinfra.architecture import tp_problem
from hetinfra.catalog.gpus import GpuSpec, visible_memory_bytes
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError
from hetinfra.perf.calibration import Calibration, for_gpu
from hetinfra.perf.memory import (PRECISION_BYTES, kv_bytes_per_token_per_gpu, max_num_batched_tokens_default,
                                  norm_precision, stage_weight_bytes, weight_bytes_per_gpu)

__all__ = ["Estimate", "Engine", "build_engine", "coefficients", "infeasible"]


@dataclass(frozen=True)
class Estimate:
    feasible: bool
    max_rps: float  # largest request rate (req/s) per replica (one engine of tp*pp GPUs) meeting both SLOs
    batch: int  # concurrent sequences at that rate
    ttft_ms: float  # predicted TTFT at that operating point
    tpot_ms: float  # predicted TPOT at that operating point
    binding: str  # "tpot", "compute", "ttft", "kv_memory", "max_num_seqs", "batched_tokens", or why infeasible
    reason: str | None = None  # human sentence when infeasible
    min_tpot_ms: float = 0.0  # fastest achievable TPOT (batch 1)
    min_ttft_ms: float = 0.0  # fastest achievable TTFT (batch 1, no queueing)


def infeasible(binding: str, reason: str, min_tpot: float = 0.0, min_ttft: float = 0.0) -> Estimate:
    return Estimate(False, 0.0, 0, 0.0, 0.0, binding, reason, min_tpot, min_ttft)


class Engine:
    """Per-call coefficients of one (model, gpu, layout, request size); times in seconds.

    The free variable is ``b``, the decode batch of one micro-batch (pp micro-batches are in flight),
    a real number: it is a mean concurrency of an open system, and integer steps would make the rate
    jump at small batches.
    """

    __slots__ = ("pp", "isl", "n_dec", "ratio", "mbt", "kv_seqs", "w_gpu", "moe_p", "bw", "kv_read", "c_comp", "c_dec",
                 "c_pre", "serial", "ar_lat", "ar_tok", "p2p_lat", "p2p_tok", "fixed", "per_seq", "dispatch", "t_pre",
                 "qs", "qcap", "kv_tok_bw", "c_dlin", "c_dattn", "c_plin", "c_pattn", "kv_tokens", "per_req", "overlap",
                 "gpu_fixed")

    def step_s(self, prefill_tokens: float, prefill_positions: float, decode_seqs: float, decode_context: float,
               running_seqs: float | None = None, admitted_seqs: float | None = None) -> float:
        """Time (s) of one engine step of one micro-batch with an explicit composition: the step-time
        model the simulator replays request by request (``tpot`` is its mean-field special case).

        ``prefill_tokens``: prompt tokens prefilled in this step (chunked prefill); ``prefill_positions``:
        the sum over those tokens of the number of earlier tokens each attends (causal attention; a whole
        prompt of n tokens sums to about n*n/2); ``decode_seqs``: sequences decoding one token;
        ``decode_context``: the sum of their context lengths (KV read and attention); ``running_seqs``:
        sequences the engine holds in all micro-batches (per-sequence scheduler cost; default
        pp x decode_seqs); ``admitted_seqs``: requests whose prefill starts in this step (per-request
        admission cost, ``Calibration.t_per_request_ms``; default prefill_tokens / isl, the mean field).
        With every decode sequence at the estimator's mean context and decode_seqs x ratio prefill
        tokens of mean position isl/2, it equals ``tpot(decode_seqs)``.
        """
        b = decode_seqs
        tok = b + prefill_tokens  # every token of the step routes to its experts (MoE weight traffic)
        w = self.w_gpu * (1.0 - (1.0 - self.moe_p) ** tok) if self.moe_p < 1.0 else self.w_gpu
        mem = w / self.bw + decode_context * self.kv_tok_bw
        comp = (b * self.c_dlin + decode_context * self.c_dattn + prefill_tokens * self.c_plin
                + prefill_positions * self.c_pattn)
        pp, sr = self.pp, self.serial
        seqs = pp * b if running_seqs is None else running_seqs
        adm = prefill_tokens / self.isl if admitted_seqs is None else admitted_seqs
        gpu = (pp * ((mem + sr * comp if mem > comp else comp + sr * mem) + self.ar_lat + self.ar_tok * tok)
               + self.p2p_lat + self.p2p_tok * tok)
        cpu = self.fixed + self.per_seq * seqs + self.per_req * adm
        return gpu + cpu - self.overlap * (cpu if cpu < gpu else gpu)

    def tpot(self, b: float, prefill: bool = True) -> tuple[float, bool]:
        """Step time (= TPOT) at decode micro-batch b, and whether the step is compute-bound.

        Each step also carries b x input/(output-1) prefill tokens: in steady state the prefill of the
        requests that replace finishing ones (mean field of vLLM's chunked prefill), and admits
        b / (output-1) new requests (per-request admission cost)."""
        routed = b * (1.0 + self.ratio) if prefill else b  # tokens of the step, each routed to its experts
        w = self.w_gpu * (1.0 - (1.0 - self.moe_p) ** routed) if self.moe_p < 1.0 else self.w_gpu
        mem = w / self.bw + b * self.kv_read
        if prefill:
            comp = b * self.c_comp
            tok = b * (1.0 + self.ratio)
            adm = b * self.ratio / self.isl
        else:
            comp = b * self.c_dec
            tok = b
            adm = 0.0
        pp, sr = self.pp, self.serial  # max(mem, comp) + serial x min(mem, comp)
        gpu = (pp * ((mem + sr * comp if mem > comp else comp + sr * mem) + self.ar_lat + self.ar_tok * tok)
               + self.p2p_lat + self.p2p_tok * tok)
        cpu = self.fixed + self.per_seq * pp * b + self.per_req * adm  # engine (CPU) side of the step
        return gpu + cpu - self.overlap * (cpu if cpu < gpu else gpu), comp > mem

    def prefill(self, n_req: float) -> float:
        """Time to prefill n_req prompts of ``isl`` tokens in one pass, all stages in sequence: per
        stage the larger of its compute and its weight read (a short prompt reads every weight, an MoE
        prompt the experts its tokens route to) plus the smaller's serial part, its GPU step cost and
        all-reduces."""
        tok = n_req * self.isl
        w = self.w_gpu * (1.0 - (1.0 - self.moe_p) ** tok) if self.moe_p < 1.0 else self.w_gpu
        mem, comp, sr = w / self.bw, tok * self.c_pre, self.serial
        gpu = (mem + sr * comp if mem > comp else comp + sr * mem) + self.gpu_fixed
        return (gpu * self.pp + self.dispatch + self.pp * (self.ar_lat + self.ar_tok * tok)
                + self.p2p_lat + self.p2p_tok * tok)

    def b_tpot(self, slo: float) -> float:
        """Largest b whose step time is <= slo with all weights read (exact for dense models)."""
        pp, r1 = self.pp, 1.0 + self.ratio
        g_slope = pp * self.ar_tok * r1 + self.p2p_tok * r1
        g0 = pp * self.ar_lat + self.p2p_lat
        c0, c_slope = self.fixed, self.per_seq * pp + self.per_req * self.ratio / self.isl
        # GPU time is the larger of two lines in b (memory-bound and compute-bound branches); the step
        # is gpu + cpu - overlap x min(gpu, cpu) = the larger of gpu + (1 - o) cpu and cpu + (1 - o) gpu:
        # the largest of four lines, so b is the smallest of their four solutions
        sr, w, keep = self.serial, self.w_gpu / self.bw, 1.0 - self.overlap
        best = math.inf
        for a, k in ((g0 + pp * w, g_slope + pp * (self.kv_read + sr * self.c_comp)),
                     (g0 + pp * sr * w, g_slope + pp * (self.c_comp + sr * self.kv_read))):
            for a2, k2 in ((a + keep * c0, k + keep * c_slope), (c0 + keep * a, c_slope + keep * k)):
                if k2 > 0.0:
                    got = (slo - a2) / k2
                    if got < best:
                        best = got
                elif a2 > slo:
                    return -math.inf
        return best

    def point(self, b: float) -> tuple[float, float, float, float, bool]:
        """(TPOT, TTFT, total concurrency, req/s, compute-bound) at decode micro-batch b."""
        t, comp = self.tpot(b)
        pp = self.pp
        big_b = pp * b
        rate = big_b / (self.n_dec * t)  # every request spends output-1 steps decoding
        ttft = self.ttft(big_b, t)
        return t, ttft, big_b + rate * ttft, rate, comp

    def ttft(self, big_b: float, t_step: float) -> float:
        """Prefill (queued: aiconfigurator's factor on the running batch) plus the steps its chunks
        ride in."""
        mbt = self.mbt
        chunks = -(-self.isl // max(mbt - int(big_b), mbt // 2))
        q = 1.0 + self.qs * math.log2(big_b) if big_b > 1.0 else 1.0
        return self.t_pre * (q if q < self.qcap else self.qcap) + chunks * t_step


def build_engine(model: ModelArch, gpu: GpuSpec, tp: int, pp: int, isl: int, osl: int, precision: str,
            util: float, max_num_seqs: int, kv_precision: str | None, max_num_batched_tokens: int | None,
            c: Calibration, stage: tuple[int, bool, bool] | None = None, nodes: int | None = None) -> Engine | Estimate:
    """``stage`` = (layers, first, last): the coefficients of that one stage of a pp-stage pipeline
    (hetinfra.perf.pipeline composes them); None: pp identical stages of the default split.
    ``nodes``: how many nodes the pp stages span (consecutive stages share a node; stage-to-stage
    sends inside a node use its NVLink / PCIe, across nodes the network); None: one node per stage."""
    prec = norm_precision(precision)
    unfit = _layout_problem(model, tp, pp, isl, osl, nodes)
    if unfit is not None:
        return unfit
    where = f"{model.name} on {gpu.name} (tp={tp}, pp={pp}, {prec})"

    # ---- memory ----------------------------------------------------------------------------------
    b_w = PRECISION_BYTES[prec]
    if stage is None:
        w_gpu = weight_bytes_per_gpu(model, tp, pp, b_w)
        kv_tok = kv_bytes_per_token_per_gpu(model, tp, kv_precision or "bf16", pp)
    else:
        w_gpu = stage_weight_bytes(model, tp, stage[0], stage[1], stage[2], b_w)
        kv_tok = kv_bytes_per_token_per_gpu(model, tp, kv_precision or "bf16") * stage[0] / model.layers
        where = f"{model.name} stage of {stage[0]} layers on {gpu.name} (tp={tp}, pp={pp}, {prec})"
    mbt = max_num_batched_tokens or max_num_batched_tokens_default(gpu)
    h = model.hidden_size
    reserve = (c.reserve_base_gb * 1e9 + c.activation_bytes_per_token_hidden * mbt * h / tp
               + c.logits_bytes_per_vocab * model.vocab_size * max_num_seqs
               + (c.nccl_gb * 1e9 if tp * pp > 1 else 0.0))
    usable = util * visible_memory_bytes(gpu)
    kv_budget = usable - w_gpu - reserve
    if kv_budget <= 0:
        return infeasible("weights", f"weights need {w_gpu / 1e9:.1f} GB per GPU for {where}, a GPU has "
                                      f"{gpu.memory_gb:g} GB ({usable / 1e9:.1f} GB at gpu_memory_utilization "
                                      f"{util:g}, {reserve / 1e9:.1f} GB of it reserved for activations/graphs)")
    kv_tokens = kv_budget / kv_tok
    kv_seqs = kv_tokens / (isl + c.kv_reservation_fraction * osl)
    if kv_tokens < isl + osl:
        return infeasible("kv_memory", f"KV cache of {where} holds {int(kv_tokens)} tokens after "
                                        f"{w_gpu / 1e9:.1f} GB of weights; one request needs {isl + osl}")

    # ---- per-step coefficients (per stage, per GPU) ------------------------------------------------
    n_dec = osl - 1 if osl > 1 else 1
    e = coefficients(model, gpu, tp, pp, isl, isl + c.ctx_output_fraction * osl, isl / n_dec, prec, kv_tok,
                      w_gpu, c, stage[0] if stage else None, nodes)
    e.n_dec, e.mbt, e.kv_seqs, e.kv_tokens = n_dec, mbt, kv_seqs, kv_tokens  # kv_tokens: KV cache size in tokens
    return e


def _layout_problem(model: ModelArch, tp: int, pp: int, isl: int, osl: int, nodes: int | None) -> Estimate | None:
    """Why the layout or the request size cannot run (None: they can); raises on a malformed layout."""
    if tp < 1 or pp < 1:
        raise InvalidInputError(f"tp and pp must be >= 1 (got tp={tp}, pp={pp})")
    sharding = tp_problem(model.name, model.heads, model.kv_heads, tp)
    if sharding:
        return infeasible("layout", sharding)
    if nodes is not None and (nodes < 1 or nodes > pp or pp % nodes):
        raise InvalidInputError(f"pp={pp} stages cannot be spread evenly over {nodes} node(s)")
    if pp > model.layers:
        return infeasible("layout", f"pp={pp} exceeds {model.name}'s {model.layers} layers")
    if isl + osl > model.max_context:
        return infeasible("context", f"a request of {isl}+{osl} tokens exceeds {model.name}'s max context "
                                      f"{model.max_context}")
    return None


def coefficients(model: ModelArch, gpu: GpuSpec, tp: int, pp: int, isl: int, ctx: float, ratio: float,
                  prec: str, kv_tok: float, w_gpu: float, c: Calibration, stage_layers: int | None = None,
                  nodes: int | None = None) -> Engine:
    """Step-time coefficients of one (model, gpu, layout): ``isl`` = prompt length of a prefill,
    ``ctx`` = tokens a decoding sequence attends, ``ratio`` = prefill tokens riding per decode token.
    No memory checks (``build_engine`` does them); shared by ``estimate`` and the calibration helpers.
    ``nodes``: nodes the pp stages span (None: one node per stage)."""
    c = for_gpu(c, gpu.name)  # the GPU's kernel-fitted constants (calibration.GPU_KERNELS)
    e = Engine()
    e.pp, e.isl, e.w_gpu, e.n_dec, e.mbt, e.kv_seqs, e.kv_tokens = pp, isl, w_gpu, 1, 0, 0.0, 0.0
    ls = model.layers / pp if stage_layers is None else stage_layers  # layers per stage
    _roofline_terms(e, model, gpu, tp, pp, isl, ctx, ratio, prec, kv_tok, c, ls, stage_layers)
    _communication_terms(e, gpu, tp, pp, ls, model.hidden_size, c, nodes)
    _step_overheads(e, model, pp, ls, c)
    e.t_pre = e.prefill(1.0)  # prefill of one request alone, all stages in sequence
    e.qs, e.qcap = c.qf_slope, c.qf_cap
    return e


def _roofline_terms(e: Engine, model: ModelArch, gpu: GpuSpec, tp: int, pp: int, isl: int, ctx: float, ratio: float,
                    prec: str, kv_tok: float, c: Calibration, ls: float, stage_layers: int | None) -> None:
    """``e``'s memory and compute terms (weight and KV reads over the bandwidth, flops over the GEMM and
    attention rates), per stage and per GPU; ``ls``: layers per stage."""
    h = model.hidden_size
    act = model.active
    emb = min(2.0 * model.vocab_size * h, 0.5 * model.params)
    e.moe_p = act / model.params if model.active_params else 1.0
    # GEMMs run at the weights' precision (fp8 at its measured share of the fp8 peak); attention
    # (QK^T, PV) at 16 bit, the KV cache's and activations' dtype
    attn_flops = gpu.bf16_tflops * 1e12
    for name, scale in c.mfu_scale_by_gpu:
        if name == gpu.name:
            attn_flops *= scale
    fp8 = prec == "fp8" and gpu.fp8_tflops
    flops = attn_flops * gpu.fp8_tflops / gpu.bf16_tflops * c.fp8_gemm_scale if fp8 else attn_flops
    moe = c.moe_eff if model.active_params else 1.0  # the expert kernels' efficiency
    flops *= moe
    e.bw = gpu.bandwidth_gbps * 1e9 * c.eta_bw * moe
    split = tp * pp if stage_layers is None else model.layers * tp / stage_layers  # weights' share divisor
    attn = 2.0 * ls * model.heads * model.head_dim / tp  # flops per token per attended token (QK^T or PV)
    f_dec = 2.0 * (act - 0.5 * emb) / split + 2.0 * attn * ctx  # LM head runs; embedding is a lookup
    f_pre = 2.0 * (act - emb) / split + attn * isl  # causal attention: half of 2 x isl
    e.ratio = ratio  # prefill tokens carried per decode token (mean field)
    bw_kv = gpu.bandwidth_gbps * 1e9 * c.eta_kv  # the attention kernel's KV read (per context token)
    e.kv_read = ctx * kv_tok / bw_kv
    mfu_attn = c.mfu_prefill_attn or c.mfu_prefill
    e.c_dec = (f_dec - 2.0 * attn * ctx) / (flops * c.mfu_decode) + 2.0 * attn * ctx / (attn_flops * c.mfu_decode)
    # one prefill token, one stage
    # a prefill token alone (a whole prompt's GEMMs, TTFT) and one riding in a mixed step (its GEMMs
    # shared with the decodes: the mixed steps' rate, which step_s's c_plin also uses)
    pre_flops = flops * c.fp8_prefill_scale if fp8 else flops
    pre_attn = attn * isl / (attn_flops * mfu_attn)
    e.c_pre = (f_pre - attn * isl) / (pre_flops * c.mfu_prefill) + pre_attn
    e.c_comp = e.c_dec + ratio * ((f_pre - attn * isl) / (flops * c.mfu_prefill) + pre_attn)
    # the same terms split per token and per attended token, for ``Engine.step_s``
    e.kv_tok_bw = kv_tok / bw_kv
    e.c_dlin = 2.0 * (act - 0.5 * emb) / split / (flops * c.mfu_decode)
    e.c_dattn = 2.0 * attn / (attn_flops * c.mfu_decode)
    e.c_plin = 2.0 * (act - emb) / split / (flops * c.mfu_prefill)
    e.c_pattn = 2.0 * attn / (attn_flops * mfu_attn)


def _communication_terms(e: Engine, gpu: GpuSpec, tp: int, pp: int, ls: float, h: int, c: Calibration,
                         nodes: int | None) -> None:
    """``e``'s tensor-parallel all-reduces and pipeline stage-to-stage sends (latency, and time per token)."""
    if tp > 1:
        e.ar_lat = 2.0 * ls * (c.allreduce_us_nvlink if gpu.nvlink else c.allreduce_us_pcie) * 1e-6
        link = gpu.intra_node_gbps * 1e9 * (1.0 if gpu.nvlink else c.pcie_allreduce_efficiency
                                            * min(1.0, 2.0 / tp) ** c.pcie_allreduce_tp_decay)
        e.ar_tok = 2.0 * ls * 2.0 * (tp - 1) / tp * h * 2.0 / link  # ring all-reduce of 16-bit activations
    else:
        e.ar_lat = e.ar_tok = 0.0
    if pp > 1:
        # stage-to-stage sends of 16-bit activations: the pipeline's pp stages sit on ``nodes`` nodes
        # (pp / nodes consecutive stages per node), so nodes - 1 boundaries cross the network and
        # pp - nodes stay inside a node, a point-to-point copy over its NVLink or PCIe link
        # (intra_node_gbps; the all-reduce's PCIe efficiency is a collective's overhead, not a copy's)
        hops_net = (nodes if nodes else pp) - 1
        hops_local = pp - 1 - hops_net
        local = gpu.intra_node_gbps * 1e9
        e.p2p_lat = (pp - 1) * c.p2p_us * 1e-6
        e.p2p_tok = hops_net * h * 2.0 / (c.inter_node_gbps * 1e9) + hops_local * h * 2.0 / local
    else:
        e.p2p_lat = e.p2p_tok = 0.0


def _step_overheads(e: Engine, model: ModelArch, pp: int, ls: float, c: Calibration) -> None:
    """``e``'s step costs outside the roofline: serialisation, fixed GPU and CPU time per step, per
    sequence and per request, their overlap, and the prefill's dispatch. Reads ``e.p2p_lat``
    (``_communication_terms``)."""
    e.serial = c.mem_compute_serial
    # GPU time per step of one stage that no roofline term holds (launches, norms); a token's step
    # passes every stage, so the step cost carries pp of them (as the roofline terms are summed)
    e.gpu_fixed = ls * c.t_layer_us * 1e-6
    e.fixed = c.t_fixed_ms * 1e-3 + pp * e.gpu_fixed
    if c.cpu_gpu_overlap > 0.0:
        # an engine whose CPU work overlaps the GPU's must not hide GPU work: the stages' fixed GPU
        # time joins the step's GPU side (p2p_lat, with the stage-to-stage latency; prefill reads it
        # there). Where CPU and GPU time add up (overlap 0) the place is immaterial and stays in
        # ``fixed``, so those engines' figures do not move by a rounding.
        e.p2p_lat += pp * e.gpu_fixed
        e.fixed = c.t_fixed_ms * 1e-3
        e.gpu_fixed = 0.0
    e.per_seq = c.t_per_seq_us * 1e-6
    e.per_req = c.t_per_request_ms * 1e-3
    e.overlap = c.cpu_gpu_overlap
    e.dispatch = model.layers * c.prefill_dispatch_ms_per_layer * 1e-3
