#!/usr/bin/env python3
"""Fit the analytical estimator's constants (hetinfra/perf/calibration.py) to measured data, and
report the error per data set.

    .venv/bin/python tools/fit_calibration.py            # error table of the shipped constants (<1 s)
    .venv/bin/python tools/fit_calibration.py --fit      # coordinate search (~25 s), table of the fit
    .venv/bin/python tools/fit_calibration.py --fit --write   # ... and rewrite calibration.py's values
    .venv/bin/python tools/fit_calibration.py --planner-only  # also: no engine profiles (see ENGINES)
    .venv/bin/python tools/fit_calibration.py --melange  # also: Melange max-rate cross-check (not fitted)
    .venv/bin/python tools/fit_calibration.py --rows     # also list every row (measured vs predicted)

Data sets (../shared/data and ../shared/notes, read-only; see docs/calibration.md for the method):

* helix      Helix-ASPLOS25 per-layer profiles (one transformer layer, vLLM-based engine): decode-step
             time vs decode batch and prefill time vs prompt tokens for Llama-2-70B and LLaMA-30B on
             A100-40GB, V100, L4, T4 and TP2/TP4 PCIe machines (L4x2, T4x2, T4x4). Compared as
             layers x per-layer time against the estimator's GPU time (``overheads=False``: a layer
             profile holds no scheduler / sampler / dispatch cost).
* splitwise  splitwise-sim perf_model.csv: Llama-2-70B TP2/4/8 and BLOOM-176B TP8 on A100-80GB / H100
             (measured token_time = TPOT at a batch, prompt_time = prefill of batch x prompt).
* sageserve  SageServe Llama-3.1-8B / Llama-3.2-3B TP2/TP4 on A100-80GB, taken as the PCIe part (TPOT;
             prefill at batch 1).
* vllm_md    the measured closed-loop vLLM points of vllm.md s3 (aiconfigurator silicon_sample.csv rows
             and NVIDIA NIM Llama-3.3-70B), TPOT and TTFT at fixed concurrency via ``operating_point``.

Held-out rows (never used by the search) are chosen per data set so that they test transfer, not
interpolation: a whole model or GPU / layout the fit never sees (see ``held_out`` in each loader).

Objective of ``--fit``: per data set, the median absolute relative error of each quantity (TPOT-like
quantities weight 1, prefill / TTFT 0.5) plus 0.1 x the mean |log error| (keeps the tails in check),
averaged over data sets with equal weight. Only fit rows enter it. eta_bw is not searched (see
calibration.py).

Not used: aibrix (a CPU simulator's output, not GPU measurements), vidur (a price table only),
splitwise's power-capped H100 rows; Mélange is a cross-check of max rates only (``--melange``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hetinfra.catalog.gpus import GPUS, GpuSpec  # noqa: E402
from hetinfra.catalog.models import MODELS, ModelArch  # noqa: E402
from hetinfra.perf.calibration import CALIBRATION, Calibration  # noqa: E402
from hetinfra.perf.calibration import LEGACY_V0_2  # noqa: E402
from hetinfra.perf.confidence import REGIMES, regime_of  # noqa: E402
from hetinfra.perf.estimator import Estimate, decode_step_ms, estimate, operating_point, prefill_ms  # noqa: E402

SHARED = REPO.parent / "shared"
CALIBRATION_PY = REPO / "hetinfra" / "perf" / "calibration.py"
TABLES_PY = REPO / "hetinfra" / "perf" / "calibration_tables.py"  # COVERAGE and RESIDUALS
TARGET = 0.25  # acceptance: median |error| of each data set's TPOT-like quantity, fit and held-out rows

# Models of the data sets that the catalog does not carry (HF config.json facts).
LOCAL_MODELS = {
    # huggyllama/llama-30b config.json: 60 layers, h 6656, 52 heads (MHA), I 17920, vocab 32000 -> 32.5e9.
    "llama-1-30b": ModelArch("llama-1-30b", 60, 6656, 52, 52, 128, 32.5e9, None, 32000, 2048),
    # meta-llama/Llama-3.2-3B config.json: 28 layers, h 3072, 24/8 heads, head_dim 128, I 8192,
    # vocab 128256 (tied embeddings) -> 3.21e9.
    "llama-3.2-3b": ModelArch("llama-3.2-3b", 28, 3072, 24, 8, 128, 3.21e9, None, 128256, 131072),
    # bigscience/bloom config.json: 70 layers, h 14336, 112 heads (MHA, ALiBi), vocab 250880 -> 176.2e9.
    "bloom-176b": ModelArch("bloom-176b", 70, 14336, 112, 112, 128, 176.2e9, None, 250880, 2048),
}


def _model(name: str) -> ModelArch:
    return MODELS.get(name) or LOCAL_MODELS[name]


@dataclass(frozen=True)
class Row:
    dataset: str
    quantity: str  # what is compared, e.g. "TPOT", "decode step", "prefill", "TTFT"
    measured_ms: float
    held_out: bool
    model: ModelArch
    gpu: GpuSpec
    tp: int
    precision: str
    kind: str  # "step" | "prefill" | "closed_tpot" | "closed_ttft"
    batch: float = 1.0
    context: float = 0.0  # tokens each decoding sequence attends (step rows)
    tokens: int = 0  # prompt length (prefill rows); input length (closed-loop rows)
    overheads: bool = True  # engine step / dispatch costs included in the measurement
    osl: int = 0
    conc: float = 0.0
    label: str = ""
    engine: str = "vllm"  # whose step / all-reduce overheads the measurement carries (ENGINES)
    slo: tuple[float, float] = (0.0, 0.0)  # (TTFT ms, TPOT ms) of a max-rate row
    kv_precision: str | None = None  # the KV cache's dtype where the run quantised it


# ---- data sets -------------------------------------------------------------------------------------

# Helix: the profile CSVs do not record the context of the decode batch. Assumed: the average request
# of the Helix simulator (simulator/event_simulator/utils.py AVG_INPUT_LEN 750, AVG_OUTPUT_LEN 240):
# 750 + 240/2 tokens attended; prompts in a prefill batch are 750 tokens long.
HELIX_CONTEXT = 750 + 120
HELIX_PROMPT = 750
HELIX_MACHINES = {"a100": ("A100", 1), "v100": ("V100", 1), "l4": ("L4", 1), "l4x2": ("L4", 2),
                  "t4": ("T4", 1), "t4x2": ("T4", 2), "t4x4": ("T4", 4)}
HELIX_MODELS = {"llama2_70b": "llama-2-70b", "llama1_30b": "llama-1-30b"}


def load_helix(shared: Path) -> list[Row]:
    """Held out: every LLaMA-30B row (a model the fit never sees) and every V100 row (a GPU it never
    sees, one with no per-GPU factor)."""
    d = shared / "data" / "Helix-ASPLOS25" / "profiles"
    rows = []
    for f in sorted(d.glob("*_bs2time.csv")):
        mname, machine, phase = f.name.removesuffix("_bs2time.csv").split("__")
        model = _model(HELIX_MODELS[mname])
        gname, tp = HELIX_MACHINES[machine]
        held = mname == "llama1_30b" or gname == "V100"
        with f.open() as fh:
            for x, ms in csv.reader(fh):
                x, ms = int(x), float(ms)
                if x <= 0:
                    continue
                common = dict(dataset="helix", measured_ms=ms * model.layers, held_out=held, model=model,
                              gpu=GPUS[gname], tp=tp, precision="fp16", overheads=False,
                              label=f"{mname} {machine} {phase} {x}")
                if phase == "decode":
                    rows.append(Row(quantity="decode step", kind="step", batch=x, context=HELIX_CONTEXT, **common))
                else:
                    n = min(x, HELIX_PROMPT)
                    rows.append(Row(quantity="prefill", kind="prefill", tokens=n, batch=x / n, **common))
    return rows


SPLITWISE_GPUS = {"a100-80gb": "A100-80GB", "h100-80gb": "H100"}  # h100-80gb-pcap (power-capped) left out


def _median_rows(path: Path, keys: tuple[str, ...], values: tuple[str, ...]) -> list[dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    with path.open() as fh:
        for r in csv.DictReader(fh):
            groups[tuple(r[k] for k in keys)].append(r)
    out = []
    for k, rs in sorted(groups.items()):
        row = dict(zip(keys, k))
        for v in values:
            row[v] = statistics.median(float(r[v]) for r in rs)
        out.append(row)
    return out


def load_splitwise(shared: Path) -> list[Row]:
    """Repeated measurements of one configuration are reduced to their median. Held out: every
    BLOOM-176B row (another model) and every Llama-2-70B TP4 row (a TP degree the fit never sees)."""
    keys = ("model", "hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size")
    rows = []
    for r in _median_rows(shared / "data" / "splitwise-sim" / "perf_model.csv", keys,
                          ("prompt_time", "token_time", "e2e_time")):
        if r["hardware"] not in SPLITWISE_GPUS:
            continue
        model = _model("llama-2-70b" if r["model"] == "llama2-70b" else "bloom-176b")
        tp, p, b, t = (int(r[k]) for k in keys[2:])
        held = r["model"] == "bloom-176b" or tp == 4
        n_out = (r["e2e_time"] - r["prompt_time"]) / r["token_time"]  # tokens actually generated
        common = dict(dataset="splitwise", held_out=held, model=model, gpu=GPUS[SPLITWISE_GPUS[r["hardware"]]],
                      tp=tp, precision="fp16", engine="splitwise-2023",
                      label=f"{r['model']} {r['hardware']} tp{tp} p{p} b{b} t{t}")
        rows.append(Row(quantity="TPOT", measured_ms=r["token_time"], kind="step", batch=b, context=p + n_out / 2,
                        **common))
        if t == 128:  # prompt_time does not depend on the output length: one row per (prompt, batch)
            rows.append(Row(quantity="prefill", measured_ms=r["prompt_time"], kind="prefill", tokens=p, batch=b,
                            **common))
    return rows


SAGESERVE_FILES = {"Llama-3.1-8B": "llama-3.1-8b", "Llama-3.2-3B": "llama-3.2-3b"}
# The tables say "a100-80gb", but their TP4 prefills are SLOWER than TP2 at every prompt >= 512 tokens
# and TP4 decodes barely faster: no NVLink. SageServe is Azure work, whose A100 80GB VMs without
# NVLink are NC A100 v4 (PCIe cards): vllm.md s4 A100-80G PCIe, 1,935 GB/s, PCIe4 (32 GB/s).
A100_PCIE = dataclasses.replace(GPUS["A100-80GB"], name="A100-80GB-PCIe", bandwidth_gbps=1935, nvlink=False,
                                intra_node_gbps=32)


def load_sageserve(shared: Path) -> list[Row]:
    """Times are seconds; TPOT = token_time / token_size. prompt_time is used at batch 1 only: at
    batch 2..32 it stays at ~2x the batch-1 value (not a batch prefill). Held out: every
    Llama-3.2-3B row (another model)."""
    keys = ("prompt_size", "batch_size", "token_size")
    rows = []
    d = shared / "data" / "SageServe"
    for f in sorted(d.glob("*-tp-*.csv")):
        mname, tp = re.fullmatch(r"(.+)-tp-(\d+)\.csv", f.name).groups()
        model, tp = _model(SAGESERVE_FILES[mname]), int(tp)
        held = mname == "Llama-3.2-3B"
        for r in _median_rows(f, keys, ("prompt_time", "token_time")):
            p, b, t = (int(r[k]) for k in keys)
            common = dict(dataset="sageserve", held_out=held, model=model, gpu=A100_PCIE, tp=tp,
                          precision="bf16", engine="sageserve-2024", label=f"{mname} tp{tp} p{p} b{b} t{t}")
            rows.append(Row(quantity="TPOT", measured_ms=r["token_time"] / t * 1e3, kind="step", batch=b,
                            context=p + t / 2, **common))
            if b == 1 and t == 128:
                rows.append(Row(quantity="prefill", measured_ms=r["prompt_time"] * 1e3, kind="prefill", tokens=p,
                                **common))
    return rows


# vllm.md s3 (transcribed; the file is prose): gpu, model, precision, tp, isl, osl, concurrency, TTFT, TPOT.
# Left out: the two saturated points (Qwen3-32B TP2 4096/128 c128, TTFT 18,957 ms; NIM c100, TTFT 7,996
# ms) whose requests queue beyond the KV / batch capacity, which a fixed-concurrency mean-field point
# does not model. The 23 others are the previous hand fit's set.
VLLM_MD = [
    ("H100", "qwen3-32b", "bf16", 2, 1024, 1024, 8, 154, 15.9),
    ("H100", "qwen3-32b", "bf16", 2, 1024, 1024, 32, 237, 20.1),
    ("H100", "qwen3-32b", "bf16", 2, 1024, 1024, 128, 652, 37.8),
    ("H100", "qwen3-32b", "bf16", 4, 1024, 1024, 8, 130, 10.6),
    ("H100", "qwen3-32b", "bf16", 4, 1024, 1024, 128, 413, 25.6),
    ("H100", "qwen3-32b", "bf16", 8, 4096, 1024, 8, 285, 8.6),
    ("H100", "qwen3-32b", "bf16", 8, 4096, 1024, 128, 889, 30.8),
    ("H100", "llama-3.1-70b", "fp8", 2, 1024, 1024, 4, 121, 17.4),
    ("H100", "llama-3.1-70b", "fp8", 2, 1024, 1024, 64, 415, 28.8),
    ("H100", "llama-3.1-70b", "fp8", 4, 8192, 1024, 4, 453, 13.3),
    ("H100", "llama-3.1-70b", "fp8", 4, 8192, 1024, 64, 1745, 53.5),
    ("H100", "llama-3.1-70b", "fp8", 8, 1024, 1024, 4, 70, 9.1),
    ("H100", "llama-3.1-70b", "fp8", 8, 1024, 1024, 64, 185, 15.5),
    ("H200", "llama-3.1-70b", "fp8", 1, 1024, 1024, 4, 203, 21.5),
    ("H200", "llama-3.1-70b", "fp8", 1, 1024, 1024, 32, 466, 33.2),
    ("H200", "llama-3.1-70b", "fp8", 1, 8192, 1024, 4, 1345, 26.1),
    ("H200", "llama-3.1-70b", "fp8", 1, 8192, 1024, 32, 3132, 75.7),
    ("H200", "llama-3.1-8b", "fp8", 1, 4000, 1000, 128, 115, 22.0),
    ("H200", "llama-3.1-8b", "fp8", 1, 1000, 100, 112, 72, 11.3),
    ("H100", "llama-3.3-70b", "fp8", 2, 5000, 500, 1, 406.8, 18.58),
    ("H100", "llama-3.3-70b", "fp8", 2, 5000, 500, 5, 546.7, 21.8),
    ("H100", "llama-3.3-70b", "fp8", 2, 5000, 500, 25, 688.7, 38.8),
    ("H100", "llama-3.3-70b", "fp8", 2, 5000, 500, 50, 834.5, 59.7),
]


def load_vllm_md(shared: Path) -> list[Row]:
    """Held out: every H200 row (a GPU the fit never sees)."""
    if not (shared / "notes" / "vllm.md").is_file():
        return []
    rows = []
    for gpu, model, prec, tp, isl, osl, conc, ttft, tpot in VLLM_MD:
        common = dict(dataset="vllm_md", held_out=gpu == "H200", model=_model(model), gpu=GPUS[gpu], tp=tp,
                      precision=prec, tokens=isl, osl=osl, conc=conc,
                      label=f"{model} {gpu} {prec} tp{tp} {isl}/{osl} c{conc}")
        rows.append(Row(quantity="TPOT", measured_ms=tpot, kind="closed_tpot", **common))
        rows.append(Row(quantity="TTFT", measured_ms=ttft, kind="closed_ttft", **common))
        # capacity: the request rate the engine sustains at that concurrency (Little's law on the
        # measured latencies), req/s
        rows.append(Row(quantity="capacity", measured_ms=conc / (ttft + (osl - 1) * tpot) * 1e3,
                        kind="closed_rate", **common))
    return rows


# Melange (vLLM 0.2.7): max req/s of Llama-2-7B on one GPU per (input, output) bucket. The profiling
# SLO is not stated (the paper's TPOT SLOs are 40 and 120 ms; L4 cannot meet 40 ms): the loose one is
# assumed, TPOT 120 ms and TTFT 5 s, so the rows measure capacity. Buckets are taken at their upper
# edges, and only those with input + output <= 4096 (Llama-2's context).
MELANGE_GPUS = {"L4": "L4", "A10G": "A10G", "A100": "A100-80GB", "H100": "H100"}
MELANGE_SLO = (5000.0, 120.0)


def melange_held_out(i: int, j: int) -> bool:
    """Held-out Melange buckets: every third one on every GPU, (input index + output index) % 3 == 1."""
    return (i + j) % 3 == 1


def load_melange(shared: Path) -> list[Row]:
    """Held out: the buckets of ``melange_held_out`` on every GPU (a checkerboard over sizes, so every
    GPU and batch regime has held-out rows). Predicted with the vLLM 0.2 constants."""
    import json

    f = shared / "data" / "melange-release" / "melange_profiles_llama2-7b_feb2024.json"
    d = json.loads(f.read_text())
    ins, outs = d["input_bucket_upper_edges"], d["output_bucket_upper_edges"]
    rows = []
    for name, table_ in d["tputs"].items():
        for i, row in enumerate(table_):
            for j, measured in enumerate(row):
                if measured <= 0 or ins[i] + outs[j] > 4096:
                    continue
                rows.append(Row(dataset="melange", quantity="capacity", measured_ms=measured,
                                held_out=melange_held_out(i, j), model=_model("llama-2-7b"),
                                gpu=GPUS[MELANGE_GPUS[name]], tp=1, precision="fp16", kind="max_rate",
                                tokens=ins[i], osl=outs[j], engine="vllm-0.2", slo=MELANGE_SLO,
                                label=f"llama2-7b {name} {ins[i]}/{outs[j]}"))
    return rows


def load_silicon(shared: Path) -> list[Row]:
    """The measured vLLM runs vendored in hetinfra/perf/data (aiconfigurator-core's silicon_sample,
    hetinfra.perf.published): TPOT, TTFT and the sustained rate at a fixed concurrency, like vllm_md's
    (a superset of its 23 aiconfigurator rows). Fitted by tools/fit_kernels.py (the current engine's
    step costs), so held out here: they give COVERAGE and RESIDUALS their H100 / H200 regimes."""
    from hetinfra.perf.e2e_checks import plausible_rows, silicon_check

    rows = []
    for r in plausible_rows():
        if silicon_check(r) is None:  # a layout the estimator cannot run (e2e_checks leaves it out too)
            continue
        common = dict(dataset="silicon", held_out=True, model=_model(r.model), gpu=GPUS[r.gpu], tp=r.tp,
                      precision=r.precision, tokens=r.isl, osl=r.osl, conc=r.concurrency, label=r.label,
                      kv_precision=r.kv_precision)
        rows.append(Row(quantity="TPOT", measured_ms=r.tpot_ms, kind="closed_tpot", **common))
        rows.append(Row(quantity="TTFT", measured_ms=r.ttft_ms, kind="closed_ttft", **common))
        rows.append(Row(quantity="capacity", measured_ms=r.rate, kind="closed_rate", **common))
    return rows


LOADERS = {"helix": load_helix, "splitwise": load_splitwise, "sageserve": load_sageserve, "vllm_md": load_vllm_md,
           "melange": load_melange, "silicon": load_silicon}
DATASET_DIRS = {"helix": "data/Helix-ASPLOS25/profiles", "splitwise": "data/splitwise-sim",
                "sageserve": "data/SageServe", "vllm_md": "notes", "melange": "data/melange-release", "silicon": ""}
# data sets another tool fits (tools/fit_kernels.py): every row is held out here
FITTED_ELSEWHERE = {"silicon"}
# the TPOT-like quantity of each data set (the acceptance target applies to it)
PRIMARY = {"helix": "decode step", "splitwise": "TPOT", "sageserve": "TPOT", "vllm_md": "TPOT",
           "melange": "capacity", "silicon": "TPOT"}


def load_rows(shared: Path = SHARED, datasets: list[str] | None = None) -> list[Row]:
    rows = []
    for name, loader in LOADERS.items():
        if datasets and name not in datasets:
            continue
        if not DATASET_DIRS[name] or (shared / DATASET_DIRS[name]).is_dir():  # "": vendored in the package
            rows += loader(shared)
    return rows


# ---- serving engines -------------------------------------------------------------------------------
# The planner's Calibration describes current vLLM (CUDA graphs for decode, custom all-reduce, V1
# engine). A data set measured on another engine carries that engine's CPU / communication step
# overheads; those (and only those) are described by a profile here, fitted on the data set's fit rows
# together with everything else. The GPU-side constants (bandwidth and compute efficiencies,
# overlap, PCIe all-reduce bandwidth, per-GPU factors) stay shared. ``--planner-only`` evaluates every
# data set with the planner's own engine constants instead.
#
# splitwise-2023: the splitwise-sim database (2023, Llama-2-70B / BLOOM on DGX A100 / H100). At batch 1
# its decode step is 10-35 ms above the weight-read time and TP8 decodes no faster than TP4 on either
# GPU, while its prefills (compute-bound) scale with TP as expected: the engine pays a per-collective
# latency that grows with the TP degree (NCCL all-reduce launched eagerly, no CUDA graphs and no
# custom all-reduce), not a GPU property. Profile: fixed step cost, and all-reduce latency =
# allreduce_us_per_log2_tp x log2(tp) (best of 4 forms tried on the fit rows: per-rank fixed cost,
# latency x (tp - 1), x log2(tp), fixed + per-rank).
#
# sageserve-2024: SageServe's Llama-3.x tables (A100 80GB PCIe; the serving engine's build is not
# stated). Its batch-1 TPOT sits 8-10 ms above the weight read, well above the measured vLLM 0.12 runs'
# 1 ms that the current engine's costs come from (tools/fit_kernels.py), so it carries its own step
# cost, fitted like splitwise's (tools/fit_calibration.py --fit-profiles).
ENGINES: dict[str, dict[str, float]] = {
    "splitwise-2023": {"t_fixed_ms": 4.99024, "allreduce_us_per_log2_tp": 40},
    "sageserve-2024": {"t_fixed_ms": 2.60262, "allreduce_us_per_log2_tp": 11.5891},
}
# vLLM versions other than the current one: their overrides live in calibration.py (the planner
# uses them through ``vllm_version``); "vllm-<key>" rows are predicted with them.
ENGINES["vllm-0.2"] = dict(LEGACY_V0_2)


def engine_calibration(row: Row, calib: Calibration, engines: dict[str, dict[str, float]] | None = None) -> Calibration:
    """The constants a row is predicted with: the planner's, or those of the row's engine profile."""
    if row.engine.startswith("vllm-"):  # another vLLM version: calibration.py's overrides for it
        # as calibration.CALIBRATIONS: another engine version keeps the shared GPU constants (no by_gpu)
        return dataclasses.replace(calib, vllm_version=row.engine[5:], by_gpu=(), **(engines or ENGINES)[row.engine])
    if row.engine == "vllm" or engines is None:
        return calib
    prof = engines[row.engine]
    ar = prof["allreduce_us_per_log2_tp"] * math.log2(max(row.tp, 2))
    # a data set's own engine (2023-24 builds) keeps the shared GPU constants: the per-GPU ones
    # (GPU_KERNELS) describe the current vLLM's kernels
    return dataclasses.replace(calib, t_fixed_ms=prof["t_fixed_ms"], allreduce_us_nvlink=ar, allreduce_us_pcie=ar,
                               by_gpu=())


# ---- prediction and errors -------------------------------------------------------------------------

def predict(row: Row, calib: Calibration, engines: dict[str, dict[str, float]] | None = ENGINES) -> float:
    return predict_point(row, calib, engines)[0]


def predict_point(row: Row, calib: Calibration,
                  engines: dict[str, dict[str, float]] | None = ENGINES) -> tuple[float, float]:
    """(predicted value, concurrency of the point): see ``batch_of``."""
    calib = engine_calibration(row, calib, engines)
    kw = dict(tp=row.tp, precision=row.precision, calib=calib)
    if row.kind == "step":
        return decode_step_ms(row.model, row.gpu, batch=row.batch, context=row.context, overheads=row.overheads,
                              **kw), row.batch
    if row.kind == "prefill":
        return prefill_ms(row.model, row.gpu, tokens=row.tokens, batch=row.batch, overheads=row.overheads,
                          **kw), row.batch
    if row.kind == "max_rate":
        e = estimate(row.model, row.gpu, input_tokens=row.tokens, output_tokens=row.osl, ttft_ms=row.slo[0],
                     tpot_ms=row.slo[1], **kw)
        return (e.max_rps, float(e.batch)) if e.feasible else (math.nan, 0.0)
    got = operating_point(row.model, row.gpu, input_tokens=row.tokens, output_tokens=row.osl,
                          concurrency=row.conc, max_num_seqs=1024, kv_precision=row.kv_precision, **kw)
    if isinstance(got, Estimate):
        return math.nan, row.conc
    return {"closed_tpot": got[1], "closed_ttft": got[0], "closed_rate": got[2]}[row.kind], row.conc


def batch_of(row: Row, calib: Calibration, engines: dict | None = ENGINES) -> float:
    """The concurrency of a row: the benchmark's (closed loop, step rows), or that of the estimator's
    operating point (max-rate rows), which is where the planner would run the engine."""
    return predict_point(row, calib, engines)[1]


def coverage(rows: list[Row], calib: Calibration = CALIBRATION, engines: dict | None = ENGINES
             ) -> tuple[tuple[str, str, int, str, int], ...]:
    """calibration.COVERAGE: (GPU, engine, TP, batch regime, rows) over every row (fit and held-out)."""
    count: dict[tuple[str, str, int, str], int] = defaultdict(int)
    for r in rows:
        engine = f"vllm-{CALIBRATION.vllm_version}" if r.engine == "vllm" else r.engine
        b = batch_of(r, calib, engines)
        if b > 0:
            count[(r.gpu.name, engine, r.tp, regime_of(b))] += 1
    order = {name: i for i, (name, _, _) in enumerate(REGIMES)}
    return tuple((*k, n) for k, n in sorted(count.items(), key=lambda kv: (*kv[0][:3], order[kv[0][3]])))


def rate_residuals(rows: list[Row], calib: Calibration = CALIBRATION, engines: dict | None = ENGINES
                   ) -> tuple[tuple[str, str, str, int, float, float, float], ...]:
    """calibration.RESIDUALS: (GPU, engine, batch regime, rows, p10, median, p90) of the signed RATE
    error (predicted / measured rate - 1; + = optimistic) over every row of the group (fit and
    held-out; grouped as COVERAGE is, over TP). A capacity row is a rate; a time row (step, TPOT,
    TTFT, prefill) bounds the rate inversely, so its time error e reads as a rate error 1 / (1 + e) - 1."""
    errs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r, e in zip(rows, rel_errors(rows, calib, engines)):
        b = batch_of(r, calib, engines)
        if b <= 0 or not math.isfinite(e) or e <= -1:
            continue
        engine = f"vllm-{CALIBRATION.vllm_version}" if r.engine == "vllm" else r.engine
        errs[(r.gpu.name, engine, regime_of(b))].append(e if r.quantity == "capacity" else 1.0 / (1.0 + e) - 1.0)
    order = {name: i for i, (name, _, _) in enumerate(REGIMES)}
    return tuple((*k, len(v), *(round(_pctl(v, q), 4) for q in (0.1, 0.5, 0.9)))
                 for k, v in sorted(errs.items(), key=lambda kv: (*kv[0][:2], order[kv[0][2]])))


def rel_errors(rows: list[Row], calib: Calibration, engines: dict | None = ENGINES) -> list[float]:
    """Signed relative error (predicted / measured - 1) per row."""
    return [predict(r, calib, engines) / r.measured_ms - 1.0 for r in rows]


@dataclass
class Stat:
    n: int
    median: float  # median |relative error|
    worst: float  # largest |relative error|
    bias: float  # median signed relative error


def _stat(errs: list[float]) -> Stat | None:
    if not errs:
        return None
    a = [abs(e) if e == e else math.inf for e in errs]
    return Stat(len(errs), statistics.median(a), max(a), statistics.median(e if e == e else math.inf for e in errs))


def evaluate(rows: list[Row], calib: Calibration = CALIBRATION,
             engines: dict | None = ENGINES) -> dict[tuple[str, str], dict[str, Stat | None]]:
    """{(data set, quantity): {"fit": Stat, "held_out": Stat}} for ``calib`` (and the engine profiles;
    ``engines=None``: every row with the planner's own engine constants)."""
    errs: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: {"fit": [], "held_out": []})
    for r, e in zip(rows, rel_errors(rows, calib, engines)):
        errs[(r.dataset, r.quantity)]["held_out" if r.held_out else "fit"].append(e)
    return {k: {s: _stat(v) for s, v in d.items()} for k, d in errs.items()}


