"""Public measurements the built-in step model is fitted on and checked against, vendored under
``hetinfra/perf/data`` (sources, commits and licences in data/SOURCES.md):

* ``kernel_rows``: per-step GPU times from aiconfigurator-core's measured kernel database
  (aic_steps.json, tools/aic_steps.py): decode, prefill and mixed prefill+decode steps.
* ``silicon_rows``: end-to-end vLLM runs (closed loop at a fixed concurrency: TTFT and TPOT means)
  that ship with aiconfigurator-core (aic_silicon_vllm.csv, systems/silicon_sample.csv's vLLM rows).
* ``MLPERF``, ``VLLM_BLOG`` (``PUBLISHED``): published end-to-end rates of vLLM (MLPerf Inference
  submissions' server and offline scenarios; vLLM's own v0.6.0 benchmark), with the procedure and
  engine settings each ran (replayed by ``hetinfra.sim.benchmark_run``).

Only the standard library (and hetinfra.fileio's CSV reader) here: the tests and the fit tools read these
without aiconfigurator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hetinfra.csvtext import csv_records

DATA = Path(__file__).resolve().parent / "data"

# aiconfigurator system / model names -> the catalog's
AIC_SYSTEMS = {"a100_sxm": "A100-80GB", "h100_sxm": "H100", "h200_sxm": "H200", "l40s": "L40S"}
AIC_MODELS = {"Qwen/Qwen3-32B": "qwen3-32b", "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
              "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b", "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b"}


@dataclass(frozen=True)
class KernelRow:
    """One engine step's GPU time (ms) as composed from measured kernels."""
    gpu: str
    model: str
    precision: str
    tp: int
    kind: str  # "decode" | "prefill" | "mixed"
    batch: int  # decoding sequences in the step
    context: int  # tokens each decoding sequence attends; the prompt length of a prefill
    chunk: int  # prompt tokens prefilled in the step
    ms: float


@dataclass(frozen=True)
class SiliconRow:
    """One measured closed-loop vLLM run: ``concurrency`` requests of isl / osl tokens in flight."""
    gpu: str
    model: str
    precision: str
    tp: int
    isl: int
    osl: int
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    vllm_version: str
    label: str
    kv_precision: str = "bf16"

    @property
    def rate(self) -> float:
        """Requests per second the engine sustained (Little's law on the measured latencies)."""
        return self.concurrency / (self.ttft_ms + (self.osl - 1) * self.tpot_ms) * 1e3


@lru_cache(maxsize=1)
def kernel_rows() -> tuple[KernelRow, ...]:
    doc = json.loads((DATA / "aic_steps.json").read_text())
    return tuple(KernelRow(r["gpu"], r["model"], r["precision"], int(r["tp"]), r["kind"], int(r["batch"]),
                           int(r["context"]), int(r["chunk"]), float(r["ms"])) for r in doc["rows"])


def _kv_precision(model_path: str) -> str:
    """NVIDIA's ModelOpt FP8 checkpoints (nvidia/...-FP8) quantise the KV cache to fp8 as well
    (hf_quant_config.json kv_cache_quant_algo FP8), which vLLM follows; the others keep 16 bit."""
    return "fp8" if model_path.startswith("nvidia/") and model_path.endswith("-FP8") else "bf16"


@lru_cache(maxsize=1)
def silicon_rows() -> tuple[SiliconRow, ...]:
    """The dense-attention, TP-only vLLM runs (no attention DP, experts TP-sharded or one GPU)."""
    out = []
    path = DATA / "aic_silicon_vllm.csv"
    for _, r in csv_records(path.read_text(encoding="utf-8"), path.name)[1]:
        if r["pp_size"] != "1" or r["attention_dp_size"] not in ("", "1") or r["moe_ep_size"] not in ("", "0", "1"):
            continue
        tp = int(r["tp_size"])
        out.append(SiliconRow(AIC_SYSTEMS[r["system"]], AIC_MODELS[r["model_path"]],
                              "fp8" if r["gemm_quant_mode"] == "fp8" else "bf16", tp, int(r["isl"]),
                              int(r["osl"]), int(r["batch_size"]), float(r["silicon_ttft_ms"]),
                              float(r["silicon_tpot_ms"]), r["backend_version"] or "unstated",
                              f"{r['model_path']} {r['system']} tp{tp} {r['isl']}/{r['osl']} c{r['batch_size']}",
                              _kv_precision(r["model_path"])))
    return tuple(out)


