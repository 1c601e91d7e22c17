#!/usr/bin/env python3
"""Extract per-step times from NVIDIA aiconfigurator-core's measured-kernel database (Apache-2.0)
into hetinfra/perf/data/aic_steps.json, the table ``tools/fit_calibration.py`` fits the built-in
step model's per-GPU constants on (docs/calibration.md, "Measured kernels").

Needs aiconfigurator-core (``pip install 'hetinfra[aiconfigurator]'``, or a scratch venv):

    HF_HUB_OFFLINE=1 /tmp/aicvenv/bin/python tools/aic_steps.py   # rewrite the table (~3 min on 2 cores)
    /tmp/aicvenv/bin/python tools/aic_steps.py --check    # compare with the stored table, exit 1 if it moved
    /tmp/aicvenv/bin/python tools/aic_steps.py --silicon  # rewrite aic_silicon_vllm.csv (measured vLLM runs)

Every row is one engine step of vLLM (the database's vLLM slot for that GPU) as aiconfigurator
composes it from measured GEMM / attention / all-reduce kernel timings: a decode-only step of
``batch`` sequences attending ``context`` tokens, a prefill of one ``context``-token prompt, or a
mixed step (``chunk`` prompt tokens of a ``context``-token prompt plus ``batch`` decodes). Times are
GPU work only: no scheduler / sampler cost (aiconfigurator adds its own CPU terms in its agg model).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "hetinfra" / "perf" / "data" / "aic_steps.json"
SILICON_OUT = OUT.with_name("aic_silicon_vllm.csv")
# the (system, model) pairs of silicon_sample.csv's vLLM agg rows the end-to-end checks use
SILICON = {("h100_sxm", "Qwen/Qwen3-32B"), ("h200_sxm", "nvidia/Llama-3.1-8B-Instruct-FP8"),
           ("h200_sxm", "meta-llama/Llama-3.1-70B"), ("h100_sxm", "meta-llama/Llama-3.1-70B"),
           ("h200_sxm", "Qwen/Qwen3-235B-A22B-FP8")}
SILICON_COLUMNS = ("id", "silicon_data_source", "backend_version", "model_path", "system", "gemm_quant_mode",
                   "moe_quant_mode", "isl", "osl", "batch_size", "tp_size", "pp_size", "attention_dp_size",
                   "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms")


def write_silicon() -> int:
    """Copy the measured vLLM runs the checks use out of the wheel's silicon_sample.csv."""
    import csv
    from importlib.resources import files

    src = files("aiconfigurator_core") / "systems" / "silicon_sample.csv"
    with src.open() as fh, SILICON_OUT.open("w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=SILICON_COLUMNS)
        w.writeheader()
        n = 0
        for r in csv.DictReader(fh):
            if r["backend"] == "vllm" and r["mode"] == "agg" and (r["system"], r["model_path"]) in SILICON:
                w.writerow({c: r[c] for c in SILICON_COLUMNS})
                n += 1
    print(f"wrote {n} runs to {SILICON_OUT}")
    return 0

# hetinfra catalog GPU -> aiconfigurator system
SYSTEMS = {"A100-80GB": "a100_sxm", "H100": "h100_sxm", "H200": "h200_sxm", "L40S": "l40s"}
# hetinfra catalog model -> aiconfigurator model_configs name; the MoE is Qwen3-30B-A3B (experts TP-sharded, vLLM's default without --enable-expert-parallel)
MODELS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "qwen3-32b": "Qwen/Qwen3-32B",
          "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B"}
# weights (GB at bf16) that must fit in 90% of tp GPUs' memory with room for KV
_WEIGHTS_GB = {"llama-3.1-8b": 16, "qwen3-32b": 65, "llama-3.1-70b": 141, "qwen3-30b-a3b": 61}
_MEM_GB = {"A100-80GB": 80, "H100": 80, "H200": 141, "L40S": 48}
FP8 = {"H100", "H200", "L40S"}  # GPUs with fp8 tensor cores (A100: none)
DECODE_BATCHES = (1, 4, 16, 64, 256)
CONTEXTS = (1024, 8192)
# (context, batch) of decode steps at large batches of short context (``--short-decodes``, not in the
# shipped table): the regime of chat-sized requests at saturation (MLPerf's OpenOrca at 222 / ~300 tokens
# runs 250-500 sequences per engine), where the fp8 GEMM tiles make the measured step far from linear in
# the batch. Fitted with them the built-in model moves every plan (docs/calibration.md, "The short-context
# kernel rows: tried, not shipped")
SHORT_DECODES = ((256, 128), (256, 256), (256, 384), (256, 512), (1024, 512))
PREFILLS = (256, 1024, 4096, 16384)
MIXED = ((512, 16, 2048), (2048, 16, 2048), (2048, 128, 2048), (8192, 64, 8192))  # (chunk, decodes, context)