def table(result: dict, title: str = "") -> str:
    head = (f"| data set | quantity | rows fit / held-out | fit median | fit worst | held-out median | "
            f"held-out worst | bias fit / held-out |")
    lines = [title, head, "|" + "---|" * 8] if title else [head, "|" + "---|" * 8]

    def pct(x):
        return "-" if x is None else ("inf" if x == math.inf else f"{100 * x:.0f}%")

    def order(kv):
        (ds, q), _ = kv
        return list(LOADERS).index(ds), q != PRIMARY[ds], q

    for (ds, q), d in sorted(result.items(), key=order):
        f, h = d["fit"], d["held_out"]
        lines.append(f"| {ds} | {q}{' *' if q == PRIMARY[ds] else ''} | {f.n if f else 0} / {h.n if h else 0} | "
                     f"{pct(f and f.median)} | {pct(f and f.worst)} | {pct(h and h.median)} | {pct(h and h.worst)} | "
                     f"{'-' if not f else f'{100 * f.bias:+.0f}%'} / {'-' if not h else f'{100 * h.bias:+.0f}%'} |")
    return "\n".join(lines)


# ---- the search -------------------------------------------------------------------------------------
# (parameter, lower bound, upper bound). "mfu_scale:<GPU>" is an entry of mfu_scale_by_gpu;
# "engine:<profile>:<key>" a value of ENGINES. Everything else is a Calibration field.
SEARCH = [
    ("t_fixed_ms", 0.5, 10.0), ("t_per_seq_us", 0.0, 300.0),
    ("allreduce_us_nvlink", 2.0, 60.0), ("allreduce_us_pcie", 5.0, 300.0), ("pcie_allreduce_efficiency", 0.05, 1.0),
    ("mem_compute_serial", 0.0, 1.0), ("mfu_prefill", 0.2, 0.95), ("mfu_decode", 0.2, 0.95),
    ("prefill_dispatch_ms_per_layer", 0.0, 1.5), ("qf_slope", 0.0, 1.0), ("qf_cap", 1.0, 8.0),
    ("mfu_scale:L4", 0.3, 1.2), ("mfu_scale:T4", 0.3, 1.2),
    ("engine:splitwise-2023:t_fixed_ms", 0.0, 20.0), ("engine:splitwise-2023:allreduce_us_per_log2_tp", 2.0, 300.0),
    ("engine:sageserve-2024:t_fixed_ms", 0.0, 20.0), ("engine:sageserve-2024:allreduce_us_per_log2_tp", 2.0, 300.0),
    # eta_kv and cpu_gpu_overlap of the current engine are not searched: a free fit sets eta_kv 0.46
    # from vllm.md's long-context points and breaks Helix's held-out MHA model (28% decode error)
    ("t_per_request_ms", 0.0, 20.0), ("kv_reservation_fraction", 0.5, 1.0),
    ("engine:vllm-0.2:t_fixed_ms", 0.5, 40.0), ("engine:vllm-0.2:t_per_seq_us", 0.0, 3000.0),
    ("engine:vllm-0.2:t_per_request_ms", 0.0, 100.0), ("engine:vllm-0.2:eta_kv", 0.1, 1.0),
    ("engine:vllm-0.2:cpu_gpu_overlap", 0.0, 1.0),
]
WEIGHTS = {"decode step": 1.0, "TPOT": 1.0, "prefill": 0.5, "TTFT": 0.5, "capacity": 1.0}
# The estimator errs on the safe side: a (GPU, batch regime) group of capacity rows whose median
# signed error is optimistic by more than SAFE_MARGIN costs SAFETY x the excess.
SAFETY, SAFE_MARGIN, SAFE_MIN_ROWS = 2.0, 0.0, 3  # groups of fewer rows are too noisy to steer the fit


