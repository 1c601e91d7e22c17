"""Public measurements the built-in step model is fitted on and checked against, vendored under
``hetinfra/perf/data`` (sources, commits and licences in data/SOURCES.md):

* ``kernel_rows``: per-step GPU times from aiconfigurator-core's measured kernel database
  (aic_steps.json, tools/aic_steps.py): decode, prefill and mixed prefill+decode steps.
* ``silicon_rows``: end-to-end vLLM runs (closed loop at a fixed concurrency: TTFT and TPOT means)
  that ship with aiconfigurator-core (aic_silicon_vllm.csv, systems/silicon_sample.csv's vLLM rows).
* ``MLPERF``: published MLPerf Inference results of vLLM submissions (server scenario).

Only the standard library here: the tests and the fit tools read these without aiconfigurator.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
    with (DATA / "aic_silicon_vllm.csv").open() as fh:
        for r in csv.DictReader(fh):
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


@dataclass(frozen=True)
class PublishedRate:
    """A published sustained request rate of one setting, per engine, with the SLO it was held to."""
    name: str
    model: str
    gpu: str
    precision: str
    tp: int
    engines: int  # data-parallel engines the published rate is spread over
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    rate: float  # req/s of the whole system
    vllm_version: str
    source: str
    note: str = ""


# MLPerf Inference v5.0, open division, datacenter, Llama-2-70B (99%), server scenario: a vLLM 0.7.3
# submission on 8 x H200 (fp8 weights, TP1 x DP8), 48.36 samples/s within the server latency limits
# (p99 TTFT 2 s, p99 TPOT 200 ms; measured p99 1.86 s / 143 ms; issue 35). The data set is MLPerf's
# OpenOrca subset: 294.45 output tokens per sample (mlcommons/inference language/llama2-70b/README.md,
# commit 00bf834, "Tokens per sample"); inputs at most 1024 tokens, taken at their mean of 684
# (mlcommons.org Llama 2 70B task-force write-up; not re-checked against the data file, which MLCommons
# distributes to members only). Server-scenario latency limits are p99, the estimator's SLOs means:
# the check holds the mean TPOT at the measured p99 (143 ms) and TTFT at 2 s.
MLPERF = (
    PublishedRate("MLPerf Inference v5.0 open, Llama-2-70B server, 8 x H200, vLLM 0.7.3", "llama-2-70b", "H200",
                  "fp8", 1, 8, 684, 294, 2000.0, 143.0, 48.36, "0.7.3",
                  "MLCommons MLPerf Inference v5.0 results (open division), Apache-2.0 results repository "
                  "mlcommons/inference_results_v5.0"),
)