#: per-sample (input, output) token lengths of a benchmark's data set, vendored in data/ (SOURCES.md):
#: MLPerf's OpenOrca samples; ShareGPT's conversation first turns under vLLM's benchmark filter
#: (tools/sharegpt_lengths.py; Llama 2 tokens)
SIZE_TABLES = {"openorca": "mlperf_llama2_70b_lengths.csv", "sharegpt": "sharegpt_first_turns_llama2.csv"}


@lru_cache(maxsize=None)
def size_table(name: str) -> tuple[tuple[int, int], ...]:
    """The (input, output) lengths of every sample of a data set (``SIZE_TABLES``)."""
    path = DATA / SIZE_TABLES[name]
    return tuple((int(r["input_length"]), int(r["output_length"]))
                 for _, r in csv_records(path.read_text(encoding="utf-8"), path.name)[1])


@dataclass(frozen=True)
class PublishedRate:
    """A published request rate of one setting, with the engine settings it ran, the mean latencies it
    was measured at and the benchmark's procedure. The check replays the procedure on the simulator
    (``hetinfra.sim.benchmark_run``): ``procedure`` "burst" (``requests`` sent at once, timed to the last
    reply) or "server" (MLPerf: Poisson arrivals for ``duration_s``, p99 TTFT / TPOT limits), under
    ``scheduler`` "v0" (vLLM 0.6-0.7 without chunked prefill) or "v1". ``mode`` says what the
    estimator's mean-field figure for the run is (the planner's second source,
    ``e2e_checks.layout_factors``): "slo" (its largest rate holding the run's mean TTFT and TPOT),
    "saturated" (its rate with ``max_num_seqs`` sequences in flight) or "" (none: a KV-bound burst
    with preemption is the simulator's alone)."""
    name: str
    model: str
    gpu: str
    precision: str
    tp: int
    engines: int  # data-parallel engines the published rate is spread over
    isl: int  # mean input tokens per request
    osl: int  # mean output tokens per request
    ttft_ms: float  # the run's mean TTFT ("slo" checks hold it)
    tpot_ms: float  # the run's mean TPOT
    rate: float  # req/s of the whole system
    vllm_version: str
    source: str
    note: str = ""
    mode: str = "slo"
    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    procedure: str = "burst"
    requests: int = 500  # "burst": requests sent at once (all engines together)
    scheduler: str = "v0"
    duration_s: float = 600.0  # "server": the run's length (MLPerf's minimum duration)
    ttft_p99_ms: float = 0.0  # "server": the scenario's limits
    tpot_p99_ms: float = 0.0
    sizes: str = ""  # the data set's per-sample (input, output) lengths (a SIZE_TABLES key; "": the means)
    kv_precision: str | None = None
    # how the benchmark drew its requests from ``sizes``: "loadgen" (MLPerf: with replacement, inputs in
    # the run's model's tokens, ``input_scale``, outputs scaled to ``osl``) or "vllm" (benchmark_serving.py: a sample without replacement,
    # inputs and outputs scaled to the run's means ``isl`` / ``osl``: the table's tokenizer and sample differ)
    sampler: str = "loadgen"
    draws: int = 1  # independent draws replayed ("burst"): the rate is their median (an unknown sample)
    # "loadgen": the run's model's tokens per token of ``sizes``' table (its tokenizer's: a Llama 3 model
    # on MLPerf's Llama 2 lengths, LLAMA3_PER_LLAMA2_TOKEN); ``isl`` is the table's mean times this
    input_scale: float = 1.0
    scheduler_steps: int = 1  # vLLM V0's --num-scheduler-steps (multi-step decoding; "burst" only)

    def __post_init__(self):
        # multi-step decoding is replayed for V0 bursts only (benchmark_run.multi_step_outputs)
        if self.scheduler_steps > 1 and (self.procedure, self.scheduler) != ("burst", "v0"):
            raise ValueError(f"{self.name}: scheduler_steps > 1 is replayed for V0 bursts only")