def get_param(name: str, calib: Calibration, engines: dict) -> float:
    if name.startswith("mfu_scale:"):
        return dict(calib.mfu_scale_by_gpu).get(name.split(":", 1)[1], 1.0)
    if name.startswith("engine:"):
        _, eng, key = name.split(":")
        return engines[eng][key]
    return getattr(calib, name)


def set_param(name: str, value: float, calib: Calibration, engines: dict) -> tuple[Calibration, dict]:
    if name.startswith("mfu_scale:"):
        gpu = name.split(":", 1)[1]
        scales = dict(calib.mfu_scale_by_gpu)
        scales[gpu] = value
        return dataclasses.replace(calib, mfu_scale_by_gpu=tuple(sorted(scales.items()))), engines
    if name.startswith("engine:"):
        _, eng, key = name.split(":")
        return calib, {**engines, eng: {**engines[eng], key: value}}
    return dataclasses.replace(calib, **{name: value}), engines


def capacity_groups(rows: list[Row], calib: Calibration, engines: dict | None = ENGINES
                    ) -> dict[tuple[str, str], list[tuple[Row, float, float]]]:
    """Capacity rows (predicted / measured req/s - 1, positive = optimistic) by (GPU, batch regime):
    {(gpu, regime): [(row, signed error, batch), ...]}."""
    out: dict[tuple[str, str], list] = defaultdict(list)
    for r in rows:
        if r.quantity != "capacity":
            continue
        v, b = predict_point(r, calib, engines)
        out[(r.gpu.name, regime_of(b) if b > 0 else REGIMES[0][0])].append((r, v / r.measured_ms - 1.0, b))
    return out