def configs():
    for gpu in SYSTEMS:
        for model in MODELS:
            for prec in ("bf16", "fp8") if gpu in FP8 else ("bf16",):
                for tp in (1, 2, 4, 8):
                    need = _WEIGHTS_GB[model] * (0.5 if prec == "fp8" else 1.0)
                    if need > 0.7 * tp * _MEM_GB[gpu] or (need * 4 < tp * _MEM_GB[gpu] * 0.7 and tp > 1 and tp >= 4):
                        continue  # does not fit, or far more GPUs than the weights need
                    yield gpu, model, prec, tp


def extract(gpu: str, model: str, prec: str, tp: int, short_decodes: bool = False) -> list[dict]:
    from aiconfigurator_core.sdk.engine import EngineHandle

    h = EngineHandle.compile(MODELS[model], SYSTEMS[gpu], "vllm", tp_size=tp, moe_tp_size=tp,
                             gemm_quant_mode="fp8" if prec == "fp8" else None,
                             moe_quant_mode="fp8" if prec == "fp8" else None)
    base = {"gpu": gpu, "model": model, "precision": prec, "tp": tp}
    rows = []
    decodes = [(ctx, b) for ctx in CONTEXTS for b in DECODE_BATCHES] + list(SHORT_DECODES if short_decodes else ())
    for ctx, b in decodes:
        rows.append({**base, "kind": "decode", "batch": b, "context": ctx, "chunk": 0,
                     "ms": round(h.decode_step_latency(b, ctx, 2), 4)})
    for n in PREFILLS:
        rows.append({**base, "kind": "prefill", "batch": 0, "context": n, "chunk": n,
                     "ms": round(h.predict_prefill_latency(1, n), 4)})
    for chunk, b, ctx in MIXED:
        rows.append({**base, "kind": "mixed", "batch": b, "context": ctx, "chunk": chunk,
                     "ms": round(h.mixed_step_latency(chunk, b, ctx, 2), 4)})
    return rows


def build(short_decodes: bool = False) -> dict:
    import importlib.metadata as md

    rows = []
    for cfg in configs():
        rows += extract(*cfg, short_decodes=short_decodes)
        print(*cfg, file=sys.stderr)
    return {
        "source": "aiconfigurator-core " + md.version("aiconfigurator-core") + " (PyPI wheel; "
                  "github.com/ai-dynamo/aiconfigurator), vLLM database slot per system "
                  "(systems/query_versions.yaml: vllm 0.24.0; a100_sxm 0.14.0)",
        "licence": "Apache-2.0 (the wheel's measured kernel database and model configs); these rows are "
                   "derived from it by tools/aic_steps.py",
        "systems": SYSTEMS, "models": MODELS, "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored table instead of writing it")
    ap.add_argument("--silicon", action="store_true", help="rewrite aic_silicon_vllm.csv (the measured runs) instead")
    ap.add_argument("--short-decodes", action="store_true",
                    help="add SHORT_DECODES (large batches of short context; an experiment, not the shipped table)")
    args = ap.parse_args(argv)
    if args.silicon:
        return write_silicon()
    logging.disable(logging.WARNING)
    doc = build(args.short_decodes)
    if args.check:
        old = json.loads(OUT.read_text())
        moved = [(a, b) for a, b in zip(old["rows"], doc["rows"]) if a != b]
        print(f"{len(moved)} of {len(doc['rows'])} rows differ")
        return 1 if moved or len(old["rows"]) != len(doc["rows"]) else 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"wrote {len(doc['rows'])} rows to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