# MLPerf Inference v5.0, open division, datacenter, Llama-2-70B (99%): Krai's vLLM submissions on 8 x H200
# (xd670_h200_x8_vllm_073 with vLLM 0.7.3, xd670_h200_x8_vllm_064 with vLLM 0.6.4; llama2-70b-fp8_dyn):
# fp8 weights quantised at load (quantization=fp8, 16-bit KV cache), TP1 x DP8, gpu_memory_utilization
# 0.95; server: max_num_seqs 256, max_num_batched_tokens 16384; offline: max_num_seqs 1024,
# max_num_batched_tokens 8192 (measurements/<system>/llama2-70b-fp8_dyn/<scenario>/README.md). Both
# versions run the V0 engine (V1 became the default in 0.8) without chunked prefill (on by default
# only above 32K context; Llama-2 has 4K). Figures (results/.../performance/run_1/mlperf_log_summary.txt):
# * 0.7.3 server: 48.36 completed samples/s (scheduled 50.03, target 50), 14426.38 tokens/s (298 per
#   sample), mean TTFT 433 ms / TPOT 127.3 ms, p99 1.86 s / 143 ms within the 2 s / 200 ms limits;
# * 0.6.4 server: 46.48 completed samples/s (scheduled 48.02), 13716.75 tokens/s (295 per sample),
#   mean TTFT 344 ms / TPOT 122.8 ms, p99 0.71 s / 139 ms;
# * 0.7.3 offline: 54.74 samples/s, 16229 tokens/s (296 per sample); 0.6.4 offline: 53.65 samples/s,
#   15906.1 tokens/s (297 per sample); 39,600 samples issued at once (samples_per_query).
# Results repository mlcommons/inference_results_v5.0 (Apache-2.0; read at the mirror
# ntuhpc/mlperf_inference_results_v5.0, commit cf354115). Inputs: the benchmark's data set (24,576 OpenOrca
# samples, open_orca_gpt4_tokenized_llama.sampled_24576.pkl, mlcommons/inference language/llama2-70b/README.md)
# has a mean of 222.3 input tokens per sample (median 152, max 1021) and reference outputs of 218.9 (max
# 1016): the per-sample lengths published in openshift-psap/performance-dashboard
# mlperf-data/summaries/llama2-70b-99.csv (Apache-2.0, commit 7cd1065), extracted from MLCommons' pickle
# and vendored as data/mlperf_llama2_70b_lengths.csv; the replay draws samples from it, their outputs
# scaled to the run's tokens per sample (the model wrote about 1.35x the reference's). Estimator-v3's
# first check assumed 684 input tokens.
# MLPerf Inference v6.0, open division: Krai's h200_n1-vllm (HPE Cray XD670, 8 x H200-SXM-141GB, vLLM
# v0.15.0-dev: vllm/vllm-openai:nightly-d88a1df6, the V1 engine with chunked prefill), Llama 3.1 70B
# quantised at load (llama3_1-70b-fp8_dyn) on the llama2-70b task's data set, TP1 x DP8,
# gpu_memory_utilization 0.95 (results/h200_n1-vllm/llama3_1-70b-fp8_dyn/<scenario>/README.md):
# * server: max_num_seqs 858, max_num_batched_tokens 36498; 83.25 completed samples/s (scheduled 85.33,
#   target 85), 24821.60 tokens/s (298 per sample), mean TTFT 441 ms / TPOT 114.2 ms, p99 0.68 s / 141 ms;
# * offline: max_num_seqs 1232, max_num_batched_tokens 8121; 86.99 samples/s, 25939.8 tokens/s (298 per
#   sample), 66,000 samples issued at once.
# Results repository mlcommons/inference_results_v6.0 (Apache-2.0; read at the mirror
# gbeezybez/inference_results_v6.0, commit ab33b214). The inputs are the same OpenOrca samples, tokenised by
# Llama 3's tokenizer: the Llama 2 lengths scaled by LLAMA3_PER_LLAMA2_TOKEN (its counts are not published). V1's
# default prefix caching is not replayed (LoadGen issues whole permutations of the samples, so repeats
# come long after their blocks are reused; the shared system prompts are a block or two). A newer engine
# than the shipped constants describe: checks only, not the planner's second source (``mode`` "").
#: Llama 3's tokens per Llama 2 token on English text: "The Llama 3 Herd of Models" (Meta, 2024, section 3.2):
#: its 128K-token vocabulary "improves compression rates on a sample of English data from 3.17 to 3.94
#: characters per token" against Llama 2's. Krai's harness tokenises the OpenOrca texts with the model
#: family's own tokenizer (src/llama3_1-70b-fp8_dyn/llama2_using_openai_loadgen/README.md: "hf_tokeniser,
#: model_family=..."), whose counts are not published: the vendored Llama 2 lengths scaled by this ratio
#: (an estimate on English; replayed at the Llama 2 counts the v6.0 server run read -18.7%, at these -11.8%).
LLAMA3_PER_LLAMA2_TOKEN = 3.17 / 3.94
_MLPERF_SOURCE = ("MLCommons MLPerf Inference v{} results (open division, Krai {}), Apache-2.0 results repository "
                  "mlcommons/inference_results_v{}")