def objective(rows: list[Row], calib: Calibration, engines: dict) -> float:
    """Mean over data sets of sum_q weight_q x median |err_q| + 0.1 x mean |log(1 + err)|, plus the
    safety term: SAFETY x the median signed capacity error of every (GPU, batch regime) group that is
    optimistic beyond SAFE_MARGIN, averaged over groups; fit rows only."""
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cap: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        v, b = predict_point(r, calib, engines)
        e = v / r.measured_ms - 1.0
        per[r.dataset][r.quantity].append(e)
        if r.quantity == "capacity" and e == e:
            cap[(r.gpu.name, regime_of(b) if b > 0 else REGIMES[0][0])].append(e)
    total = 0.0
    for qs in per.values():
        score, logs = 0.0, []
        for q, errs in qs.items():
            if any(e != e or e <= -1.0 for e in errs):
                return math.inf
            score += WEIGHTS[q] * statistics.median(abs(e) for e in errs)
            logs += [abs(math.log1p(e)) for e in errs]
        total += score + 0.1 * statistics.fmean(logs)
    safety = [max(0.0, statistics.median(v) - SAFE_MARGIN) for v in cap.values() if len(v) >= SAFE_MIN_ROWS]
    return total / len(per) + (SAFETY * statistics.fmean(safety) if safety else 0.0)


