#!/usr/bin/env python3
"""The built-in estimator against the measured-kernel backend (hetinfra.perf.aic_backend) on a spread
of points: 8B, 32B, 70B and MoE models; bf16 and fp8; TP 1-8; short and long requests; tight and
loose TPOT; A100-80GB, H100, H200, L40S (issue 35's acceptance table). Needs aiconfigurator-core.

    .venv/bin/python tools/compare_aic.py            # the table and its summary (~1 min)

Error = built-in rate / backend rate - 1 (+ = the built-in estimate is optimistic against the kernels).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hetinfra.catalog.gpus import GPUS  # noqa: E402
from hetinfra.catalog.models import MODELS  # noqa: E402
from hetinfra.perf import aic_backend  # noqa: E402
from hetinfra.perf.estimator import estimate  # noqa: E402

# (model, GPU, TP, precision): every model class on every GPU, TP 1-8
LAYOUTS = (
    ("llama-3.1-8b", "H100", 1, "bf16"), ("llama-3.1-8b", "H100", 1, "fp8"), ("llama-3.1-8b", "H200", 1, "bf16"),
    ("llama-3.1-8b", "A100-80GB", 1, "bf16"), ("llama-3.1-8b", "L40S", 1, "bf16"), ("llama-3.1-8b", "L40S", 1, "fp8"),
    ("qwen3-32b", "H100", 2, "bf16"), ("qwen3-32b", "H100", 1, "fp8"), ("qwen3-32b", "H200", 1, "bf16"),
    ("qwen3-32b", "A100-80GB", 2, "bf16"), ("qwen3-32b", "L40S", 4, "bf16"), ("qwen3-32b", "L40S", 2, "fp8"),
    ("llama-3.1-70b", "H100", 4, "bf16"), ("llama-3.1-70b", "H100", 8, "bf16"), ("llama-3.1-70b", "H100", 2, "fp8"),
    ("llama-3.1-70b", "H200", 2, "bf16"), ("llama-3.1-70b", "H200", 1, "fp8"), ("llama-3.1-70b", "A100-80GB", 4, "bf16"),
    ("llama-3.1-70b", "L40S", 8, "bf16"), ("llama-3.1-70b", "L40S", 4, "fp8"),
    ("qwen3-30b-a3b", "H100", 2, "bf16"), ("qwen3-30b-a3b", "H200", 1, "bf16"), ("qwen3-30b-a3b", "A100-80GB", 2, "bf16"),
    ("qwen3-30b-a3b", "L40S", 2, "bf16"),
)
# (input, output, TTFT ms): short chat and long-context requests
REQUESTS = ((512, 256, 2000.0), (8192, 512, 8000.0))
# TPOT SLOs (tight, loose) per model size
TPOTS = {"llama-3.1-8b": (15.0, 60.0), "qwen3-32b": (30.0, 100.0), "llama-3.1-70b": (40.0, 120.0),
         "qwen3-30b-a3b": (20.0, 80.0)}


def points(layouts=LAYOUTS):
    """(layout, request, TPOT, built-in rate, backend rate) of every feasible point."""
    for model, gpu, tp, prec in layouts:
        calib = aic_backend.layout_calibration(model, gpu, tp, prec)
        for isl, osl, ttft in REQUESTS:
            for tpot in TPOTS[model]:
                kw = dict(tp=tp, input_tokens=isl, output_tokens=osl, ttft_ms=ttft, tpot_ms=tpot, precision=prec)
                ours = estimate(MODELS[model], GPUS[gpu], **kw)
                theirs = estimate(MODELS[model], GPUS[gpu], calib=calib, **kw)
                if ours.feasible and theirs.feasible:
                    yield (model, gpu, tp, prec), (isl, osl), tpot, ours, theirs


def table(rows) -> str:
    lines = ["| model | GPU | TP | precision | in/out | TPOT ms | built-in req/s (binding) | kernels req/s "
             "(binding) | error |", "|---|---|---|---|---|---|---|---|---|"]
    for (model, gpu, tp, prec), (isl, osl), tpot, ours, theirs in rows:
        lines.append(f"| {model} | {gpu} | {tp} | {prec} | {isl}/{osl} | {tpot:g} | {ours.max_rps:.2f} ({ours.binding}) "
                     f"| {theirs.max_rps:.2f} ({theirs.binding}) | {ours.max_rps / theirs.max_rps - 1:+.0%} |")
    return "\n".join(lines)


def summary(rows) -> dict[str, float]:
    errs = [ours.max_rps / theirs.max_rps - 1 for *_, ours, theirs in rows]
    return {"points": len(errs), "median_abs": statistics.median(abs(e) for e in errs),
            "median": statistics.median(errs), "optimistic_over_15": sum(e > 0.15 for e in errs) / len(errs)}


def main() -> int:
    if not aic_backend.available():
        print("aiconfigurator-core is not installed: pip install 'hetinfra[aiconfigurator]'", file=sys.stderr)
        return 1
    rows = list(points())
    print(table(rows))
    s = summary(rows)
    print(f"\n{s['points']} points: median |error| {s['median_abs']:.1%} (goal <= 12%), median {s['median']:+.1%}, "
          f"more than 15% optimistic on {s['optimistic_over_15']:.0%} of the points (goal <= 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