def _mlperf(version: str, scenario: str, rate: float, osl: int, ttft_ms: float = 0.0, tpot_ms: float = 0.0,
            **engine) -> PublishedRate:
    """One of Krai's fp8 runs on 8 GPUs with vLLM ``version``: v5.0's Llama-2-70B on 8 x H200 (TP1 x DP8,
    gpu_memory_utilization 0.95) on the V0 engine unless ``engine`` says otherwise (model, system, round,
    gpu, tp, max_num_seqs, max_num_batched_tokens, gpu_memory_utilization, requests, scheduler)."""
    server = scenario == "server"
    model = engine.pop("model", "llama-2-70b")
    system = engine.pop("system", f"xd670_h200_x8_vllm_{version.replace('.', '')}")
    round_ = engine.pop("round", "5.0")
    gpu, tp = engine.pop("gpu", "H200"), engine.pop("tp", 1)
    engine.setdefault("gpu_memory_utilization", 0.95)
    kw = dict(mode="slo" if server else "", max_num_seqs=256 if server else 1024,
              max_num_batched_tokens=16384 if server else 8192, requests=39600)
    kw.update(engine)
    title = {"llama-2-70b": "Llama-2-70B", "llama-3.1-70b": "Llama-3.1-70B"}[model]
    where = f"8 x {gpu}" + (f" (TP{tp})" if tp > 1 else "")
    scale = LLAMA3_PER_LLAMA2_TOKEN if model.startswith("llama-3") else 1.0  # the data set's table is Llama 2's
    kw["input_scale"] = scale
    return PublishedRate(f"MLPerf Inference v{round_} open, {title} {scenario}, {where}, vLLM {version}", model,
                         gpu, "fp8", tp, 8 // tp, round(222 * scale), osl, ttft_ms, tpot_ms, rate, version,
                         _MLPERF_SOURCE.format(round_, system, round_), procedure=scenario if server else "burst",
                         ttft_p99_ms=2000.0, tpot_p99_ms=200.0, sizes="openorca", **kw)