def search(rows: list[Row], calib: Calibration = CALIBRATION, engines: dict | None = None,
           params=None, rounds: int = 40, log=print) -> tuple[Calibration, dict, float]:
    """Coordinate search on fit rows: each round tries every parameter at multiplicative steps
    (x (1 +- s), s halving every round from 0.4) within its bounds and keeps any improvement."""
    fit_rows = [r for r in rows if not r.held_out]
    params = SEARCH if params is None else params
    engines = {k: dict(v) for k, v in (engines or ENGINES).items()}
    best = objective(fit_rows, calib, engines)
    step = 0.4
    for rnd in range(rounds):
        improved = False
        for name, lo, hi in params:
            cur = get_param(name, calib, engines)
            base = cur if cur > 0 else 0.05 * (hi - lo)
            for f in (1 - step, 1 - step / 2, 1 + step / 2, 1 + step, 1e-9):
                v = min(hi, max(lo, base * f if f > 1e-6 else lo))
                if v == cur:
                    continue
                c2, e2 = set_param(name, v, calib, engines)
                o = objective(fit_rows, c2, e2)
                if o < best - 1e-9:
                    best, calib, engines, cur, improved = o, c2, e2, v, True
        log(f"round {rnd + 1}: step {step:.3f} objective {best:.4f}")
        if not improved:
            step /= 2
            if step < 0.01:
                break
    return calib, engines, best


# The search starts from the previous hand fit (the constants shipped before this script existed,
# with the two constants it added at their neutral values) and from two more points: the landscape has
# a basin near the ideal roofline (mem_compute_serial ~0.2) and one where memory and compute time
# largely add up (~0.7); the best end point wins. Starting from fixed points makes --fit reproducible
# whatever calibration.py holds.
PRIOR = {"t_fixed_ms": 3.0, "t_per_seq_us": 80.0, "allreduce_us_nvlink": 8.6, "allreduce_us_pcie": 25.0,
         "pcie_allreduce_efficiency": 1.0, "mem_compute_serial": 0.0, "mfu_prefill": 0.6, "mfu_decode": 0.6,
         "prefill_dispatch_ms_per_layer": 0.4, "qf_slope": 0.4, "qf_cap": 4.0, "mfu_scale:L4": 0.65,
         "mfu_scale:T4": 0.7, "engine:splitwise-2023:t_fixed_ms": 5.0,
         "engine:splitwise-2023:allreduce_us_per_log2_tp": 40.0, "eta_kv": 0.78, "t_per_request_ms": 0.0,
         "kv_reservation_fraction": 1.0, "engine:vllm-0.2:t_fixed_ms": 5.0, "engine:vllm-0.2:t_per_seq_us": 300.0,
         "engine:vllm-0.2:t_per_request_ms": 10.0, "engine:vllm-0.2:eta_kv": 0.5, "cpu_gpu_overlap": 0.0,
         "engine:vllm-0.2:cpu_gpu_overlap": 0.8}
STARTS = [{}, {"mem_compute_serial": 0.5, "t_per_seq_us": 20.0}, {"mem_compute_serial": 1.0, "mfu_decode": 0.6}]


def prior(calib: Calibration = CALIBRATION) -> tuple[Calibration, dict]:
    engines = {k: dict(v) for k, v in ENGINES.items()}
    for name, value in PRIOR.items():
        calib, engines = set_param(name, value, calib, engines)
    return calib, engines