_V6 = dict(model="llama-3.1-70b", system="h200_n1-vllm", round="6.0", scheduler="v1", mode="")
MLPERF = (
    _mlperf("0.7.3", "server", 48.36, 298, 432.9, 127.3),
    _mlperf("0.6.4", "server", 46.48, 295, 344.0, 122.8),
    _mlperf("0.7.3", "offline", 54.74, 296),
    _mlperf("0.6.4", "offline", 53.65, 297),
    _mlperf("0.15.0-dev", "server", 83.25, 298, 440.7, 114.2, max_num_seqs=858, max_num_batched_tokens=36498, **_V6),
    _mlperf("0.15.0-dev", "offline", 86.99, 298, max_num_seqs=1232, max_num_batched_tokens=8121, requests=66000, **_V6),
)

# MLPerf Inference v5.1, open division: Krai's runs of Llama 3.1 70B quantised at load (llama3_1-70b-fp8_dyn) on
# the llama2-70b task's data set with vLLM 0.9.2 (the vllm/vllm-openai:v0.9.2 image: the V1 engine with chunked
# prefill, before asynchronous scheduling: the default engine's family), driven through vLLM's OpenAI server as
# the v6.0 runs were (Krai's code/llama3_1-70b-fp8_dyn/llama2_using_openai_loadgen, framework=openai: the same
# front end, detokenising, as the measured runs the engine's costs are fitted on). Settings from
# measurements/<system>/llama3_1-70b-fp8_dyn/<scenario>/README.md, figures from
# results/<system>/llama3_1-70b-fp8_dyn/<scenario>/performance/run_1/mlperf_log_summary.txt:
# * xd670_h200_x8_vllm_092 (8 x H200, TP1 x DP8, gpu_memory_utilization 0.95): server (max_num_seqs 858,
#   max_num_batched_tokens 36498) 90.89 completed samples/s (scheduled 93.45), mean TTFT 276.2 ms / TPOT
#   109.6 ms, 298 tokens per sample; offline (1232 / 8121) 104.369 samples/s, 66,000 samples at once;
# * xe9680_h100_x8_vllm_092 (8 x H100-SXM, TP2 x DP4, gpu_memory_utilization 0.9): server (2476 / 12140) 72.97
#   completed samples/s (scheduled 75.48), 21433.25 tokens/s (294 per sample), mean TTFT 300.6 ms / TPOT 105.8
#   ms; offline (3264 / 14768) 77.6951 samples/s, 22819.6 tokens/s, 66,000 samples at once.
# Results repository mlcommons/inference_results_v5.1 (Apache-2.0; read at the mirror
# ntuhpc/inference_results_v5.1, commit a634ab77). They are measured runs of the current engine at 350-600
# sequences per engine (Little's law on the server runs' means: ~370 on an H200, ~570 on an H100 pair), where
# the step model reads 38-48% slow (docs/calibration.md, "The current engine at 350-600 sequences"). Not checks
# yet (not in PUBLISHED): tracked by tests/perf/test_published.py and tools/fit_large_batch.py.
_V51 = dict(model="llama-3.1-70b", round="5.1", scheduler="v1", mode="")
_H200_092 = dict(_V51, system="xd670_h200_x8_vllm_092")
_H100_092 = dict(_V51, system="xe9680_h100_x8_vllm_092", gpu="H100", tp=2, gpu_memory_utilization=0.9)
PENDING = (
    _mlperf("0.9.2", "server", 90.89, 298, 276.2, 109.6, max_num_seqs=858, max_num_batched_tokens=36498, **_H200_092),
    _mlperf("0.9.2", "offline", 104.37, 298, max_num_seqs=1232, max_num_batched_tokens=8121, requests=66000,
            **_H200_092),
    _mlperf("0.9.2", "server", 72.97, 294, 300.6, 105.8, max_num_seqs=2476, max_num_batched_tokens=12140, **_H100_092),
    _mlperf("0.9.2", "offline", 77.70, 294, max_num_seqs=3264, max_num_batched_tokens=14768, requests=66000,
            **_H100_092),
)