def fit(rows: list[Row], log=print) -> tuple[Calibration, dict, float]:
    """Best end point of ``search`` over STARTS (applied on top of PRIOR); fit rows only."""
    best = None
    for i, start in enumerate(STARTS):
        calib, engines = prior()
        for name, value in start.items():
            calib, engines = set_param(name, value, calib, engines)
        got = search(rows, calib, engines, log=lambda m: log(f"start {i + 1}: {m}"))
        if best is None or got[2] < best[2]:
            best = got
    return best


# ---- cross-check, not fitted: Mélange max rates ----------------------------------------------------
MELANGE_GPUS = {"L4": "L4", "A10G": "A10G", "A100": "A100-80GB", "H100": "H100"}


def melange_crosscheck(shared: Path, calib: Calibration, tpot_ms: float = 120.0, ttft_ms: float = 5000.0) -> str:
    """Predicted / measured max req/s of Llama-2-7B per GPU over the Mélange buckets (upper edges,
    input + output <= 4096). Not fitted and not in the acceptance: the profiling SLO is not stated
    (a loose TPOT SLO is assumed here) and the engine (vLLM 0.2.7) was CPU-bound on big GPUs."""
    import json

    from hetinfra.perf.estimator import estimate

    f = shared / "data" / "melange-release" / "melange_profiles_llama2-7b_feb2024.json"
    if not f.is_file():
        return ""
    d = json.loads(f.read_text())
    ins, outs = d["input_bucket_upper_edges"], d["output_bucket_upper_edges"]
    lines = [f"| GPU | buckets | median predicted/measured req/s | range |", "|---|---|---|---|"]
    for name, table_ in d["tputs"].items():
        ratios = []
        for i, row in enumerate(table_):
            for j, measured in enumerate(row):
                if measured <= 0 or ins[i] + outs[j] > 4096:
                    continue
                e = estimate(MODELS["llama-2-7b"], GPUS[MELANGE_GPUS[name]], tp=1, input_tokens=ins[i],
                             output_tokens=outs[j], ttft_ms=ttft_ms, tpot_ms=tpot_ms, precision="fp16", calib=calib)
                if e.feasible:
                    ratios.append(e.max_rps / measured)
        if ratios:
            lines.append(f"| {name} | {len(ratios)} | {statistics.median(ratios):.2f} | "
                         f"{min(ratios):.2f}-{max(ratios):.2f} |")
    return "\n".join(lines)


def _pctl(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, linear between order statistics."""
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    x = q * (len(v) - 1)
    i = int(x)
    return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)


def capacity_report(rows: list[Row], calib: Calibration = CALIBRATION, engines: dict | None = ENGINES,
                    part: str = "held_out") -> dict[tuple[str, str, str], dict[str, float]]:
    """{(data set, GPU, regime): {"n", "median", "p90", "abs_median"}} of the signed capacity error
    (predicted / measured req/s - 1; positive = optimistic) over the ``part`` rows ("held_out", "fit"
    or "all"); plus ("all", "all", "all") over every row of the part."""
    keep = [r for r in rows if part == "all" or r.held_out == (part == "held_out")]
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for (gpu, regime), items in capacity_groups(keep, calib, engines).items():
        for r, e, _ in items:
            groups[(r.dataset, gpu, regime)].append(e)
            groups[("all", "all", "all")].append(e)
    return {k: {"n": len(v), "median": statistics.median(v), "p90": _pctl(v, 0.9),
                "abs_median": statistics.median(abs(e) for e in v)} for k, v in groups.items()}


def capacity_table(report: dict, title: str = "") -> str:
    order = {name: i for i, (name, _, _) in enumerate(REGIMES)}
    lines = ([title] if title else []) + [
        "| data set (vLLM) | GPU | batch regime | rows | signed median | signed p90 | median abs |", "|" + "---|" * 7]
    for k in sorted(report, key=lambda k: (k[0] == "all", k[0], k[1], order.get(k[2], 9))):
        s = report[k]
        ds = {"melange": "melange (0.2.7)", "vllm_md": "vllm_md (0.12+)"}.get(k[0], k[0])
        lines.append(f"| {ds} | {k[1]} | {k[2]} | {s['n']} | {100 * s['median']:+.0f}% | {100 * s['p90']:+.0f}% | "
                     f"{100 * s['abs_median']:.0f}% |")
    return "\n".join(lines)


def format_calibration(calib: Calibration, engines: dict) -> str:
    lines = [f"{name} = {get_param(name, calib, engines):.4g}" for name, _, _ in SEARCH]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=SHARED, help="the shared folder (default: ../shared)")
    ap.add_argument("--fit", action="store_true", help="run the coordinate search from the shipped constants")
    ap.add_argument("--write", action="store_true", help="with --fit: rewrite calibration.py and ENGINES")
    ap.add_argument("--max-serial", type=float, default=None,
                    help="with --fit: upper bound of mem_compute_serial (0.3 keeps PP throughput within 10%% of "
                         "TP at tight TPOT SLOs, as tests/perf/test_estimator.py expects; see docs/calibration.md)")
    ap.add_argument("--planner-only", action="store_true",
                    help="also evaluate every data set with the planner's engine constants (no engine profiles)")
    ap.add_argument("--melange", action="store_true",
                    help="also print the Melange max-rate cross-check (not fitted: SLO unknown, vLLM 0.2.7)")
    ap.add_argument("--write-residuals", action="store_true",
                    help="rewrite calibration.RESIDUALS (rate error quantiles per GPU, engine and batch regime) with "
                         "the shipped constants (--fit --write also rewrites it, with the fitted ones)")
    ap.add_argument("--fit-profiles", action="store_true",
                    help="fit only the data sets' engine profiles (ENGINES: splitwise-2023, sageserve-2024), every "
                         "planner constant fixed; with --write, rewrite ENGINES, COVERAGE and RESIDUALS")
    ap.add_argument("--rows", action="store_true", help="list every row: measured, predicted, error")
    ap.add_argument("--report", action="store_true",
                    help="capacity error per data set, GPU and batch regime on the held-out rows (and the fit rows)")
    args = ap.parse_args(argv)
    rows = load_rows(args.shared)
    if not rows:
        print(f"no data sets under {args.shared}", file=sys.stderr)
        return 1
    calib, engines = CALIBRATION, ENGINES
    print(table(evaluate(rows, calib, engines), "Shipped constants (hetinfra/perf/calibration.py, ENGINES)"))
    if args.fit:
        if args.max_serial is not None:
            global SEARCH
            SEARCH = [(n, lo, min(hi, args.max_serial) if n == "mem_compute_serial" else hi) for n, lo, hi in SEARCH]
            STARTS[1:] = [{**s, "mem_compute_serial": min(s["mem_compute_serial"], args.max_serial)} for s in STARTS[1:]]
        calib, engines, obj = fit(rows, log=lambda m: print(m, file=sys.stderr))
        calib, engines = round_sig(calib, engines)
        obj = objective([r for r in rows if not r.held_out], calib, engines)
        print()
        print(table(evaluate(rows, calib, engines), f"Fitted constants, rounded to 3 digits (objective {obj:.4f})"))
        print()
        print(format_calibration(calib, engines))
        if args.write:
            write_calibration(calib, engines, cover=coverage(rows, calib, engines),
                              residuals=rate_residuals(rows, calib, engines))
    elif args.fit_profiles:
        params = [p for p in SEARCH if p[0].startswith(("engine:splitwise-2023:", "engine:sageserve-2024:"))]
        _, engines, obj = search(rows, calib, engines, params=params, log=lambda m: print(m, file=sys.stderr))
        print(table(evaluate(rows, calib, engines), f"Engine profiles fitted (objective {obj:.4f})"))
        print({k: v for k, v in engines.items() if not k.startswith("vllm-")})
        if args.write:
            write_calibration(calib, engines, cover=coverage(rows, calib, engines),
                              residuals=rate_residuals(rows, calib, engines))
    elif args.write_residuals:
        write_table(TABLES_PY, "RESIDUALS", rate_residuals(rows, calib, engines))
    if args.planner_only:
        print()
        print(table(evaluate(rows, calib, None), "Every data set with the planner's engine constants"))
    if args.melange:
        print()
        print(melange_crosscheck(args.shared, calib))
    if args.report:
        print()
        print(capacity_table(capacity_report(rows, calib, engines, "held_out"),
                             "Capacity error on the HELD-OUT rows (predicted / measured req/s - 1; + = optimistic)"))
        print()
        print(capacity_table(capacity_report(rows, calib, engines, "fit"), "Capacity error on the fit rows"))
    if args.rows:
        for r, e in zip(rows, rel_errors(rows, calib, engines)):
            print(f"{r.dataset:10s} {r.quantity:12s} {'H' if r.held_out else 'F'} {r.label:48s} "
                  f"measured {r.measured_ms:9.2f}  predicted {r.measured_ms * (1 + e):9.2f}  {100 * e:+6.0f}%")
    return 0


def _table_text(text: str, name: str, table_rows: tuple) -> str:
    """calibration.py's text with the tuple literal ``name`` (one entry a line) replaced by ``table_rows``."""
    body = "".join(f"    {c!r},\n".replace("'", '"') for c in table_rows)
    # [^\n]*: the header stays on its line (a greedy .* under re.S ran on to RESIDUALS' header and left
    # COVERAGE as it was)
    text, n = re.subn(rf"^({name}: tuple\[[^\n]*\] = \(\n).*?^\)$", lambda m: m.group(1) + body + ")", text,
                      flags=re.M | re.S)
    assert n == 1, name
    return text


def write_table(path: Path, name: str, table_rows: tuple) -> None:
    path.write_text(_table_text(path.read_text(), name, table_rows))
    print(f"wrote {name} of {path}", file=sys.stderr)


def round_sig(calib: Calibration, engines: dict, digits: int = 3) -> tuple[Calibration, dict]:
    """The fitted values rounded to ``digits`` significant digits (what --write ships)."""
    def r(x: float) -> float:
        return float(f"{x:.{digits}g}")
    for name, _, _ in SEARCH:
        calib, engines = set_param(name, r(get_param(name, calib, engines)), calib, engines)
    return calib, engines


def write_calibration(calib: Calibration, engines: dict, path: Path = CALIBRATION_PY,
                      script: Path = Path(__file__), cover: tuple | None = None,
                      residuals: tuple | None = None, tables_path: Path = TABLES_PY) -> None:
    """Rewrite the fitted values in calibration.py (``name: type = value`` lines, the mfu_scale_by_gpu
    tuple and the FIT date line), the COVERAGE / RESIDUALS tables in ``tables_path`` and the ENGINES
    profiles in this script; comments stay as they are."""
    text = path.read_text()
    for name, _, _ in SEARCH:
        if name.startswith("engine:vllm-0.2:"):  # calibration.py's LEGACY_V0_2 dict
            key = name.split(":")[2]
            text, n = re.subn(rf'^(    "{key}": )[-0-9.eE+]+,$', rf"\g<1>{float(get_param(name, calib, engines))!r},",
                              text, flags=re.M)
            assert n == 1, name
            continue
        if name.startswith(("mfu_scale:", "engine:")):
            continue
        text, n = re.subn(rf"^(    {name}: float = )[-0-9.eE+]+$", rf"\g<1>{float(get_param(name, calib, engines))!r}",
                          text, flags=re.M)
        assert n == 1, name
    scales = ", ".join(f"({g!r}, {float(v)!r})".replace("'", '"') for g, v in calib.mfu_scale_by_gpu)
    text, n = re.subn(r"^(    mfu_scale_by_gpu: tuple\[tuple\[str, float\], \.\.\.\] = ).*$",
                      rf"\g<1>({scales},)" if len(calib.mfu_scale_by_gpu) == 1 else rf"\g<1>({scales})",
                      text, flags=re.M)
    assert n == 1, "mfu_scale_by_gpu"
    if cover is not None or residuals is not None:  # the recorded tables' own module
        tables = tables_path.read_text()
        for name, table_rows in (("COVERAGE", cover), ("RESIDUALS", residuals)):
            if table_rows is not None:
                tables = _table_text(tables, name, table_rows)
        tables_path.write_text(tables)
    text, n = re.subn(r"^FIT: .*$", f"FIT: tools/fit_calibration.py --write (shared constants), {datetime.date.today()}",
                      text, flags=re.M)
    assert n == 1, "FIT line"
    path.write_text(text)
    src = script.read_text()
    body = ",\n".join(f"    {k!r}: {{{', '.join(f'{kk!r}: {vv:g}' for kk, vv in v.items())}}}".replace("'", '"')
                      for k, v in engines.items() if not k.startswith("vllm-"))
    src, n = re.subn(r"^ENGINES: dict\[str, dict\[str, float\]\] = \{\n.*?^\}$",
                     "ENGINES: dict[str, dict[str, float]] = {\n" + body + ",\n}", src, flags=re.M | re.S)
    assert n == 1, "ENGINES"
    script.write_text(src)
    print(f"wrote {path} and the ENGINES of {script}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