# vLLM's own published benchmark: "vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction"
# (blog.vllm.ai 2024-09-05; vllm-project/vllm-project.github.io _posts/2024-09-05-perf-update.md and
# assets/figures/perf-v060/overall_throughput.png, commit c3a01c4; vLLM is Apache-2.0). ShareGPT, 500
# prompts "randomly sampled from ShareGPT dataset with fixed random seed" sent at once (QPS inf), 202 input
# / 179 output tokens on average (the post's text), Llama 3 8B on 1 x H100 and 70B on 4 x H100 (TP4),
# bf16, vLLM 0.6.0 with --num-scheduler-steps 10 and its default max_num_seqs 256; the rates are read off
# the published bar chart (+-0.5 req/s). Llama 3's 8K context leaves chunked prefill off (vLLM 0.6.0
# turned it on by default only above 32K, vllm-project/vllm#6666), so the V0 scheduler prefills in steps
# of their own, with its default budget max(max_model_len, 2048) = 8192 tokens. Sizes: the post publishes
# only the means; benchmark_serving.py samples ShareGPT's conversation first turns (prompt, reply) under
# its filter (tools/sharegpt_lengths.py). The per-request lengths public here (Microsoft's ShareGPT trace,
# Llama 2 tokens) give those first turns means of 136 / 472 tokens, not the post's 202 / 179 (another
# tokenizer: Llama 3's needs about 20% fewer on English, 3.94 characters per token against 3.17, "The
# Llama 3 Herd of Models"; another ShareGPT cut; replies that
# end at the model's EOS): the replay keeps the trace's shape at the post's means (``sampler`` "vllm"),
# and takes the median of 8 draws of 500, the seed's sample being unknown. Multi-step decoding
# (``scheduler_steps`` 10) is replayed as benchmark_run.multi_step_outputs states. The post's
# decode-heavy and prefill-heavy sonnet workloads are not checks: their output lengths are caps the base
# model need not reach (the published rates are inconsistent with 256 sequences at the charted TPOT and
# the stated 256 output tokens), so the tokens generated are not known.
def _blog(name: str, model: str, gpu: str, tp: int, rate_rps: float) -> PublishedRate:
    """One bar of the vLLM v0.6.0 blog post's ShareGPT charts (202/179 mean tokens, all 500 requests
    sent at once, bf16, max_num_seqs 256, V0 without chunked prefill, 8192-token prefill budget,
    --num-scheduler-steps 10)."""
    return PublishedRate(name, model, gpu, "bf16", tp, 1, 202, 179, 0.0, 0.0, rate_rps, "0.6.0",
                         "blog.vllm.ai/2024/09/05/perf-update.html (vllm-project/vllm-project.github.io "
                         "c3a01c4), Apache-2.0", mode="saturated", max_num_batched_tokens=8192,
                         sizes="sharegpt", sampler="vllm", draws=8, scheduler_steps=10)


VLLM_BLOG = (
    _blog("vLLM v0.6.0 blog, Llama 3 8B ShareGPT, 1 x H100", "llama-3.1-8b", "H100", 1, 37.0),
    _blog("vLLM v0.6.0 blog, Llama 3 70B ShareGPT, 4 x H100", "llama-3.1-70b", "H100", 4, 17.3),
    # the post's appendix, same settings on A100 (A100_8B.png, A100_70B.png; the A100-80GB SXM parts of
    # vLLM's benchmark machines: 70B bf16 does not leave room for 256 sequences on 4 x 40 GB)
    _blog("vLLM v0.6.0 blog, Llama 3 8B ShareGPT, 1 x A100", "llama-3.1-8b", "A100-80GB", 1, 19.0),
    _blog("vLLM v0.6.0 blog, Llama 3 70B ShareGPT, 4 x A100", "llama-3.1-70b", "A100-80GB", 4, 8.55),
)

PUBLISHED = MLPERF + VLLM_BLOG
